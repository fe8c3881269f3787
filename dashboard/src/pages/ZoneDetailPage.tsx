/**
 * One custom zone: its settings (edited with the zones list's form) and
 * its records (A, AAAA, CNAME: name under the zone, content, TTL), each
 * created, edited and deleted (confirmed) here. The record form takes a
 * name relative to the zone ("www") or in full and shows the full name it
 * will send. Everything refreshes every 2 s.
 */
import { Alert, Anchor, Badge, Button, Card, Group, Modal, NumberInput, Select, Stack, Table, Text, TextInput, Title, VisuallyHidden } from "@mantine/core";
import { useMemo, useState, type FormEvent } from "react";
import { Link as RouterLink, useNavigate, useParams } from "react-router";
import { ApiError, messageOf } from "../api/client";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { Allowed } from "../common/Allowed";
import { ConfirmModal } from "../common/ConfirmModal";
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
  type RecordErrors,
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
  const [f, setF] = useState<RecordForm>(newRecord);
  const [seen, setSeen] = useState<string | null>(null);
  const [errors, setErrors] = useState<RecordErrors>({});
  const [busy, setBusy] = useState(false);
  const key = editing === null ? null : editing === "new" ? "new" : editing.id;
  if (key !== seen) {
    setSeen(key);
    setF(editing && editing !== "new" ? fromRecord(editing) : newRecord());
    setErrors({});
  }
  const set = (o: Partial<RecordForm>, clear: RecordField) => {
    setF((x) => ({ ...x, ...o }));
    setErrors((e) => ({ ...e, [clear]: undefined, form: undefined }));
  };
  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validateRecord(f, domain);
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      const body = recordRequest(f, domain);
      if (editing === "new") await api.post("/api/dns/zones/{zoneId}/records", { path: { zoneId }, body });
      else if (editing) await api.put("/api/dns/zones/{zoneId}/records/{recordId}", { path: { zoneId, recordId: editing.id }, body });
      onDone();
      onClose();
    } catch (err) {
      setErrors({ [recordErrorField(err)]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };
  const hint = contentHint[f.type];
  const full = f.name.trim() ? recordFQDN(f.name, domain) : "";
  return (
    <Modal closeButtonProps={{ "aria-label": "Close" }} opened={editing !== null} onClose={onClose} title={editing === "new" ? "Add a record" : `Edit record ${editing?.name ?? ""}`} size="lg">
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Stack>
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
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={busy}>
              {editing === "new" ? "Add record" : "Save record"}
            </Button>
          </Group>
          {errors.form && (
            <Alert color="red" role="alert" title="The server refused">
              {errors.form}
            </Alert>
          )}
        </Stack>
      </form>
    </Modal>
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
            <Table.ScrollContainer minWidth={640}>
              <Table striped highlightOnHover aria-label="Records" verticalSpacing="xs">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Name</Table.Th>
                    <Table.Th>Type</Table.Th>
                    <Table.Th>Content</Table.Th>
                    <Table.Th>TTL</Table.Th>
                    <Table.Th>
                      <VisuallyHidden>Actions</VisuallyHidden>
                    </Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {records.length === 0 && (
                    <Table.Tr>
                      <Table.Td colSpan={5}>
                        <Text size="sm" c="dimmed">
                          No records: add the names this zone answers.
                        </Text>
                      </Table.Td>
                    </Table.Tr>
                  )}
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
                      <Table.Td>
                        <Group gap={4} wrap="nowrap" justify="flex-end">
                          <Allowed why={noUpdate}>
                            <Button size="xs" variant="light" onClick={() => setEditRec(r)} aria-label={`Edit record ${r.name} ${r.type} ${r.content}`}>
                              Edit
                            </Button>
                          </Allowed>
                          <Allowed why={noDelete}>
                            <Button size="xs" variant="light" color="red" onClick={() => setDelRec(r)} aria-label={`Delete record ${r.name} ${r.type} ${r.content}`}>
                              Delete
                            </Button>
                          </Allowed>
                        </Group>
                      </Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            </Table.ScrollContainer>
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
