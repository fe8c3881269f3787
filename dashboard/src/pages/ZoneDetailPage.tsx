/**
 * One custom zone: its settings (edited with the zones list's form) and
 * its records (A, AAAA, CNAME: name under the zone, content, TTL), each
 * created, edited and deleted (confirmed) here. The record form takes a
 * name relative to the zone ("www") or in full and shows the full name it
 * will send. Everything refreshes every 2 s.
 */
import { Alert, Anchor, Badge, Button, Card, Group, NumberInput, Select, Stack, Table, Text, TextInput, Title } from "@mantine/core";
import { useMemo, useState } from "react";
import { Link as RouterLink, useNavigate, useParams } from "react-router";
import { ApiError, messageOf } from "../api/client";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { Allowed } from "../common/Allowed";
import { ConfirmModal } from "../common/ConfirmModal";
import { FormModal, useFormModal } from "../common/FormModal";
import { ListTable, RowActions } from "../common/ListTable";
import { deniedReason } from "../common/permissions";
import { useCurrentUser } from "../common/useCurrentUser";
import {
  fromRecord,
  MAX_TTL,
  newRecord,
  recordErrorField,
  recordFQDN,
  recordRequest,
  validateRecord,
  type DNSRecord,
  type RecordField,
  type RecordForm,
  type RecordType,
} from "../dns/form";
import { ZoneModal } from "../dns/ZonesPanel";
import { Unavailable, useOptions } from "../routing/controls";

const contentHint: Record<RecordType, { label: string; placeholder: string; description: string }> = {
  A: { label: "IPv4 address", placeholder: "10.0.0.10", description: "The IPv4 address the name resolves to" },
  AAAA: { label: "IPv6 address", placeholder: "fd00::10", description: "The IPv6 address the name resolves to" },
  CNAME: { label: "Alias of", placeholder: "host.example.com", description: "The domain this name is an alias of" },
};

function RecordModal({ zoneId, domain, editing, onClose, onDone }: { zoneId: string; domain: string; editing: DNSRecord | "new" | null; onClose: () => void; onDone: () => void }) {
  const { api } = useApp();
  const { f, errors, busy, set, submit } = useFormModal<DNSRecord, RecordForm, RecordField>(editing, (r) => (r ? fromRecord(r) : newRecord()));
  const hint = contentHint[f.type];
  const full = f.name.trim() ? recordFQDN(f.name, domain) : "";
  return (
    <FormModal
      opened={editing !== null}
      onClose={onClose}
      title={editing === "new" ? "Add a record" : `Edit record ${editing?.name ?? ""}`}
      size="lg"
      busy={busy}
      submitLabel={editing === "new" ? "Add record" : "Save record"}
      formError={errors.form}
      onSubmit={submit({
        validate: (f) => validateRecord(f, domain),
        errorField: recordErrorField,
        onClose,
        send: async (f) => {
          const body = recordRequest(f, domain);
          if (editing === "new") await api.post("/api/dns/zones/{zoneId}/records", { path: { zoneId }, body });
          else if (editing) await api.put("/api/dns/zones/{zoneId}/records/{recordId}", { path: { zoneId, recordId: editing.id }, body });
          onDone();
        },
      })}
    >
      <TextInput
        label="Name"
        description={full ? `Full name: ${full}` : `A name under ${domain}: www (for www.${domain}), @ for ${domain} itself, *.dev for a wildcard`}
        placeholder="www"
        required
        value={f.name}
        onChange={(e) => set({ name: e.currentTarget.value }, "name")}
        error={errors.name}
        data-autofocus
      />
      <Group align="flex-start" gap="sm" wrap="wrap">
        <Select
          label="Type"
          required
          data={["A", "AAAA", "CNAME"]}
          value={f.type}
          onChange={(v) => v && set({ type: v as RecordType }, "content")}
          allowDeselect={false}
          error={errors.type}
          w={130}
        />
        <TextInput
          label={hint.label}
          description={hint.description}
          placeholder={hint.placeholder}
          required
          value={f.content}
          onChange={(e) => set({ content: e.currentTarget.value }, "content")}
          error={errors.content}
          style={{ flex: 1, minWidth: 220 }}
        />
      </Group>
      <NumberInput
        label="TTL (seconds)"
        description={`How long resolvers may cache the answer: 0-${MAX_TTL}`}
        value={f.ttl}
        onChange={(v) => set({ ttl: v }, "ttl")}
        min={0}
        max={MAX_TTL}
        allowDecimal={false}
        allowNegative={false}
        error={errors.ttl}
        w={240}
      />
    </FormModal>
  );
}

export function ZoneDetailPage() {
  const { id = "" } = useParams();
  const { api } = useApp();
  const navigate = useNavigate();
  const { me } = useCurrentUser();
  const noRead = me ? deniedReason(me, "dns", "read") : "";
  const zone = usePoll((signal) => (noRead ? Promise.resolve(undefined) : api.get("/api/dns/zones/{zoneId}", { signal, path: { zoneId: id } })), LIVE_INTERVAL_MS, [id, noRead]);
  const groups = usePoll((signal) => api.get("/api/groups", { signal }), 10_000);
  const { groupData } = useOptions(groups.data, undefined);
  const groupName = useMemo(() => new Map(groupData.map((g) => [g.value, g.label])), [groupData]);
  const [editZone, setEditZone] = useState(false);
  const [deleteZone, setDeleteZone] = useState(false);
  const [editRec, setEditRec] = useState<DNSRecord | "new" | null>(null);
  const [delRec, setDelRec] = useState<DNSRecord | null>(null);
  const z = zone.data?.id === id ? zone.data : undefined;
  const gone = zone.error instanceof ApiError && zone.error.status === 404;
  const noCreate = deniedReason(me, "dns", "create");
  const noUpdate = deniedReason(me, "dns", "update");
  const noDelete = deniedReason(me, "dns", "delete");
  const records = useMemo(() => [...(z?.records ?? [])].sort((a, b) => a.name.localeCompare(b.name) || a.type.localeCompare(b.type) || a.content.localeCompare(b.content)), [z]);

  return (
    <Stack gap="md">
      <Anchor component={RouterLink} to="/dns?tab=zones" size="sm">
        ← Zones
      </Anchor>
      {noRead ? (
        <>
          <Title order={2}>Zone</Title>
          <Unavailable reason={noRead} />
        </>
      ) : gone ? (
        <Alert color="gray" title="No such zone" role="alert">
          This zone does not exist (any more).
        </Alert>
      ) : zone.error !== null && !z ? (
        <Alert color="red" role="alert" title="Could not load the zone">
          {messageOf(zone.error)}
        </Alert>
      ) : !z ? (
        <Title order={2}>Zone</Title>
      ) : (
        <>
          <Group justify="space-between" align="flex-start">
            <Stack gap={2}>
              <Title order={2}>{z.domain}</Title>
              <Text size="sm" c="dimmed">
                {z.name} · resolved by {z.distribution_groups.map((g) => groupName.get(g) ?? g).join(", ")}
              </Text>
              <Group gap={6}>
                <Badge size="sm" variant="light" color={z.enabled ? "teal" : "gray"}>
                  {z.enabled ? "enabled" : "disabled"}
                </Badge>
                {z.enable_search_domain && (
                  <Badge size="sm" variant="light" color="blue">
                    search domain
                  </Badge>
                )}
              </Group>
            </Stack>
            <Group gap="xs">
              <Allowed why={noUpdate}>
                <Button variant="default" onClick={() => setEditZone(true)}>
                  Edit zone
                </Button>
              </Allowed>
              <Allowed why={noDelete}>
                <Button variant="light" color="red" onClick={() => setDeleteZone(true)}>
                  Delete zone
                </Button>
              </Allowed>
            </Group>
          </Group>
          {zone.error !== null && (
            <Alert color="red" role="alert" title="Could not refresh the zone">
              {messageOf(zone.error)}
            </Alert>
          )}
          <Card withBorder>
            <Group justify="space-between" mb="xs">
              <Title order={3} size="h4">
                Records
              </Title>
              <Allowed why={noCreate}>
                <Button size="sm" onClick={() => setEditRec("new")}>
                  Add record
                </Button>
              </Allowed>
            </Group>
            <ListTable label="Records" minWidth={640} headers={["Name", "Type", "Content", "TTL"]} empty={records.length === 0 ? "No records: add the names this zone answers." : null}>
              {records.map((r) => (
                <Table.Tr key={r.id} data-record-name={r.name} data-record-type={r.type}>
                  <Table.Td>
                    <Text size="sm" ff="monospace">
                      {r.name}
                    </Text>
                  </Table.Td>
                  <Table.Td>
                    <Badge size="sm" variant="light" color="gray">
                      {r.type}
                    </Badge>
                  </Table.Td>
                  <Table.Td>
                    <Text size="sm" ff="monospace">
                      {r.content}
                    </Text>
                  </Table.Td>
                  <Table.Td>{r.ttl} s</Table.Td>
                  <RowActions name={`record ${r.name} ${r.type} ${r.content}`} noUpdate={noUpdate} noDelete={noDelete} onEdit={() => setEditRec(r)} onDelete={() => setDelRec(r)} />
                </Table.Tr>
              ))}
            </ListTable>
          </Card>
        </>
      )}
      {z && (
        <>
          <ZoneModal editing={editZone ? z : null} groupData={groupData} onClose={() => setEditZone(false)} onDone={() => void zone.reload()} />
          <RecordModal zoneId={z.id} domain={z.domain} editing={editRec} onClose={() => setEditRec(null)} onDone={() => void zone.reload()} />
          <ConfirmModal
            opened={deleteZone}
            title="Delete zone"
            verb="Delete"
            errorId="zone-delete-error"
            errorTitle="The server refused"
            onClose={() => setDeleteZone(false)}
            onConfirm={async () => {
              await api.delete("/api/dns/zones/{zoneId}", { path: { zoneId: z.id } });
              void navigate("/dns?tab=zones");
            }}
          >
            The zone {z.domain} and its {z.records.length} record{z.records.length === 1 ? "" : "s"} will be deleted; peers stop resolving its names within seconds.
          </ConfirmModal>
          <ConfirmModal
            opened={delRec !== null}
            title="Delete record"
            verb="Delete"
            errorId="record-delete-error"
            errorTitle="The server refused"
            onClose={() => setDelRec(null)}
            onConfirm={async () => {
              if (!delRec) return;
              await api.delete("/api/dns/zones/{zoneId}/records/{recordId}", { path: { zoneId: z.id, recordId: delRec.id } });
              void zone.reload();
            }}
          >
            The {delRec?.type} record {delRec?.name} → {delRec?.content} will be deleted.
          </ConfirmModal>
        </>
      )}
    </Stack>
  );
}

export default ZoneDetailPage;
