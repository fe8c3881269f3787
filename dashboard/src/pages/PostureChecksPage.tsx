/**
 * Posture checks: conditions a peer must meet for the access policies that
 * name the check (agent version, OS/kernel version, network range of the
 * peer, running processes). List (live), create, edit and delete
 * (confirmed; the server refuses to delete a check a policy uses).
 */
import {
  ActionIcon,
  Alert,
  Button,
  Card,
  Group,
  Modal,
  SegmentedControl,
  SimpleGrid,
  Stack,
  Switch,
  Table,
  Text,
  Textarea,
  TextInput,
  Title,
  VisuallyHidden,
} from "@mantine/core";
import { useMemo, useState, type FormEvent, type ReactNode } from "react";
import { messageOf } from "../api/client";
import { fieldOf } from "../api/fielderror";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { ConfirmModal } from "../common/ConfirmModal";
import { Allowed } from "../common/Allowed";
import { deniedReason } from "../common/permissions";
import { useCurrentUser } from "../common/useCurrentUser";
import {
  blankForm,
  fromCheck,
  OSES,
  osLabel,
  summarize,
  toRequest,
  validatePosture,
  type PostureCheck,
  type PostureErrors,
  type PostureForm,
} from "../posture/form";

function CheckCard({ title, on, onToggle, children, error }: { title: string; on: boolean; onToggle: (v: boolean) => void; children: ReactNode; error?: string | undefined }) {
  return (
    <Card withBorder padding="sm">
      <Switch label={title} checked={on} onChange={(e) => onToggle(e.currentTarget.checked)} fw={500} />
      {on && (
        <Stack gap="xs" mt="sm">
          {children}
        </Stack>
      )}
      {error && (
        <Text size="xs" c="red" role="alert" mt={4}>
          {error}
        </Text>
      )}
    </Card>
  );
}

function EditModal({ editing, onClose, onDone }: { editing: PostureCheck | "new" | null; onClose: () => void; onDone: () => void }) {
  const { api } = useApp();
  const [f, setF] = useState<PostureForm>(blankForm);
  const [seen, setSeen] = useState<string | null>(null);
  const [errors, setErrors] = useState<PostureErrors>({});
  const [busy, setBusy] = useState(false);
  const key = editing === null ? null : editing === "new" ? "new" : editing.id;
  if (key !== seen) {
    setSeen(key);
    setF(editing && editing !== "new" ? fromCheck(editing) : blankForm);
    setErrors({});
  }
  const set = <K extends keyof PostureForm>(k: K, v: PostureForm[K]) => {
    setF((o) => ({ ...o, [k]: v }));
    setErrors({});
  };
  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validatePosture(f);
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      const body = toRequest(f);
      if (editing === "new") await api.post("/api/posture-checks", { body });
      else if (editing) await api.put("/api/posture-checks/{postureCheckId}", { path: { postureCheckId: editing.id }, body });
      onDone();
      onClose();
    } catch (err) {
      const field =
        fieldOf(err, { name: "name", min_version: "nbMin", "os version": "os", range: "ranges", "network range": "ranges", process: "processes", processes: "processes" } as const) ?? "form";
      setErrors({ [field]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal opened={editing !== null} onClose={onClose} title={editing === "new" ? "Create a posture check" : `Edit ${editing?.name ?? ""}`} size="xl">
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Stack>
          <TextInput label="Name" required value={f.name} onChange={(e) => set("name", e.currentTarget.value)} error={errors.name} data-autofocus />
          <TextInput label="Description" value={f.description} onChange={(e) => set("description", e.currentTarget.value)} />
          <Text size="sm" c="dimmed">
            A peer passes when it meets every check turned on; policies naming this check leave out peers that do not.
          </Text>
          <CheckCard title="Agent version" on={f.nbEnabled} onToggle={(v) => set("nbEnabled", v)}>
            <TextInput label="Minimum agent version" placeholder="0.28.0" value={f.nbMin} onChange={(e) => set("nbMin", e.currentTarget.value)} error={errors.nbMin} maw={240} />
          </CheckCard>
          <CheckCard title="Operating system version" on={f.osEnabled} onToggle={(v) => set("osEnabled", v)} error={errors.os}>
            <Text size="xs" c="dimmed">
              Peers of an OS left empty are refused. Linux and Windows compare the kernel version.
            </Text>
            <SimpleGrid cols={{ base: 1, sm: 3 }}>
              {OSES.map((os) => (
                <TextInput
                  key={os}
                  label={`${osLabel[os]} minimum`}
                  placeholder={os === "linux" ? "5.15" : os === "windows" ? "10.0.19045" : "14.0"}
                  value={f.os[os]}
                  onChange={(e) => set("os", { ...f.os, [os]: e.currentTarget.value })}
                  error={errors[os]}
                />
              ))}
            </SimpleGrid>
          </CheckCard>
          <CheckCard title="Peer network range" on={f.rangeEnabled} onToggle={(v) => set("rangeEnabled", v)}>
            <Stack gap={4}>
              <Text size="sm" fw={500} id="pc-range-action">
                Peers with an address in these ranges are
              </Text>
              <SegmentedControl
                aria-labelledby="pc-range-action"
                value={f.rangeAction}
                onChange={(v) => set("rangeAction", v as "allow" | "deny")}
                data={[
                  { value: "allow", label: "Allowed (others refused)" },
                  { value: "deny", label: "Refused" },
                ]}
              />
            </Stack>
            <Textarea label="Ranges" description="One CIDR per line (IPv4 or IPv6), matched against the peer's local addresses" autosize minRows={2} value={f.ranges} onChange={(e) => set("ranges", e.currentTarget.value)} error={errors.ranges} />
          </CheckCard>
          <CheckCard title="Running processes" on={f.processEnabled} onToggle={(v) => set("processEnabled", v)} error={errors.processes}>
            <Text size="xs" c="dimmed">
              Every process listed must run on the peer; give its path for the OSes it runs on.
            </Text>
            {f.processes.map((p, i) => (
              <Group key={i} align="flex-end" gap="xs" wrap="nowrap">
                <TextInput label={`Process ${i + 1}: Linux path`} value={p.linux} onChange={(e) => set("processes", f.processes.map((q, j) => (j === i ? { ...q, linux: e.currentTarget.value } : q)))} style={{ flex: 1 }} />
                <TextInput label={`Process ${i + 1}: macOS path`} value={p.mac} onChange={(e) => set("processes", f.processes.map((q, j) => (j === i ? { ...q, mac: e.currentTarget.value } : q)))} style={{ flex: 1 }} />
                <TextInput label={`Process ${i + 1}: Windows path`} value={p.windows} onChange={(e) => set("processes", f.processes.map((q, j) => (j === i ? { ...q, windows: e.currentTarget.value } : q)))} style={{ flex: 1 }} />
                <ActionIcon variant="subtle" color="red" size="lg" aria-label={`Remove process ${i + 1}`} disabled={f.processes.length === 1} onClick={() => set("processes", f.processes.filter((_, j) => j !== i))}>
                  <span aria-hidden="true">✕</span>
                </ActionIcon>
              </Group>
            ))}
            <Group>
              <Button size="xs" variant="light" onClick={() => set("processes", [...f.processes, { linux: "", mac: "", windows: "" }])}>
                Add a process
              </Button>
            </Group>
          </CheckCard>
          <Text size="xs" c="dimmed">
            Geolocation checks are not offered: they need a GeoIP database, which this server does not have.
          </Text>
          {errors.checks && (
            <Text size="sm" c="red" role="alert">
              {errors.checks}
            </Text>
          )}
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={busy}>
              {editing === "new" ? "Create" : "Save"}
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

function DeleteModal({ check, onClose, onDone }: { check: PostureCheck | null; onClose: () => void; onDone: () => void }) {
  const { api } = useApp();
  return (
    <ConfirmModal
      opened={check !== null}
      title={`Delete ${check?.name ?? ""}`}
      verb="Delete"
      errorId="pc-delete-error"
      onClose={onClose}
      onConfirm={async () => {
        if (!check) return;
        await api.delete("/api/posture-checks/{postureCheckId}", { path: { postureCheckId: check.id } });
        onDone();
      }}
    >
      The posture check "{check?.name}" will be deleted. A check that a policy uses cannot be deleted: take it out of the policy first.
    </ConfirmModal>
  );
}

export function PostureChecksPage() {
  const { api } = useApp();
  const { me } = useCurrentUser();
  const checks = usePoll((signal) => api.get("/api/posture-checks", { signal }), LIVE_INTERVAL_MS, [], ["policies"]);
  const policies = usePoll((signal) => api.get("/api/policies", { signal }), 10_000, [], ["policies"]);
  const [editing, setEditing] = useState<PostureCheck | "new" | null>(null);
  const [deleting, setDeleting] = useState<PostureCheck | null>(null);
  const usedBy = useMemo(() => {
    const m = new Map<string, string[]>();
    for (const p of policies.data ?? []) for (const id of p.source_posture_checks ?? []) m.set(id, [...(m.get(id) ?? []), p.name]);
    return m;
  }, [policies.data]);
  const list = useMemo(() => [...(checks.data ?? [])].sort((a, b) => a.name.localeCompare(b.name)), [checks.data]);
  const noCreate = deniedReason(me, "policies", "create");
  const noUpdate = deniedReason(me, "policies", "update");
  const noDelete = deniedReason(me, "policies", "delete");
  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Title order={2}>Posture checks</Title>
        <Allowed why={noCreate}>
          <Button onClick={() => setEditing("new")}>Create posture check</Button>
        </Allowed>
      </Group>
      <Text size="sm" c="dimmed">
        A posture check lets an access policy apply only to peers that meet it: a recent agent, an up-to-date OS, an address in a known network,
        a running process.
      </Text>
      {checks.error !== null && (
        <Alert color="red" role="alert" title="Could not load the posture checks">
          {messageOf(checks.error)}
        </Alert>
      )}
      <Table.ScrollContainer minWidth={800}>
        <Table striped highlightOnHover aria-label="Posture checks" verticalSpacing="xs">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Checks</Table.Th>
              <Table.Th>Used by</Table.Th>
              <Table.Th>
                <VisuallyHidden>Actions</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {list.length === 0 && !checks.loading && (
              <Table.Tr>
                <Table.Td colSpan={4}>
                  <Text size="sm" c="dimmed">
                    No posture checks yet.
                  </Text>
                </Table.Td>
              </Table.Tr>
            )}
            {list.map((c) => {
              const used = usedBy.get(c.id) ?? [];
              return (
                <Table.Tr key={c.id} data-check-name={c.name}>
                  <Table.Td>
                    <Text size="sm" fw={500}>
                      {c.name}
                    </Text>
                    {c.description && (
                      <Text size="xs" c="dimmed">
                        {c.description}
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td>
                    {summarize(c.checks).map((s) => (
                      <Text size="sm" key={s}>
                        {s}
                      </Text>
                    ))}
                  </Table.Td>
                  <Table.Td>{used.join(", ") || "—"}</Table.Td>
                  <Table.Td>
                    <Group gap={4} justify="flex-end" wrap="nowrap">
                      <Allowed why={noUpdate}>
                        <Button size="xs" variant="light" onClick={() => setEditing(c)} aria-label={`Edit ${c.name}`}>
                          Edit
                        </Button>
                      </Allowed>
                      <Allowed why={noDelete || (used.length ? `Used by ${used.join(", ")}: take it out of those policies first` : "")}>
                        <Button size="xs" variant="light" color="red" onClick={() => setDeleting(c)} aria-label={`Delete ${c.name}`}>
                          Delete
                        </Button>
                      </Allowed>
                    </Group>
                  </Table.Td>
                </Table.Tr>
              );
            })}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      <EditModal editing={editing} onClose={() => setEditing(null)} onDone={() => void checks.reload()} />
      <DeleteModal check={deleting} onClose={() => setDeleting(null)} onDone={() => void checks.reload()} />
    </Stack>
  );
}

export default PostureChecksPage;
