/**
 * Groups: list (refreshed live) with peer and resource counts and where
 * each group is used, create, rename and edit members (one form: PUT
 * replaces the name and the whole member list), delete (confirmed; the
 * server refuses a group still in use and says where: shown in the dialog).
 */
import { Alert, Anchor, Badge, Button, Group, Modal, MultiSelect, Stack, Table, Text, TextInput, Title, VisuallyHidden } from "@mantine/core";
import { useEffect, useMemo, useState, type FormEvent } from "react";
import { Link as RouterLink } from "react-router";
import { messageOf, type Group as ApiGroup } from "../api/client";
import { fieldOf } from "../api/fielderror";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { ConfirmModal } from "../common/ConfirmModal";
import { isBuiltIn, validateGroupName } from "../groups/edit";

type Editing = { kind: "create" } | { kind: "edit"; group: ApiGroup };

function GroupModal({ editing, groups, onClose, onSaved }: { editing: Editing | null; groups: ApiGroup[]; onClose: () => void; onSaved: () => void }) {
  const { api } = useApp();
  const peers = usePoll((signal) => api.get("/api/peers", { signal }), 10_000, [], ["peers"]);
  const [name, setName] = useState("");
  const [members, setMembers] = useState<string[]>([]);
  const [errors, setErrors] = useState<{ name?: string; peers?: string; form?: string }>({});
  const [busy, setBusy] = useState(false);
  const [loadErr, setLoadErr] = useState("");
  const id = editing?.kind === "edit" ? editing.group.id : "";

  useEffect(() => {
    setErrors({});
    setLoadErr("");
    if (!editing) return;
    if (editing.kind === "create") {
      setName("");
      setMembers([]);
      return;
    }
    setName(editing.group.name);
    setMembers(editing.group.peers.map((p) => p.id));
    // The member list as the server has it now: saving replaces it.
    const c = new AbortController();
    api.get("/api/groups/{groupId}", { path: { groupId: editing.group.id }, signal: c.signal }).then(
      (g) => setMembers(g.peers.map((p) => p.id)),
      (e: unknown) => {
        if (!c.signal.aborted) setLoadErr(messageOf(e));
      },
    );
    return () => c.abort();
  }, [editing, api]);

  const peerData = useMemo(() => {
    const known = new Map((peers.data ?? []).map((p) => [p.id, `${p.name} (${p.ip})`]));
    // Members the list does not show yet keep their place.
    for (const m of members) if (!known.has(m)) known.set(m, m);
    return [...known].map(([value, label]) => ({ value, label })).sort((a, b) => a.label.localeCompare(b.label));
  }, [peers.data, members]);

  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validateGroupName(name, groups, id);
    if (e) {
      setErrors({ name: e });
      return;
    }
    setBusy(true);
    setErrors({});
    try {
      const body = { name: name.trim(), peers: members };
      if (id) await api.put("/api/groups/{groupId}", { path: { groupId: id }, body });
      else await api.post("/api/groups", { body });
      onSaved();
      onClose();
    } catch (err) {
      const f = fieldOf(err, { name: "name", named: "name", peer: "peers", peers: "peers" } as const) ?? "form";
      setErrors({ [f]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <Modal closeButtonProps={{ "aria-label": "Close" }} opened={editing !== null} onClose={onClose} title={id ? `Edit group ${editing?.kind === "edit" ? editing.group.name : ""}` : "Create a group"} size="lg">
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Stack>
          <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={errors.name} data-autofocus maxLength={255} />
          <MultiSelect
            label="Peers"
            description="Peers pending approval stay out of every rule until approved"
            data={peerData}
            value={members}
            onChange={setMembers}
            searchable
            clearable
            limit={200}
            placeholder={peerData.length ? "Pick peers" : "No peers yet"}
            nothingFoundMessage="No peer matches"
            error={errors.peers ?? (peers.error ? `peers could not be loaded: ${messageOf(peers.error)}` : loadErr ? `the group could not be reloaded: ${loadErr}` : undefined)}
          />
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={busy}>
              {id ? "Save" : "Create group"}
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

function DeleteModal({ group, onClose, onDone }: { group: ApiGroup | null; onClose: () => void; onDone: () => void }) {
  const { api } = useApp();
  return (
    <ConfirmModal
      opened={group !== null}
      title="Delete group"
      verb="Delete"
      errorId="group-delete-error"
      errorTitle="The server refused"
      onClose={onClose}
      onConfirm={async () => {
        if (!group) return;
        await api.delete("/api/groups/{groupId}", { path: { groupId: group.id } });
        onDone();
      }}
    >
      &quot;{group?.name}&quot; will be deleted. Its {group?.peers_count ?? 0} peers stay in the account. A group still named by a policy, a setup key or a
      user cannot be deleted.
    </ConfirmModal>
  );
}

export function GroupsPage() {
  const { api } = useApp();
  const groups = usePoll((signal) => api.get("/api/groups", { signal }), LIVE_INTERVAL_MS, [], ["groups"]);
  const policies = usePoll((signal) => api.get("/api/policies", { signal }), LIVE_INTERVAL_MS, [], ["policies"]);
  const [editing, setEditing] = useState<Editing | null>(null);
  const [deleting, setDeleting] = useState<ApiGroup | null>(null);
  const list = useMemo(() => [...(groups.data ?? [])].sort((a, b) => (isBuiltIn(a) ? -1 : isBuiltIn(b) ? 1 : a.name.localeCompare(b.name))), [groups.data]);
  const usedBy = useMemo(() => {
    const m = new Map<string, Set<string>>();
    for (const p of policies.data ?? [])
      for (const r of p.rules)
        for (const g of [...(r.sources ?? []), ...(r.destinations ?? [])]) {
          const s = m.get(g.id) ?? new Set<string>();
          s.add(p.name);
          m.set(g.id, s);
        }
    return m;
  }, [policies.data]);

  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Title order={2}>Groups</Title>
        <Button onClick={() => setEditing({ kind: "create" })}>Create group</Button>
      </Group>
      <Text size="sm" c="dimmed">
        Policies connect groups of peers. A peer may be in many groups; every peer is in All.
      </Text>
      {groups.error !== null && (
        <Alert color="red" role="alert" title="Could not load the groups">
          {messageOf(groups.error)}
        </Alert>
      )}
      <Table.ScrollContainer minWidth={720}>
        <Table striped highlightOnHover aria-label="Groups" verticalSpacing="xs">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Peers</Table.Th>
              <Table.Th>Resources</Table.Th>
              <Table.Th>Used by policies</Table.Th>
              <Table.Th>
                <VisuallyHidden>Actions</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {list.length === 0 && !groups.loading && (
              <Table.Tr>
                <Table.Td colSpan={5}>
                  <Text c="dimmed" size="sm">
                    No groups yet.
                  </Text>
                </Table.Td>
              </Table.Tr>
            )}
            {list.map((g) => {
              const used = [...(usedBy.get(g.id) ?? [])].sort();
              const builtIn = isBuiltIn(g);
              return (
                <Table.Tr key={g.id} data-group-name={g.name}>
                  <Table.Td>
                    <Text size="sm" fw={500} component="span">
                      {g.name}
                    </Text>
                    {builtIn && (
                      <Badge ml={6} size="xs" variant="light" color="gray">
                        built-in
                      </Badge>
                    )}
                  </Table.Td>
                  <Table.Td title={g.peers.slice(0, 30).map((p) => p.name).join(", ")}>{g.peers_count}</Table.Td>
                  <Table.Td>{g.resources_count}</Table.Td>
                  <Table.Td>
                    {used.length === 0 ? (
                      <Text size="sm" c="dimmed">
                        —
                      </Text>
                    ) : (
                      <Anchor component={RouterLink} to="/policies" size="sm">
                        {used.join(", ")}
                      </Anchor>
                    )}
                  </Table.Td>
                  <Table.Td>
                    {!builtIn && (
                      <Group gap={4} wrap="nowrap" justify="flex-end">
                        <Button size="xs" variant="light" onClick={() => setEditing({ kind: "edit", group: g })} aria-label={`Edit ${g.name}`}>
                          Edit
                        </Button>
                        <Button size="xs" variant="light" color="red" onClick={() => setDeleting(g)} aria-label={`Delete ${g.name}`}>
                          Delete
                        </Button>
                      </Group>
                    )}
                  </Table.Td>
                </Table.Tr>
              );
            })}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      <GroupModal editing={editing} groups={groups.data ?? []} onClose={() => setEditing(null)} onSaved={() => void groups.reload()} />
      <DeleteModal group={deleting} onClose={() => setDeleting(null)} onDone={() => void groups.reload()} />
    </Stack>
  );
}

export default GroupsPage;
