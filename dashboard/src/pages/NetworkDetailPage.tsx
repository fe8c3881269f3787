/**
 * One network: its resources (name, address, the type the server derives
 * from the address, groups, state) and its routers (a peer or peer groups,
 * metric, masquerade, state), each created, edited and deleted
 * (confirmed) here; the network itself is renamed or deleted too.
 * Everything refreshes every 2 s.
 */
import { Alert, Anchor, Badge, Button, Card, Group, MultiSelect, Stack, Switch, Table, Text, TextInput, Textarea, Title } from "@mantine/core";
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
import { MetricInput, RouterPicker, Unavailable, useOptions, type Option } from "../routing/controls";
import {
  fromResource,
  fromRouter,
  newResource,
  newRouter,
  resourceErrorField,
  resourceRequest,
  routerErrorField,
  routerRequest,
  validateResource,
  validateRouter,
  type NetworkResource,
  type NetworkRouter,
  type ResourceErrors,
  type ResourceForm,
  type RouterErrors,
  type RouterForm,
} from "../routing/form";
import { resourceType } from "../routing/net";
import { NetworkModal } from "./NetworksPage";

type ResourceField = Exclude<keyof ResourceErrors, "form">;
type RouterField = Exclude<keyof RouterErrors, "form">;

function ResourceModal({ networkId, editing, groupData, onClose, onDone }: { networkId: string; editing: NetworkResource | "new" | null; groupData: Option[]; onClose: () => void; onDone: () => void }) {
  const { api } = useApp();
  const { f, errors, busy, set, submit } = useFormModal<NetworkResource, ResourceForm, ResourceField>(editing, (r) => (r ? fromResource(r) : newResource()));
  const kind = resourceType(f.address);
  return (
    <FormModal
      opened={editing !== null}
      onClose={onClose}
      title={editing === "new" ? "Add a resource" : `Edit resource ${editing?.name ?? ""}`}
      size="lg"
      busy={busy}
      submitLabel={editing === "new" ? "Add resource" : "Save resource"}
      formError={errors.form}
      onSubmit={submit({
        validate: validateResource,
        errorField: resourceErrorField,
        onClose,
        send: async (f) => {
          const body = resourceRequest(f);
          if (editing === "new") await api.post("/api/networks/{networkId}/resources", { path: { networkId }, body });
          else if (editing) await api.put("/api/networks/{networkId}/resources/{resourceId}", { path: { networkId, resourceId: editing.id }, body });
          onDone();
        },
      })}
    >
      <Group align="flex-start" gap="sm" wrap="wrap">
        <TextInput label="Name" required value={f.name} onChange={(e) => set({ name: e.currentTarget.value }, "name")} error={errors.name} data-autofocus style={{ flex: 1, minWidth: 220 }} maxLength={255} />
        <Switch label="Enabled" checked={f.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked }, "name")} mt={32} />
      </Group>
      <TextInput
        label="Address"
        required
        description={"type" in kind ? `A ${kind.type}` : "A host IP (10.0.0.5), a subnet (192.168.178.0/24) or a domain (example.com, *.example.com)"}
        placeholder="192.168.178.0/24"
        value={f.address}
        onChange={(e) => set({ address: e.currentTarget.value }, "address")}
        error={errors.address}
      />
      <MultiSelect
        label="Resource groups"
        description="Access policies reach the resource through these groups"
        data={groupData}
        value={f.groups}
        onChange={(v) => set({ groups: v }, "groups")}
        searchable
        clearable
        error={errors.groups}
      />
      <Textarea label="Description" autosize minRows={1} maxRows={4} value={f.description} onChange={(e) => set({ description: e.currentTarget.value }, "description")} error={errors.description} />
    </FormModal>
  );
}

function RouterModal({
  networkId,
  editing,
  groupData,
  peerData,
  onClose,
  onDone,
}: {
  networkId: string;
  editing: NetworkRouter | "new" | null;
  groupData: Option[];
  peerData: Option[];
  onClose: () => void;
  onDone: () => void;
}) {
  const { api } = useApp();
  const { f, errors, busy, set, submit } = useFormModal<NetworkRouter, RouterForm, RouterField>(editing, (r) => (r ? fromRouter(r) : newRouter()));
  return (
    <FormModal
      opened={editing !== null}
      onClose={onClose}
      title={editing === "new" ? "Add a routing peer" : "Edit the router"}
      size="lg"
      busy={busy}
      submitLabel={editing === "new" ? "Add router" : "Save router"}
      formError={errors.form}
      onSubmit={submit({
        validate: validateRouter,
        errorField: routerErrorField,
        onClose,
        send: async (f) => {
          const body = routerRequest(f);
          if (editing === "new") await api.post("/api/networks/{networkId}/routers", { path: { networkId }, body });
          else if (editing) await api.put("/api/networks/{networkId}/routers/{routerId}", { path: { networkId, routerId: editing.id }, body });
          onDone();
        },
      })}
    >
      <RouterPicker
        idPrefix="router"
        kind={f.kind}
        peer={f.peer}
        peerGroups={f.peerGroups}
        groupData={groupData}
        peerData={peerData}
        error={errors.router}
        onChange={(o) => set(o, "router")}
      />
      <Group align="flex-start" gap="lg" wrap="wrap">
        <MetricInput value={f.metric} error={errors.metric} onChange={(v) => set({ metric: v }, "metric")} />
        <Switch label="Masquerade" description="Translate the source address to the routing peer's" checked={f.masquerade} onChange={(e) => set({ masquerade: e.currentTarget.checked }, "metric")} mt={28} />
        <Switch label="Enabled" checked={f.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked }, "metric")} mt={28} />
      </Group>
    </FormModal>
  );
}

export function NetworkDetailPage() {
  const { id = "" } = useParams();
  const { api } = useApp();
  const navigate = useNavigate();
  const { me } = useCurrentUser();
  const noRead = me ? deniedReason(me, "networks", "read") : "";
  const net = usePoll((signal) => (noRead ? Promise.resolve(undefined) : api.get("/api/networks/{networkId}", { signal, path: { networkId: id } })), LIVE_INTERVAL_MS, [id, noRead]);
  const resources = usePoll(
    (signal) => (noRead ? Promise.resolve([] as NetworkResource[]) : api.get("/api/networks/{networkId}/resources", { signal, path: { networkId: id } })),
    LIVE_INTERVAL_MS,
    [id, noRead],
  );
  const routers = usePoll(
    (signal) => (noRead ? Promise.resolve([] as NetworkRouter[]) : api.get("/api/networks/{networkId}/routers", { signal, path: { networkId: id } })),
    LIVE_INTERVAL_MS,
    [id, noRead],
  );
  const groups = usePoll((signal) => api.get("/api/groups", { signal }), 10_000);
  const peers = usePoll((signal) => api.get("/api/peers", { signal }), 10_000);
  const { groupData, peerData } = useOptions(groups.data, peers.data);
  const groupName = useMemo(() => new Map(groupData.map((g) => [g.value, g.label])), [groupData]);
  const peerName = useMemo(() => new Map((peers.data ?? []).map((p) => [p.id, p.name])), [peers.data]);
  const [editNet, setEditNet] = useState(false);
  const [deleteNet, setDeleteNet] = useState(false);
  const [editRes, setEditRes] = useState<NetworkResource | "new" | null>(null);
  const [delRes, setDelRes] = useState<NetworkResource | null>(null);
  const [editRouter, setEditRouter] = useState<NetworkRouter | "new" | null>(null);
  const [delRouter, setDelRouter] = useState<NetworkRouter | null>(null);
  const n = net.data?.id === id ? net.data : undefined;
  const gone = net.error instanceof ApiError && net.error.status === 404;
  const noUpdate = deniedReason(me, "networks", "update");
  const noDelete = deniedReason(me, "networks", "delete");
  const noCreate = deniedReason(me, "networks", "create");
  const reloadAll = () => {
    void net.reload();
    void resources.reload();
    void routers.reload();
  };
  const resList = useMemo(() => [...(resources.data ?? [])].sort((a, b) => a.name.localeCompare(b.name)), [resources.data]);
  const routerText = (r: NetworkRouter) => (r.peer ? peerName.get(r.peer) ?? r.peer : `groups: ${r.peer_groups.map((g) => groupName.get(g) ?? g).join(", ")}`);

  return (
    <Stack gap="md">
      <Anchor component={RouterLink} to="/networks" size="sm">
        ← Networks
      </Anchor>
      {noRead ? (
        <>
          <Title order={2}>Network</Title>
          <Unavailable reason={noRead} />
        </>
      ) : gone ? (
        <Alert color="gray" title="No such network" role="alert">
          This network does not exist (any more).
        </Alert>
      ) : net.error !== null && !n ? (
        <Alert color="red" role="alert" title="Could not load the network">
          {messageOf(net.error)}
        </Alert>
      ) : !n ? (
        <Text c="dimmed">Loading…</Text>
      ) : (
        <>
          <Group justify="space-between" align="center">
            <Stack gap={0}>
              <Title order={2}>{n.name}</Title>
              {n.description && (
                <Text size="sm" c="dimmed">
                  {n.description}
                </Text>
              )}
            </Stack>
            <Group gap="xs">
              <Allowed why={noUpdate}>
                <Button variant="default" onClick={() => setEditNet(true)}>
                  Edit network
                </Button>
              </Allowed>
              <Allowed why={noDelete}>
                <Button color="red" variant="light" onClick={() => setDeleteNet(true)}>
                  Delete network
                </Button>
              </Allowed>
            </Group>
          </Group>
          {(resources.error ?? routers.error) !== null && (
            <Alert color="red" role="alert">
              Refreshing failed: {messageOf(resources.error ?? routers.error)}
            </Alert>
          )}
          <Card withBorder>
            <Group justify="space-between" mb="xs">
              <Title order={3} size="h4">
                Resources
              </Title>
              <Allowed why={noCreate}>
                <Button size="xs" onClick={() => setEditRes("new")}>
                  Add resource
                </Button>
              </Allowed>
            </Group>
            <ListTable
              label="Resources"
              minWidth={760}
              hover={false}
              headers={["Name", "Address", "Type", "Groups", "Enabled"]}
              empty={resList.length === 0 ? "No resources: add the hosts, subnets or domains this network reaches." : null}
              loading={resources.loading}
            >
              {resList.map((r) => (
                <Table.Tr key={r.id} data-resource-name={r.name}>
                  <Table.Td>
                    <Text size="sm" fw={500}>
                      {r.name}
                    </Text>
                    {r.description && (
                      <Text size="xs" c="dimmed">
                        {r.description}
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td>
                    <Text size="sm" ff="monospace">
                      {r.address}
                    </Text>
                  </Table.Td>
                  <Table.Td>
                    <Badge size="sm" variant="light" color="gray">
                      {r.type}
                    </Badge>
                  </Table.Td>
                  <Table.Td>{r.groups.map((g) => g.name).join(", ") || "—"}</Table.Td>
                  <Table.Td>{r.enabled ? "yes" : "no"}</Table.Td>
                  <RowActions name={`resource ${r.name}`} noUpdate={noUpdate} noDelete={noDelete} onEdit={() => setEditRes(r)} onDelete={() => setDelRes(r)} />
                </Table.Tr>
              ))}
            </ListTable>
          </Card>
          <Card withBorder>
            <Group justify="space-between" mb="xs">
              <Title order={3} size="h4">
                Routing peers
              </Title>
              <Allowed why={noCreate}>
                <Button size="xs" onClick={() => setEditRouter("new")}>
                  Add router
                </Button>
              </Allowed>
            </Group>
            <ListTable
              label="Routers"
              minWidth={640}
              hover={false}
              headers={["Peer or peer groups", "Metric", "Masquerade", "Enabled"]}
              empty={(routers.data ?? []).length === 0 ? "No routers: add a peer that forwards traffic to the resources." : null}
              loading={routers.loading}
            >
              {(routers.data ?? []).map((r) => (
                <Table.Tr key={r.id} data-router={routerText(r)}>
                  <Table.Td>{routerText(r)}</Table.Td>
                  <Table.Td>{r.metric}</Table.Td>
                  <Table.Td>{r.masquerade ? "yes" : "no"}</Table.Td>
                  <Table.Td>{r.enabled ? "yes" : "no"}</Table.Td>
                  <RowActions name={`router ${routerText(r)}`} noUpdate={noUpdate} noDelete={noDelete} onEdit={() => setEditRouter(r)} onDelete={() => setDelRouter(r)} />
                </Table.Tr>
              ))}
            </ListTable>
          </Card>
          <NetworkModal editing={editNet ? n : null} onClose={() => setEditNet(false)} onDone={() => void net.reload()} />
          <ResourceModal networkId={id} editing={editRes} groupData={groupData} onClose={() => setEditRes(null)} onDone={reloadAll} />
          <RouterModal networkId={id} editing={editRouter} groupData={groupData} peerData={peerData} onClose={() => setEditRouter(null)} onDone={reloadAll} />
          <ConfirmModal
            opened={deleteNet}
            title="Delete network"
            verb="Delete"
            errorId="network-delete-error"
            errorTitle="The server refused"
            onClose={() => setDeleteNet(false)}
            onConfirm={async () => {
              await api.delete("/api/networks/{networkId}", { path: { networkId: id } });
              void navigate("/networks");
            }}
          >
            The network &quot;{n.name}&quot; will be deleted with its {n.resources.length} resource(s) and {n.routers.length} router(s).
          </ConfirmModal>
          <ConfirmModal
            opened={delRes !== null}
            title="Delete resource"
            verb="Delete"
            errorId="resource-delete-error"
            errorTitle="The server refused"
            onClose={() => setDelRes(null)}
            onConfirm={async () => {
              if (!delRes) return;
              await api.delete("/api/networks/{networkId}/resources/{resourceId}", { path: { networkId: id, resourceId: delRes.id } });
              reloadAll();
            }}
          >
            The resource &quot;{delRes?.name}&quot; ({delRes?.address}) will be deleted; peers stop reaching it through this network.
          </ConfirmModal>
          <ConfirmModal
            opened={delRouter !== null}
            title="Delete router"
            verb="Delete"
            errorId="router-delete-error"
            errorTitle="The server refused"
            onClose={() => setDelRouter(null)}
            onConfirm={async () => {
              if (!delRouter) return;
              await api.delete("/api/networks/{networkId}/routers/{routerId}", { path: { networkId: id, routerId: delRouter.id } });
              reloadAll();
            }}
          >
            {delRouter ? routerText(delRouter) : ""} will stop routing this network&apos;s resources.
          </ConfirmModal>
        </>
      )}
    </Stack>
  );
}

export default NetworkDetailPage;
