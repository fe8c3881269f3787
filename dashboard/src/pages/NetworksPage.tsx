/**
 * Networks (NetBird's newer routing model): the list, refreshed live, with
 * each network's resource, router and routing peer counts and the
 * policies that reach its resources; create, edit and delete (confirmed;
 * its resources and routers go with it). A network's resources and
 * routers are on its own page (NetworkDetailPage).
 */
import { Anchor, Button, Group, Stack, Table, Text, TextInput, Textarea, Title } from "@mantine/core";
import { useMemo, useState } from "react";
import { Link as RouterLink } from "react-router";
import { fieldOf } from "../api/fielderror";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { Allowed } from "../common/Allowed";
import { ConfirmModal } from "../common/ConfirmModal";
import { FormModal, useFormModal } from "../common/FormModal";
import { ListTable, RowActions } from "../common/ListTable";
import { deniedReason } from "../common/permissions";
import { useCurrentUser } from "../common/useCurrentUser";
import { Unavailable } from "../routing/controls";
import { networkRequest, validateNetwork, type Network, type NetworkForm } from "../routing/form";

/** Create or edit a network's name and description. */
export function NetworkModal({ editing, onClose, onDone }: { editing: Network | "new" | null; onClose: () => void; onDone: (n: Network) => void }) {
  const { api } = useApp();
  const { f, setF, errors, setErrors, busy, submit } = useFormModal<Network, NetworkForm, "name" | "description">(editing, (n) =>
    n ? { name: n.name, description: n.description ?? "" } : { name: "", description: "" },
  );
  return (
    <FormModal
      opened={editing !== null}
      onClose={onClose}
      title={editing === "new" ? "Create a network" : `Edit network ${editing?.name ?? ""}`}
      busy={busy}
      submitLabel={editing === "new" ? "Create network" : "Save network"}
      formError={errors.form}
      onSubmit={submit({
        validate: validateNetwork,
        errorField: (err) => fieldOf(err, { name: "name", description: "description" } as const) ?? "form",
        onClose,
        send: async (f) => {
          const body = networkRequest(f);
          const n = editing === "new" ? await api.post("/api/networks", { body }) : editing ? await api.put("/api/networks/{networkId}", { path: { networkId: editing.id }, body }) : null;
          if (n) onDone(n);
        },
      })}
    >
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
    </FormModal>
  );
}

export function NetworksPage() {
  const { api } = useApp();
  const { me } = useCurrentUser();
  const noRead = me ? deniedReason(me, "networks", "read") : "";
  const networks = usePoll((signal) => (noRead ? Promise.resolve([] as Network[]) : api.get("/api/networks", { signal })), LIVE_INTERVAL_MS, [noRead], ["networks"]);
  const policies = usePoll((signal) => api.get("/api/policies", { signal }).catch(() => []), 10_000, [], ["policies"]);
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
          <ListTable
            label="Networks"
            minWidth={860}
            headers={["Name", "Resources", "Routers", "Routing peers", "Policies"]}
            empty={list.length === 0 ? "No networks yet." : null}
            loading={networks.loading}
            error={networks.error}
            errorTitle="Could not load the networks"
          >
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
                <RowActions name={n.name} noUpdate={noUpdate} noDelete={noDelete} onEdit={() => setEditing(n)} onDelete={() => setDeleting(n)} />
              </Table.Tr>
            ))}
          </ListTable>
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
