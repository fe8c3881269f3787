/**
 * One network: its resources (name, address, the type the server derives
 * from the address, groups, state) and its routers (a peer or peer groups,
 * metric, masquerade, state), each created, edited and deleted
 * (confirmed) here; the network itself is renamed or deleted too.
 * Everything refreshes every 2 s.
 */
import { Alert, Anchor, Badge, Button, Card, Group, Modal, MultiSelect, Stack, Switch, Table, Text, TextInput, Textarea, Title, VisuallyHidden } from "@mantine/core";
import { useMemo, useState, type FormEvent } from "react";
import { Link as RouterLink, useNavigate, useParams } from "react-router";
import { ApiError, messageOf } from "../api/client";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { Allowed } from "../common/Allowed";
import { ConfirmModal } from "../common/ConfirmModal";
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

function ResourceModal({ networkId, editing, groupData, onClose, onDone }: { networkId: string; editing: NetworkResource | "new" | null; groupData: Option[]; onClose: () => void; onDone: () => void }) {
  const { api } = useApp();
  const [f, setF] = useState<ResourceForm>(newResource);
  const [seen, setSeen] = useState<string | null>(null);
  const [errors, setErrors] = useState<ResourceErrors>({});
  const [busy, setBusy] = useState(false);
  const key = editing === null ? null : editing === "new" ? "new" : editing.id;
  if (key !== seen) {
    setSeen(key);
    setF(editing && editing !== "new" ? fromResource(editing) : newResource());
    setErrors({});
  }
  const set = (o: Partial<ResourceForm>, clear: keyof ResourceErrors) => {
    setF((x) => ({ ...x, ...o }));
    setErrors((e) => ({ ...e, [clear]: undefined, form: undefined }));
  };
  const kind = resourceType(f.address);
  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validateResource(f);
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      const body = resourceRequest(f);
      if (editing === "new") await api.post("/api/networks/{networkId}/resources", { path: { networkId }, body });
      else if (editing) await api.put("/api/networks/{networkId}/resources/{resourceId}", { path: { networkId, resourceId: editing.id }, body });
      onDone();
      onClose();
    } catch (err) {
      setErrors({ [resourceErrorField(err)]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal closeButtonProps={{ "aria-label": "Close" }} opened={editing !== null} onClose={onClose} title={editing === "new" ? "Add a resource" : `Edit resource ${editing?.name ?? ""}`} size="lg">
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Stack>
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
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={busy}>
              {editing === "new" ? "Add resource" : "Save resource"}
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
  const [f, setF] = useState<RouterForm>(newRouter);
  const [seen, setSeen] = useState<string | null>(null);
  const [errors, setErrors] = useState<RouterErrors>({});
  const [busy, setBusy] = useState(false);
  const key = editing === null ? null : editing === "new" ? "new" : editing.id;
  if (key !== seen) {
    setSeen(key);
    setF(editing && editing !== "new" ? fromRouter(editing) : newRouter());
    setErrors({});
  }
  const set = (o: Partial<RouterForm>, clear: keyof RouterErrors) => {
    setF((x) => ({ ...x, ...o }));
    setErrors((e) => ({ ...e, [clear]: undefined, form: undefined }));
  };
  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validateRouter(f);
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      const body = routerRequest(f);
      if (editing === "new") await api.post("/api/networks/{networkId}/routers", { path: { networkId }, body });
      else if (editing) await api.put("/api/networks/{networkId}/routers/{routerId}", { path: { networkId, routerId: editing.id }, body });
      onDone();
      onClose();
    } catch (err) {
      setErrors({ [routerErrorField(err)]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal closeButtonProps={{ "aria-label": "Close" }} opened={editing !== null} onClose={onClose} title={editing === "new" ? "Add a routing peer" : "Edit the router"} size="lg">
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Stack>
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
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>
              Cancel
            </Button>
            <Button type="submit" loading={busy}>
              {editing === "new" ? "Add router" : "Save router"}
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

const empty = (cols: number, text: string) => (
  <Table.Tr>
    <Table.Td colSpan={cols}>
      <Text size="sm" c="dimmed">
        {text}
      </Text>
    </Table.Td>
  </Table.Tr>
);

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
            <Table.ScrollContainer minWidth={760}>
              <Table striped aria-label="Resources" verticalSpacing="xs">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Name</Table.Th>
                    <Table.Th>Address</Table.Th>
                    <Table.Th>Type</Table.Th>
                    <Table.Th>Groups</Table.Th>
                    <Table.Th>Enabled</Table.Th>
                    <Table.Th>
                      <VisuallyHidden>Actions</VisuallyHidden>
                    </Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {resList.length === 0 && !resources.loading && empty(6, "No resources: add the hosts, subnets or domains this network reaches.")}
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
                      <Table.Td>
                        <Group gap={4} wrap="nowrap" justify="flex-end">
                          <Allowed why={noUpdate}>
                            <Button size="xs" variant="light" onClick={() => setEditRes(r)} aria-label={`Edit resource ${r.name}`}>
                              Edit
                            </Button>
                          </Allowed>
                          <Allowed why={noDelete}>
                            <Button size="xs" variant="light" color="red" onClick={() => setDelRes(r)} aria-label={`Delete resource ${r.name}`}>
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
            <Table.ScrollContainer minWidth={640}>
              <Table striped aria-label="Routers" verticalSpacing="xs">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Peer or peer groups</Table.Th>
                    <Table.Th>Metric</Table.Th>
                    <Table.Th>Masquerade</Table.Th>
                    <Table.Th>Enabled</Table.Th>
                    <Table.Th>
                      <VisuallyHidden>Actions</VisuallyHidden>
                    </Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {(routers.data ?? []).length === 0 && !routers.loading && empty(5, "No routers: add a peer that forwards traffic to the resources.")}
                  {(routers.data ?? []).map((r) => (
                    <Table.Tr key={r.id} data-router={routerText(r)}>
                      <Table.Td>{routerText(r)}</Table.Td>
                      <Table.Td>{r.metric}</Table.Td>
                      <Table.Td>{r.masquerade ? "yes" : "no"}</Table.Td>
                      <Table.Td>{r.enabled ? "yes" : "no"}</Table.Td>
                      <Table.Td>
                        <Group gap={4} wrap="nowrap" justify="flex-end">
                          <Allowed why={noUpdate}>
                            <Button size="xs" variant="light" onClick={() => setEditRouter(r)} aria-label={`Edit router ${routerText(r)}`}>
                              Edit
                            </Button>
                          </Allowed>
                          <Allowed why={noDelete}>
                            <Button size="xs" variant="light" color="red" onClick={() => setDelRouter(r)} aria-label={`Delete router ${routerText(r)}`}>
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
