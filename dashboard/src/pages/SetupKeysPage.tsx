/**
 * Setup keys: list (refreshed live), create with every option of the API
 * and copy a ready `netbird up` command, revoke and delete (both
 * confirmed). A failed call's message shows beside the button that made it.
 */
import {
  Alert,
  Badge,
  Button,
  Code,
  CopyButton,
  Group,
  Modal,
  MultiSelect,
  NumberInput,
  SegmentedControl,
  Stack,
  Switch,
  Table,
  Text,
  TextInput,
  Title,
  VisuallyHidden,
} from "@mantine/core";
import { useMemo, useState, type FormEvent } from "react";
import { messageOf, type SetupKey } from "../api/client";
import { fieldOf } from "../api/fielderror";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { ConfirmModal } from "../common/ConfirmModal";
import { defaultForm, toRequest, upCommand, validateForm, type FormErrors, type SetupKeyForm } from "../setupkeys/command";

const stateColor: Record<SetupKey["state"], string> = { valid: "green", expired: "gray", revoked: "red", overused: "orange" };

function when(s: string): string {
  const t = Date.parse(s);
  if (Number.isNaN(t) || new Date(t).getUTCFullYear() < 2000) return "never";
  return new Date(t).toLocaleString();
}

function Copy({ value, label }: { value: string; label: string }) {
  return (
    <CopyButton value={value}>
      {({ copied, copy }) => (
        <Button size="xs" variant={copied ? "filled" : "light"} color={copied ? "teal" : undefined} onClick={copy} aria-label={label}>
          {copied ? "Copied" : "Copy"}
        </Button>
      )}
    </CopyButton>
  );
}

function CreateModal({ opened, onClose, onCreated }: { opened: boolean; onClose: () => void; onCreated: () => void }) {
  const { api, managementURL } = useApp();
  const groups = usePoll((signal) => api.get("/api/groups", { signal }), 10_000, [], ["groups"]);
  const [f, setF] = useState<SetupKeyForm>(defaultForm);
  const [errors, setErrors] = useState<FormErrors & { form?: string }>({});
  const [busy, setBusy] = useState(false);
  const [created, setCreated] = useState<SetupKey | null>(null);
  const [warning, setWarning] = useState("");

  const groupData = useMemo(
    () => (groups.data ?? []).filter((g) => g.name !== "All").map((g) => ({ value: g.id, label: g.name })),
    [groups.data],
  );
  const update = <K extends keyof SetupKeyForm>(k: K, v: SetupKeyForm[K]) => {
    setF((o) => ({ ...o, [k]: v }));
    setErrors((o) => ({ ...o, [k]: undefined, form: undefined }));
  };
  const close = () => {
    setF(defaultForm);
    setErrors({});
    setCreated(null);
    setWarning("");
    onClose();
  };
  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validateForm(f);
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      const req = toRequest(f);
      const k = await api.post("/api/setup-keys", { body: req });
      const ignored: string[] = [];
      if (k.ephemeral !== req.ephemeral) ignored.push("ephemeral");
      if (k.allow_extra_dns_labels !== req.allow_extra_dns_labels) ignored.push("allow extra DNS labels");
      setWarning(ignored.length ? `The server did not apply: ${ignored.join(", ")}.` : "");
      setCreated(k);
      onCreated();
    } catch (err) {
      const field =
        fieldOf(err, {
          name: "name",
          expires_in: "expiresDays",
          usage_limit: "usageLimit",
          auto_groups: "autoGroups",
          type: "type",
        } as const) ?? "form";
      setErrors({ [field]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <Modal opened={opened} onClose={close} title={created ? "Setup key created" : "Create a setup key"} size="lg">
      {created ? (
        <Stack>
          <Text size="sm">This key is shown only once: copy it now.</Text>
          <Group wrap="nowrap" gap="xs">
            <Code block style={{ flex: 1 }} data-testid="new-setup-key">
              {created.key}
            </Code>
            <Copy value={created.key} label="Copy the setup key" />
          </Group>
          <Text size="sm">Join a machine with:</Text>
          <Group wrap="nowrap" gap="xs" align="flex-start">
            <Code block style={{ flex: 1, whiteSpace: "pre-wrap", wordBreak: "break-all" }} data-testid="up-command">
              {upCommand(managementURL, created.key)}
            </Code>
            <Copy value={upCommand(managementURL, created.key)} label="Copy the netbird up command" />
          </Group>
          {warning && (
            <Alert color="yellow" role="status">
              {warning}
            </Alert>
          )}
          <Group justify="flex-end">
            <Button onClick={close}>Done</Button>
          </Group>
        </Stack>
      ) : (
        <form onSubmit={(e) => void submit(e)} noValidate>
          <Stack>
            <TextInput label="Name" required value={f.name} onChange={(e) => update("name", e.currentTarget.value)} error={errors.name} data-autofocus />
            <Stack gap={4}>
              <Text size="sm" fw={500} id="sk-type">
                Type
              </Text>
              <SegmentedControl
                aria-labelledby="sk-type"
                value={f.type}
                onChange={(v) => update("type", v as SetupKeyForm["type"])}
                data={[
                  { value: "reusable", label: "Reusable" },
                  { value: "one-off", label: "One-off" },
                ]}
              />
              {errors.type && (
                <Text size="xs" c="red" role="alert">
                  {errors.type}
                </Text>
              )}
            </Stack>
            <Group grow align="flex-start">
              <NumberInput
                label="Expires in (days)"
                description="0: never"
                min={0}
                max={365}
                allowDecimal={false}
                value={f.expiresDays}
                onChange={(v) => update("expiresDays", typeof v === "number" ? v : Number.NaN)}
                error={errors.expiresDays}
              />
              <NumberInput
                label="Usage limit"
                description={f.type === "one-off" ? "A one-off key joins one peer" : "Peers that may join; 0: unlimited"}
                min={0}
                allowDecimal={false}
                disabled={f.type === "one-off"}
                value={f.type === "one-off" ? 1 : f.usageLimit}
                onChange={(v) => update("usageLimit", typeof v === "number" ? v : Number.NaN)}
                error={errors.usageLimit}
              />
            </Group>
            <MultiSelect
              label="Auto-assigned groups"
              description="Peers joining with this key are put in these groups"
              data={groupData}
              value={f.autoGroups}
              onChange={(v) => update("autoGroups", v)}
              searchable
              placeholder={groupData.length ? "Pick groups" : "No groups yet"}
              error={errors.autoGroups ?? (groups.error ? `groups could not be loaded: ${messageOf(groups.error)}` : undefined)}
            />
            <Switch
              label="Ephemeral peers"
              description="Peers are removed after 10 minutes offline"
              checked={f.ephemeral}
              onChange={(e) => update("ephemeral", e.currentTarget.checked)}
            />
            <Switch
              label="Allow extra DNS labels"
              description="Peers may register additional DNS names (netbird up --extra-dns-labels)"
              checked={f.allowExtraDnsLabels}
              onChange={(e) => update("allowExtraDnsLabels", e.currentTarget.checked)}
            />
            <Group justify="flex-end">
              <Button variant="default" onClick={close}>
                Cancel
              </Button>
              <Button type="submit" loading={busy}>
                Create key
              </Button>
            </Group>
            {errors.form && (
              <Alert color="red" role="alert" title="The server refused">
                {errors.form}
              </Alert>
            )}
          </Stack>
        </form>
      )}
    </Modal>
  );
}

type Pending = { kind: "revoke" | "delete"; key: SetupKey };

function ConfirmKeyModal({ pending, onClose, onDone }: { pending: Pending | null; onClose: () => void; onDone: () => void }) {
  const { api } = useApp();
  const verb = pending?.kind === "revoke" ? "Revoke" : "Delete";
  return (
    <ConfirmModal
      opened={pending !== null}
      title={`${verb} setup key`}
      verb={verb}
      errorId="confirm-error"
      onClose={onClose}
      onConfirm={async () => {
        if (!pending) return;
        const path = { keyId: pending.key.id };
        if (pending.kind === "revoke") {
          await api.put("/api/setup-keys/{keyId}", { path, body: { revoked: true, auto_groups: pending.key.auto_groups } });
        } else {
          await api.delete("/api/setup-keys/{keyId}", { path });
        }
        onDone();
      }}
    >
      {pending?.kind === "revoke"
        ? `No new peer can join with "${pending.key.name}" once it is revoked. Peers that joined with it stay.`
        : `"${pending?.key.name ?? ""}" will be deleted. Peers that joined with it stay.`}
    </ConfirmModal>
  );
}

export function SetupKeysPage() {
  const { api } = useApp();
  const keys = usePoll((signal) => api.get("/api/setup-keys", { signal }), LIVE_INTERVAL_MS, [], ["setup-keys"]);
  const groups = usePoll((signal) => api.get("/api/groups", { signal }), 10_000, [], ["groups"]);
  const [creating, setCreating] = useState(false);
  const [pending, setPending] = useState<Pending | null>(null);
  const groupName = useMemo(() => new Map((groups.data ?? []).map((g) => [g.id, g.name])), [groups.data]);
  const list = useMemo(() => [...(keys.data ?? [])].sort((a, b) => a.name.localeCompare(b.name)), [keys.data]);

  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Title order={2}>Setup keys</Title>
        <Button onClick={() => setCreating(true)}>Create setup key</Button>
      </Group>
      <Text size="sm" c="dimmed">
        A setup key joins machines without a browser login: servers, containers, CI runners.
      </Text>
      {keys.error !== null && (
        <Alert color="red" role="alert" title="Could not load the setup keys">
          {messageOf(keys.error)}
        </Alert>
      )}
      <Table.ScrollContainer minWidth={900}>
        <Table striped highlightOnHover aria-label="Setup keys" verticalSpacing="xs">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Key</Table.Th>
              <Table.Th>Type</Table.Th>
              <Table.Th>State</Table.Th>
              <Table.Th>Used</Table.Th>
              <Table.Th>Last used</Table.Th>
              <Table.Th>Expires</Table.Th>
              <Table.Th>Groups</Table.Th>
              <Table.Th>
                <VisuallyHidden>Actions</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {list.length === 0 && !keys.loading && (
              <Table.Tr>
                <Table.Td colSpan={9}>
                  <Text c="dimmed" size="sm">
                    No setup keys yet.
                  </Text>
                </Table.Td>
              </Table.Tr>
            )}
            {list.map((k) => (
              <Table.Tr key={k.id} data-key-name={k.name}>
                <Table.Td>
                  <Text size="sm" fw={500}>
                    {k.name}
                  </Text>
                  {k.ephemeral && (
                    <Text size="xs" c="dimmed">
                      ephemeral
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>
                  <Code>{k.key}</Code>
                </Table.Td>
                <Table.Td>{k.type}</Table.Td>
                <Table.Td>
                  <Badge color={stateColor[k.state]} variant="light">
                    {k.state}
                  </Badge>
                </Table.Td>
                <Table.Td>
                  {k.used_times}
                  {k.usage_limit > 0 ? ` / ${k.usage_limit}` : ""}
                </Table.Td>
                <Table.Td>{when(k.last_used)}</Table.Td>
                <Table.Td>{when(k.expires)}</Table.Td>
                <Table.Td>{k.auto_groups.map((g) => groupName.get(g) ?? g).join(", ") || "—"}</Table.Td>
                <Table.Td>
                  <Group gap={4} wrap="nowrap" justify="flex-end">
                    <Button size="xs" variant="light" color="orange" disabled={k.revoked} onClick={() => setPending({ kind: "revoke", key: k })} aria-label={`Revoke ${k.name}`}>
                      Revoke
                    </Button>
                    <Button size="xs" variant="light" color="red" onClick={() => setPending({ kind: "delete", key: k })} aria-label={`Delete ${k.name}`}>
                      Delete
                    </Button>
                  </Group>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      <CreateModal opened={creating} onClose={() => setCreating(false)} onCreated={() => void keys.reload()} />
      <ConfirmKeyModal pending={pending} onClose={() => setPending(null)} onDone={() => void keys.reload()} />
    </Stack>
  );
}
