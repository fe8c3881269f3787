/**
 * Networks (NetBird's newer routing model): the list, refreshed live, with
 * each network's resource, router and routing peer counts and the
 * policies that reach its resources; create, edit and delete (confirmed;
 * its resources and routers go with it). A network's resources and
 * routers are on its own page (NetworkDetailPage).
 */
import { Alert, Anchor, Button, Group, Modal, Stack, Table, Text, TextInput, Textarea, Title, VisuallyHidden } from "@mantine/core";
import { useMemo, useState, type FormEvent } from "react";
import { Link as RouterLink } from "react-router";
import { messageOf } from "../api/client";
import { fieldOf } from "../api/fielderror";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { Allowed } from "../common/Allowed";
import { ConfirmModal } from "../common/ConfirmModal";
import { deniedReason } from "../common/permissions";
import { useCurrentUser } from "../common/useCurrentUser";
import { Unavailable } from "../routing/controls";
import { networkRequest, validateNetwork, type Network, type NetworkErrors, type NetworkForm } from "../routing/form";

/** Create or edit a network's name and description. */
export function NetworkModal({ editing, onClose, onDone }: { editing: Network | "new" | null; onClose: () => void; onDone: (n: Network) => void }) {
  const { api } = useApp();
  const [f, setF] = useState<NetworkForm>({ name: "", description: "" });
  const [seen, setSeen] = useState<string | null>(null);
  const [errors, setErrors] = useState<NetworkErrors>({});
  const [busy, setBusy] = useState(false);
  const key = editing === null ? null : editing === "new" ? "new" : editing.id;
  if (key !== seen) {
    setSeen(key);
    setF(editing && editing !== "new" ? { name: editing.name, description: editing.description ?? "" } : { name: "", description: "" });
    setErrors({});
  }
  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validateNetwork(f);
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      const body = networkRequest(f);
      const n = editing === "new" ? await api.post("/api/networks", { body }) : editing ? await api.put("/api/networks/{networkId}", { path: { networkId: editing.id }, body }) : null;
      if (n) onDone(n);
      onClose();
    } catch (err) {
      setErrors({ [fieldOf(err, { name: "name", description: "description" } as const) ?? "form"]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal closeButtonProps={{ "aria-label": "Close" }} opened={editing !== null} onClose={onClose} title={editing === "new" ? "Create a network" : `Edit network ${editing?.name ?? ""}`}>
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Stack>
          <TextInput
            label="Name"
            required
            value={f.name}
            onChange={(e) => (setF({ ...f, name: e.currentTarget.value }), setErrors({}))}
            error={errors.name}
            data-autofocus
            maxLength={255}
          />
          <Textarea
            label="Description"
            autosize
            minRows={1}
            maxRows={4}
            value={f.description}
            onChange={(e) => (setF({ ...f, description: e.currentTarget.value }), setErrors({}))}
            error={errors.description}
          />
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={busy}>
              {editing === "new" ? "Create network" : "Save network"}
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

export function NetworksPage() {
  const { api } = useApp();
  const { me } = useCurrentUser();
  const noRead = me ? deniedReason(me, "networks", "read") : "";
  const networks = usePoll((signal) => (noRead ? Promise.resolve([] as Network[]) : api.get("/api/networks", { signal })), LIVE_INTERVAL_MS, [noRead]);
  const policies = usePoll((signal) => api.get("/api/policies", { signal }).catch(() => []), 10_000);
  const policyName = useMemo(() => new Map((policies.data ?? []).map((p) => [p.id, p.name])), [policies.data]);
  const [editing, setEditing] = useState<Network | "new" | null>(null);
  const [deleting, setDeleting] = useState<Network | null>(null);
  const list = useMemo(() => [...(networks.data ?? [])].sort((a, b) => a.name.localeCompare(b.name)), [networks.data]);
  const noCreate = deniedReason(me, "networks", "create");
  const noUpdate = deniedReason(me, "networks", "update");
  const noDelete = deniedReason(me, "networks", "delete");

  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Title order={2}>Networks</Title>
        {!noRead && (
          <Allowed why={noCreate}>
            <Button onClick={() => setEditing("new")}>Create network</Button>
          </Allowed>
        )}
      </Group>
      <Text size="sm" c="dimmed">
        A network is a set of resources (hosts, subnets, domains) reached through its routing peers. Access policies whose destination is a
        resource&apos;s group decide who reaches it.
      </Text>
      {noRead ? (
        <Unavailable reason={noRead} />
      ) : (
        <>
          {networks.error !== null && (
            <Alert color="red" role="alert" title="Could not load the networks">
              {messageOf(networks.error)}
            </Alert>
          )}
          <Table.ScrollContainer minWidth={860}>
            <Table striped highlightOnHover aria-label="Networks" verticalSpacing="xs">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Name</Table.Th>
                  <Table.Th>Resources</Table.Th>
                  <Table.Th>Routers</Table.Th>
                  <Table.Th>Routing peers</Table.Th>
                  <Table.Th>Policies</Table.Th>
                  <Table.Th>
                    <VisuallyHidden>Actions</VisuallyHidden>
                  </Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {list.length === 0 && !networks.loading && (
                  <Table.Tr>
                    <Table.Td colSpan={6}>
                      <Text size="sm" c="dimmed">
                        No networks yet.
                      </Text>
                    </Table.Td>
                  </Table.Tr>
                )}
                {list.map((n) => (
                  <Table.Tr key={n.id} data-network-name={n.name}>
                    <Table.Td>
                      <Anchor component={RouterLink} to={`/networks/${encodeURIComponent(n.id)}`} size="sm" fw={500}>
                        {n.name}
                      </Anchor>
                      {n.description && (
                        <Text size="xs" c="dimmed">
                          {n.description}
                        </Text>
                      )}
                    </Table.Td>
                    <Table.Td>{n.resources.length}</Table.Td>
                    <Table.Td>{n.routers.length}</Table.Td>
                    <Table.Td>{n.routing_peers_count}</Table.Td>
                    <Table.Td>
                      {n.policies.length ? (
                        <Text size="sm">{n.policies.map((id) => policyName.get(id) ?? id).join(", ")}</Text>
                      ) : (
                        <Text size="sm" c="dimmed">
                          none: no one reaches its resources
                        </Text>
                      )}
                    </Table.Td>
                    <Table.Td>
                      <Group gap={4} wrap="nowrap" justify="flex-end">
                        <Allowed why={noUpdate}>
                          <Button size="xs" variant="light" onClick={() => setEditing(n)} aria-label={`Edit ${n.name}`}>
                            Edit
                          </Button>
                        </Allowed>
                        <Allowed why={noDelete}>
                          <Button size="xs" variant="light" color="red" onClick={() => setDeleting(n)} aria-label={`Delete ${n.name}`}>
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
        </>
      )}
      <NetworkModal editing={editing} onClose={() => setEditing(null)} onDone={() => void networks.reload()} />
      <ConfirmModal
        opened={deleting !== null}
        title="Delete network"
        verb="Delete"
        errorId="network-delete-error"
        errorTitle="The server refused"
        onClose={() => setDeleting(null)}
        onConfirm={async () => {
          if (!deleting) return;
          await api.delete("/api/networks/{networkId}", { path: { networkId: deleting.id } });
          void networks.reload();
        }}
      >
        The network &quot;{deleting?.name}&quot; will be deleted with its {deleting?.resources.length ?? 0} resource(s) and {deleting?.routers.length ?? 0}{" "}
        router(s); peers stop reaching its resources within seconds.
      </ConfirmModal>
    </Stack>
  );
}

export default NetworksPage;
