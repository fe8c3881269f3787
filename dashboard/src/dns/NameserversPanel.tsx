/**
 * Nameserver groups: the list (nameservers, match domains or "primary",
 * distribution groups, search domains, state), refreshed live; create,
 * edit (every field of the API) and delete (confirmed). The form checks
 * before sending (dns/form.ts) and puts a server refusal beside the
 * control it names, down to one nameserver's address or port.
 */
import { ActionIcon, Badge, Button, Group, MultiSelect, NumberInput, SegmentedControl, Select, Stack, Switch, Table, Text, Textarea, TextInput } from "@mantine/core";
import { useMemo, useState } from "react";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { Allowed } from "../common/Allowed";
import { ConfirmModal } from "../common/ConfirmModal";
import { FormModal, useFormModal } from "../common/FormModal";
import { EnabledCell, ListTable, RowActions } from "../common/ListTable";
import { deniedReason } from "../common/permissions";
import { useCurrentUser } from "../common/useCurrentUser";
import { Unavailable, type Option } from "../routing/controls";
import {
  formatNameservers,
  fromNameserverGroup,
  MAX_NAMESERVERS,
  nameserverErrorField,
  nameserverGroupRequest,
  newNameserverGroup,
  newNameserverRow,
  validateNameserverGroup,
  type NameserverField,
  type NameserverForm,
  type NameserverGroup,
} from "./form";

function NameserverModal({ editing, groupData, onClose, onDone }: { editing: NameserverGroup | "new" | null; groupData: Option[]; onClose: () => void; onDone: () => void }) {
  const { api } = useApp();
  const { f, setF, errors, setErrors, busy, set, submit } = useFormModal<NameserverGroup, NameserverForm, NameserverField>(editing, (g) => (g ? fromNameserverGroup(g) : newNameserverGroup()));
  const setRow = (i: number, o: Partial<NameserverForm["nameservers"][number]>, clear: NameserverField) =>
    set({ nameservers: f.nameservers.map((ns, j) => (j === i ? { ...ns, ...o } : ns)) }, clear);
  // Rows shift when one is removed: their errors no longer line up.
  const removeRow = (i: number) => {
    setF((x) => ({ ...x, nameservers: x.nameservers.filter((_, j) => j !== i) }));
    setErrors((e) => Object.fromEntries(Object.entries(e).filter(([k]) => !k.startsWith("ns") && k !== "nameservers")));
  };
  return (
    <FormModal
      opened={editing !== null}
      onClose={onClose}
      title={editing === "new" ? "Create a nameserver group" : `Edit nameserver group ${editing?.name ?? ""}`}
      size="xl"
      busy={busy}
      submitLabel={editing === "new" ? "Create nameserver group" : "Save nameserver group"}
      formError={errors.form}
      onSubmit={submit({
        validate: validateNameserverGroup,
        errorField: nameserverErrorField,
        onClose,
        send: async (f) => {
          const body = nameserverGroupRequest(f);
          if (editing === "new") await api.post("/api/dns/nameservers", { body });
          else if (editing) await api.put("/api/dns/nameservers/{nsgroupId}", { path: { nsgroupId: editing.id }, body });
          onDone();
        },
      })}
    >
      <Group align="flex-start" gap="sm" wrap="wrap">
        <TextInput
          label="Name"
          description="1-40 characters, unique in the account"
          required
          value={f.name}
          onChange={(e) => set({ name: e.currentTarget.value }, "name")}
          error={errors.name}
          data-autofocus
          style={{ flex: 1, minWidth: 240 }}
        />
        <Switch label="Enabled" checked={f.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked }, "name")} mt={32} />
      </Group>
      <TextInput label="Description" value={f.description} onChange={(e) => set({ description: e.currentTarget.value }, "description")} error={errors.description} />
      <Stack gap={6}>
        <Text size="sm" fw={500} id="ns-servers-label">
          Nameservers
        </Text>
        <Text size="xs" c="dimmed">
          1 to 3 addresses outside the peers&apos; network, tried in order
        </Text>
        {f.nameservers.map((ns, i) => (
          <Group key={i} align="flex-start" gap="xs" wrap="nowrap" data-nameserver-row={i}>
            <TextInput
              label="IP address"
              aria-label={`Nameserver ${i + 1} IP address`}
              placeholder="1.1.1.1"
              value={ns.ip}
              onChange={(e) => setRow(i, { ip: e.currentTarget.value }, `ns${i}.ip`)}
              error={errors[`ns${i}.ip`]}
              style={{ flex: 1 }}
            />
            <Select
              label="Protocol"
              aria-label={`Nameserver ${i + 1} protocol`}
              data={[{ value: "udp", label: "UDP" }]}
              value={ns.nsType}
              onChange={() => undefined}
              allowDeselect={false}
              w={110}
            />
            <NumberInput
              label="Port"
              aria-label={`Nameserver ${i + 1} port`}
              value={ns.port}
              onChange={(v) => setRow(i, { port: v }, `ns${i}.port`)}
              min={1}
              max={65535}
              allowDecimal={false}
              allowNegative={false}
              error={errors[`ns${i}.port`]}
              w={130}
            />
            <ActionIcon
              variant="subtle"
              color="red"
              mt={28}
              size="lg"
              aria-label={`Remove nameserver ${i + 1}`}
              disabled={f.nameservers.length <= 1}
              onClick={() => removeRow(i)}
            >
              <span aria-hidden="true">✕</span>
            </ActionIcon>
          </Group>
        ))}
        {f.nameservers.length < MAX_NAMESERVERS && (
          <Group>
            <Button size="xs" variant="light" onClick={() => set({ nameservers: [...f.nameservers, newNameserverRow()] }, "nameservers")}>
              Add nameserver
            </Button>
          </Group>
        )}
        {errors.nameservers && (
          <Text size="xs" c="red" role="alert">
            {errors.nameservers}
          </Text>
        )}
      </Stack>
      <Stack gap={4}>
        <Group justify="space-between" gap="xs">
          <Text size="sm" fw={500} id="ns-domains-label">
            Resolves
          </Text>
          <SegmentedControl
            size="xs"
            aria-label="Resolves: match domains only, or every domain (primary)"
            value={f.mode}
            onChange={(v) => set({ mode: v as NameserverForm["mode"] }, "domains")}
            data={[
              { value: "match", label: "Match domains" },
              { value: "primary", label: "All domains (primary)" },
            ]}
          />
        </Group>
        {f.mode === "match" ? (
          <>
            <Textarea
              aria-labelledby="ns-domains-label"
              description="Up to 32 domains, one per line: names under them are resolved by these nameservers (split DNS)"
              placeholder={"corp.example.com\nad.example.com"}
              autosize
              minRows={2}
              maxRows={8}
              value={f.domains}
              onChange={(e) => set({ domains: e.currentTarget.value }, "domains")}
              error={errors.domains}
            />
            <Switch
              label="Add as search domains"
              description="Peers complete short names with these domains"
              checked={f.searchDomains}
              onChange={(e) => set({ searchDomains: e.currentTarget.checked }, "searchDomains")}
              error={errors.searchDomains}
            />
          </>
        ) : (
          <Text size="sm" c={errors.domains ? "red" : "dimmed"} role={errors.domains ? "alert" : undefined}>
            {errors.domains ?? "These nameservers resolve every name the peers' own zones and other groups' match domains do not."}
          </Text>
        )}
      </Stack>
      <MultiSelect
        label="Distribution groups"
        description="Peers in these groups use these nameservers"
        required
        data={groupData}
        value={f.groups}
        onChange={(v) => set({ groups: v }, "groups")}
        searchable
        error={errors.groups}
      />
    </FormModal>
  );
}

export function NameserversPanel({ groupData }: { groupData: Option[] }) {
  const { api } = useApp();
  const { me } = useCurrentUser();
  const noRead = me ? deniedReason(me, "nameservers", "read") : "";
  const list = usePoll((signal) => (noRead ? Promise.resolve([] as NameserverGroup[]) : api.get("/api/dns/nameservers", { signal })), LIVE_INTERVAL_MS, [noRead], ["dns"]);
  const [editing, setEditing] = useState<NameserverGroup | "new" | null>(null);
  const [deleting, setDeleting] = useState<NameserverGroup | null>(null);
  const groupName = useMemo(() => new Map(groupData.map((g) => [g.value, g.label])), [groupData]);
  const names = (ids: string[]) => ids.map((id) => groupName.get(id) ?? id).join(", ");
  const sorted = useMemo(() => [...(list.data ?? [])].sort((a, b) => a.name.localeCompare(b.name)), [list.data]);
  const noCreate = deniedReason(me, "nameservers", "create");
  const noUpdate = deniedReason(me, "nameservers", "update");
  const noDelete = deniedReason(me, "nameservers", "delete");

  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Text size="sm" c="dimmed" style={{ flex: 1, minWidth: 260 }}>
          Nameserver groups tell the peers in their distribution groups which nameservers resolve which domains: match domains for split DNS, or
          every domain (primary). Peers&apos; own names always resolve on the mesh.
        </Text>
        {!noRead && (
          <Allowed why={noCreate}>
            <Button onClick={() => setEditing("new")}>Create nameserver group</Button>
          </Allowed>
        )}
      </Group>
      {noRead ? (
        <Unavailable reason={noRead} />
      ) : (
        <>
          <ListTable
            label="Nameserver groups"
            minWidth={900}
            headers={["Enabled", "Name", "Nameservers", "Resolves", "Distribution", "Search domains"]}
            empty={sorted.length === 0 ? <>No nameserver groups yet: peers keep their own nameservers for everything but the mesh&apos;s names.</> : null}
            loading={list.loading}
            error={list.error}
            errorTitle="Could not load the nameserver groups"
          >
            {sorted.map((g) => (
              <Table.Tr key={g.id} data-nsgroup-name={g.name}>
                <Table.Td>
                  <EnabledCell
                    enabled={g.enabled}
                    name={g.name}
                    denied={noUpdate}
                    errorId={`ns-enable-error-${g.id}`}
                    onToggle={(enabled) => api.put("/api/dns/nameservers/{nsgroupId}", { path: { nsgroupId: g.id }, body: { ...nameserverGroupRequest(fromNameserverGroup(g)), enabled } })}
                    onDone={() => void list.reload()}
                  />
                </Table.Td>
                <Table.Td>
                  <Text size="sm" fw={500}>
                    {g.name}
                  </Text>
                  {g.description && (
                    <Text size="xs" c="dimmed">
                      {g.description}
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>
                  <Text size="sm" ff="monospace">
                    {formatNameservers(g.nameservers)}
                  </Text>
                </Table.Td>
                <Table.Td>
                  {g.primary ? (
                    <Badge size="sm" variant="light" color="grape">
                      primary
                    </Badge>
                  ) : (
                    <Text size="sm" ff="monospace">
                      {g.domains.join(", ")}
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>
                  <Text size="sm">{names(g.groups)}</Text>
                </Table.Td>
                <Table.Td>{g.search_domains_enabled ? "yes" : "no"}</Table.Td>
                <RowActions name={g.name} noUpdate={noUpdate} noDelete={noDelete} onEdit={() => setEditing(g)} onDelete={() => setDeleting(g)} />
              </Table.Tr>
            ))}
          </ListTable>
        </>
      )}
      <NameserverModal editing={editing} groupData={groupData} onClose={() => setEditing(null)} onDone={() => void list.reload()} />
      <ConfirmModal
        opened={deleting !== null}
        title="Delete nameserver group"
        verb="Delete"
        errorId="ns-delete-error"
        errorTitle="The server refused"
        onClose={() => setDeleting(null)}
        onConfirm={async () => {
          if (!deleting) return;
          await api.delete("/api/dns/nameservers/{nsgroupId}", { path: { nsgroupId: deleting.id } });
          void list.reload();
        }}
      >
        The nameserver group &quot;{deleting?.name}&quot; ({deleting ? formatNameservers(deleting.nameservers) : ""}) will be deleted; its peers stop using these
        nameservers within seconds.
      </ConfirmModal>
    </Stack>
  );
}
