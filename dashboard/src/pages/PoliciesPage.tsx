/**
 * Access policies: the list (refreshed live) with each policy's rules in
 * words and an enabled switch, the rule editor (policies/PolicyEditor.tsx),
 * delete (confirmed), and the "test access" tool. ?edit=<policy id> opens
 * a policy in the editor, ?test=<peer id> starts the test from a peer.
 */
import { Alert, Badge, Button, Group, Stack, Switch, Table, Tabs, Text, Title, VisuallyHidden } from "@mantine/core";
import { useEffect, useMemo, useState } from "react";
import { useSearchParams } from "react-router";
import { messageOf, type Schemas } from "../api/client";
import { useApp } from "../app";
import { ConfirmModal } from "../common/ConfirmModal";
import { portsText, ruleTrafficText } from "../access/evaluate";
import { useAccessState, usersNote } from "../access/useAccess";
import { fromPolicy, toRequest } from "../policies/form";
import { PolicyEditor } from "../policies/PolicyEditor";
import { TestAccess } from "../policies/TestAccess";

type Policy = Schemas["Policy"];
type Rule = Schemas["PolicyRule"];

function sideText(groups: Rule["sources"], res: Rule["sourceResource"], peerName: (id: string) => string): string {
  if (res) return res.type === "peer" ? `peer ${peerName(res.id)}` : `${res.type} ${res.id}`;
  return (groups ?? []).map((g) => g.name).join(", ") || "nothing";
}

function RuleLine({ r, peerName }: { r: Rule; peerName: (id: string) => string }) {
  return (
    <Text size="sm" c={r.enabled ? undefined : "dimmed"}>
      <Badge size="xs" variant="light" color={r.action === "drop" ? "red" : "green"} mr={6}>
        {r.action}
      </Badge>
      {sideText(r.sources, r.sourceResource, peerName)} {r.bidirectional ? "⇄" : "→"} {sideText(r.destinations, r.destinationResource, peerName)} ·{" "}
      {ruleTrafficText({ protocol: r.protocol, ports: portsText(r) })}
      {!r.enabled && " (rule disabled)"}
    </Text>
  );
}

function EnabledSwitch({ p, onDone }: { p: Policy; onDone: () => void }) {
  const { api } = useApp();
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const toggle = async (enabled: boolean) => {
    setBusy(true);
    setErr("");
    try {
      await api.put("/api/policies/{policyId}", { path: { policyId: p.id }, body: { ...toRequest(fromPolicy(p)), enabled } });
      onDone();
    } catch (e) {
      setErr(messageOf(e));
    } finally {
      setBusy(false);
    }
  };
  const errId = `policy-enable-error-${p.id}`;
  return (
    <Stack gap={2}>
      <Switch
        checked={p.enabled}
        disabled={busy}
        onChange={(e) => void toggle(e.currentTarget.checked)}
        aria-label={`${p.name} enabled`}
        aria-describedby={err ? errId : undefined}
      />
      {err && (
        <Text size="xs" c="red" role="alert" id={errId}>
          {err}
        </Text>
      )}
    </Stack>
  );
}

function DeleteModal({ policy, onClose, onDone }: { policy: Policy | null; onClose: () => void; onDone: () => void }) {
  const { api } = useApp();
  return (
    <ConfirmModal
      opened={policy !== null}
      title="Delete policy"
      verb="Delete"
      errorId="policy-delete-error"
      errorTitle="The server refused"
      onClose={onClose}
      onConfirm={async () => {
        if (!policy) return;
        await api.delete("/api/policies/{policyId}", { path: { policyId: policy.id } });
        onDone();
      }}
    >
      &quot;{policy?.name}&quot; will be deleted; connections only it allows stop within seconds.
    </ConfirmModal>
  );
}

export function PoliciesPage() {
  const access = useAccessState();
  const [params, setParams] = useSearchParams();
  const [editing, setEditing] = useState<Policy | "new" | null>(null);
  const [deleting, setDeleting] = useState<Policy | null>(null);
  const [tab, setTab] = useState<string | null>(params.get("test") !== null ? "test" : "policies");
  const d = access.data;
  const peerName = useMemo(() => {
    const m = new Map((d?.peers ?? []).map((p) => [p.id, p.name]));
    return (id: string) => m.get(id) ?? id;
  }, [d?.peers]);
  const checkName = useMemo(() => new Map((d?.postureChecks ?? []).map((c) => [c.id, c.name])), [d?.postureChecks]);
  const list = useMemo(() => [...(d?.policies ?? [])].sort((a, b) => a.name.localeCompare(b.name)), [d?.policies]);

  // ?edit=<id>: open that policy once the list is in.
  const editParam = params.get("edit");
  useEffect(() => {
    if (!editParam || !d) return;
    const p = d.policies.find((x) => x.id === editParam);
    if (p) setEditing(p);
    setParams(
      (sp) => {
        sp.delete("edit");
        return sp;
      },
      { replace: true },
    );
  }, [editParam, d, setParams]);

  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Title order={2}>Access policies</Title>
        <Button onClick={() => setEditing("new")}>Create policy</Button>
      </Group>
      <Text size="sm" c="dimmed">
        Peers connect only where an enabled policy allows it; drop rules win over accept rules.
      </Text>
      {access.error !== null && (
        <Alert color="red" role="alert" title="Could not load the policies">
          {messageOf(access.error)}
          {d ? " (showing the last list received)" : ""}
        </Alert>
      )}
      <Tabs value={tab} onChange={setTab} keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="policies">Policies ({list.length})</Tabs.Tab>
          <Tabs.Tab value="test">Test access</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="policies" pt="sm">
          <Table.ScrollContainer minWidth={820}>
            <Table striped highlightOnHover aria-label="Access policies" verticalSpacing="xs">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Enabled</Table.Th>
                  <Table.Th>Name</Table.Th>
                  <Table.Th>Rules</Table.Th>
                  <Table.Th>Posture checks</Table.Th>
                  <Table.Th>
                    <VisuallyHidden>Actions</VisuallyHidden>
                  </Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {list.length === 0 && !access.loading && (
                  <Table.Tr>
                    <Table.Td colSpan={5}>
                      <Text c="dimmed" size="sm">
                        No policies: no peer reaches another.
                      </Text>
                    </Table.Td>
                  </Table.Tr>
                )}
                {list.map((p) => (
                  <Table.Tr key={p.id} data-policy-name={p.name}>
                    <Table.Td>
                      <EnabledSwitch p={p} onDone={() => void access.reload()} />
                    </Table.Td>
                    <Table.Td>
                      <Text size="sm" fw={500}>
                        {p.name}
                      </Text>
                      {p.description && (
                        <Text size="xs" c="dimmed">
                          {p.description}
                        </Text>
                      )}
                    </Table.Td>
                    <Table.Td>
                      <Stack gap={2}>
                        {p.rules.map((r) => (
                          <RuleLine key={r.id} r={r} peerName={peerName} />
                        ))}
                      </Stack>
                    </Table.Td>
                    <Table.Td>
                      {p.source_posture_checks.length ? (
                        p.source_posture_checks.map((c) => checkName.get(c) ?? c).join(", ")
                      ) : (
                        <Text size="sm" c="dimmed">
                          —
                        </Text>
                      )}
                    </Table.Td>
                    <Table.Td>
                      <Group gap={4} wrap="nowrap" justify="flex-end">
                        <Button size="xs" variant="light" onClick={() => setEditing(p)} aria-label={`Edit ${p.name}`}>
                          Edit
                        </Button>
                        <Button size="xs" variant="light" color="red" onClick={() => setDeleting(p)} aria-label={`Delete ${p.name}`}>
                          Delete
                        </Button>
                      </Group>
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        </Tabs.Panel>
        <Tabs.Panel value="test" pt="sm">
          <Stack gap="xs">
            <TestAccess index={access.index} peers={d?.peers ?? []} initialFrom={params.get("test") ?? ""} />
            {d?.usersError ? (
              <Text size="xs" c="dimmed">
                {usersNote(d.usersError)}
              </Text>
            ) : null}
          </Stack>
        </Tabs.Panel>
      </Tabs>
      <PolicyEditor
        editing={editing}
        groups={d?.groups ?? []}
        peers={d?.peers ?? []}
        postureChecks={d?.postureChecks ?? []}
        onClose={() => setEditing(null)}
        onSaved={() => void access.reload()}
      />
      <DeleteModal policy={deleting} onClose={() => setDeleting(null)} onDone={() => void access.reload()} />
    </Stack>
  );
}

export default PoliciesPage;
