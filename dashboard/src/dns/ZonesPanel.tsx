/**
 * Custom zones: the list (name, domain, distribution groups, search
 * domain, state, record count), refreshed live, each linking to its
 * records; create, edit and delete (confirmed, with its records). The
 * zone form is shared with the zone's own page.
 */
import { Anchor, Button, Group, MultiSelect, Stack, Switch, Table, Text, TextInput } from "@mantine/core";
import { useMemo, useState } from "react";
import { Link as RouterLink } from "react-router";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { Allowed } from "../common/Allowed";
import { ConfirmModal } from "../common/ConfirmModal";
import { FormModal, useFormModal } from "../common/FormModal";
import { ListTable, RowActions } from "../common/ListTable";
import { deniedReason } from "../common/permissions";
import { useCurrentUser } from "../common/useCurrentUser";
import { Unavailable, type Option } from "../routing/controls";
import { fromZone, newZone, validateZone, zoneErrorField, zoneRequest, type Zone, type ZoneField, type ZoneForm } from "./form";

export function ZoneModal({ editing, groupData, onClose, onDone }: { editing: Zone | "new" | null; groupData: Option[]; onClose: () => void; onDone: (z: Zone) => void }) {
  const { api } = useApp();
  const { f, errors, busy, set, submit } = useFormModal<Zone, ZoneForm, ZoneField>(editing, (z) => (z ? fromZone(z) : newZone()));
  const isNew = editing === "new";
  return (
    <FormModal
      opened={editing !== null}
      onClose={onClose}
      title={isNew ? "Create a zone" : `Edit zone ${editing?.domain ?? ""}`}
      size="lg"
      busy={busy}
      submitLabel={isNew ? "Create zone" : "Save zone"}
      formError={errors.form}
      onSubmit={submit({
        validate: validateZone,
        errorField: zoneErrorField,
        onClose,
        send: async (f) => {
          const body = zoneRequest(f);
          const z =
            editing === "new"
              ? await api.post("/api/dns/zones", { body })
              : editing
                ? await api.put("/api/dns/zones/{zoneId}", { path: { zoneId: editing.id }, body })
                : null;
          if (z) onDone(z);
        },
      })}
    >
      <Group align="flex-start" gap="sm" wrap="wrap">
        <TextInput
          label="Name"
          required
          value={f.name}
          onChange={(e) => set({ name: e.currentTarget.value }, "name")}
          error={errors.name}
          data-autofocus
          maxLength={255}
          style={{ flex: 1, minWidth: 220 }}
        />
        <Switch label="Enabled" checked={f.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked }, "name")} mt={32} />
      </Group>
      <TextInput
        label="Domain"
        description={isNew ? "The zone's domain, e.g. internal.example.com; outside the peers' own DNS domain. It cannot be changed later." : "A zone's domain cannot be changed; create a new zone instead."}
        required
        readOnly={!isNew}
        value={f.domain}
        onChange={(e) => set({ domain: e.currentTarget.value }, "domain")}
        error={errors.domain}
      />
      <MultiSelect
        label="Distribution groups"
        description="Peers in these groups resolve this zone"
        required
        data={groupData}
        value={f.groups}
        onChange={(v) => set({ groups: v }, "groups")}
        searchable
        error={errors.groups}
      />
      <Switch
        label="Add as a search domain"
        description="Peers complete short names with this zone's domain"
        checked={f.searchDomain}
        onChange={(e) => set({ searchDomain: e.currentTarget.checked }, "searchDomain")}
        error={errors.searchDomain}
      />
    </FormModal>
  );
}

export function ZonesPanel({ groupData }: { groupData: Option[] }) {
  const { api } = useApp();
  const { me } = useCurrentUser();
  const noRead = me ? deniedReason(me, "dns", "read") : "";
  const list = usePoll((signal) => (noRead ? Promise.resolve([] as Zone[]) : api.get("/api/dns/zones", { signal })), LIVE_INTERVAL_MS, [noRead], ["dns"]);
  const [editing, setEditing] = useState<Zone | "new" | null>(null);
  const [deleting, setDeleting] = useState<Zone | null>(null);
  const groupName = useMemo(() => new Map(groupData.map((g) => [g.value, g.label])), [groupData]);
  const names = (ids: string[]) => ids.map((id) => groupName.get(id) ?? id).join(", ");
  const sorted = useMemo(() => [...(list.data ?? [])].sort((a, b) => a.domain.localeCompare(b.domain)), [list.data]);
  const noCreate = deniedReason(me, "dns", "create");
  const noUpdate = deniedReason(me, "dns", "update");
  const noDelete = deniedReason(me, "dns", "delete");

  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Text size="sm" c="dimmed" style={{ flex: 1, minWidth: 260 }}>
          A custom zone is a domain the mesh answers itself, with A, AAAA and CNAME records, for the peers in its distribution groups.
        </Text>
        {!noRead && (
          <Allowed why={noCreate}>
            <Button onClick={() => setEditing("new")}>Create zone</Button>
          </Allowed>
        )}
      </Group>
      {noRead ? (
        <Unavailable reason={noRead} />
      ) : (
        <>
          <ListTable
            label="Zones"
            minWidth={800}
            headers={["Domain", "Name", "Distribution", "Enabled", "Search domain", "Records"]}
            empty={sorted.length === 0 ? "No zones yet." : null}
            loading={list.loading}
            error={list.error}
            errorTitle="Could not load the zones"
          >
            {sorted.map((z) => (
              <Table.Tr key={z.id} data-zone-domain={z.domain}>
                <Table.Td>
                  <Anchor component={RouterLink} to={`/dns/zones/${encodeURIComponent(z.id)}`} size="sm" fw={500} ff="monospace">
                    {z.domain}
                  </Anchor>
                </Table.Td>
                <Table.Td>
                  <Text size="sm">{z.name}</Text>
                </Table.Td>
                <Table.Td>
                  <Text size="sm">{names(z.distribution_groups)}</Text>
                </Table.Td>
                <Table.Td>{z.enabled ? "yes" : "no"}</Table.Td>
                <Table.Td>{z.enable_search_domain ? "yes" : "no"}</Table.Td>
                <Table.Td>{z.records.length}</Table.Td>
                <RowActions name={z.domain} noUpdate={noUpdate} noDelete={noDelete} onEdit={() => setEditing(z)} onDelete={() => setDeleting(z)} />
              </Table.Tr>
            ))}
          </ListTable>
        </>
      )}
      <ZoneModal editing={editing} groupData={groupData} onClose={() => setEditing(null)} onDone={() => void list.reload()} />
      <ConfirmModal
        opened={deleting !== null}
        title="Delete zone"
        verb="Delete"
        errorId="zone-delete-error"
        errorTitle="The server refused"
        onClose={() => setDeleting(null)}
        onConfirm={async () => {
          if (!deleting) return;
          await api.delete("/api/dns/zones/{zoneId}", { path: { zoneId: deleting.id } });
          void list.reload();
        }}
      >
        The zone {deleting?.domain} and its {deleting?.records.length ?? 0} record{deleting?.records.length === 1 ? "" : "s"} will be deleted; peers stop resolving
        its names within seconds.
      </ConfirmModal>
    </Stack>
  );
}
