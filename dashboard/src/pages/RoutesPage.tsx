/**
 * Routes (NetBird's classic network routes): the list, refreshed live,
 * with each route's network or domains, routing peer or peer groups,
 * distribution groups, metric, masquerade, state and an exit node badge
 * for 0.0.0.0/0 and ::/0; create, edit (every field of the API) and
 * delete (confirmed). The form checks before sending (routing/form.ts) and
 * puts a server refusal beside the control its message names.
 */
import { Badge, Button, Group, MultiSelect, SegmentedControl, Stack, Switch, Table, Text, Textarea, TextInput, Title } from "@mantine/core";
import { useMemo, useState } from "react";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { Allowed } from "../common/Allowed";
import { ConfirmModal } from "../common/ConfirmModal";
import { FormModal, useFormModal } from "../common/FormModal";
import { EnabledCell, ListTable, RowActions } from "../common/ListTable";
import { deniedReason } from "../common/permissions";
import { useCurrentUser } from "../common/useCurrentUser";
import { MetricInput, RouterPicker, Unavailable, useOptions, type Option } from "../routing/controls";
import {
  fromRoute,
  isExitNode,
  isExitNodeForm,
  newRoute,
  routeErrorField,
  routeRequest,
  validateRoute,
  type Route,
  type RouteField,
  type RouteForm,
} from "../routing/form";

function RouteModal({
  editing,
  groupData,
  peerData,
  onClose,
  onDone,
}: {
  editing: Route | "new" | null;
  groupData: Option[];
  peerData: Option[];
  onClose: () => void;
  onDone: () => void;
}) {
  const { api } = useApp();
  const { f, errors, busy, set, submit } = useFormModal<Route, RouteForm, RouteField>(editing, (r) => (r ? fromRoute(r) : newRoute()));
  const exit = isExitNodeForm(f);
  return (
    <FormModal
      opened={editing !== null}
      onClose={onClose}
      title={editing === "new" ? "Create a route" : `Edit route ${editing?.network_id ?? ""}`}
      size="xl"
      busy={busy}
      submitLabel={editing === "new" ? "Create route" : "Save route"}
      formError={errors.form}
      onSubmit={submit({
        validate: validateRoute,
        errorField: routeErrorField,
        onClose,
        send: async (f) => {
          const body = routeRequest(f);
          if (editing === "new") await api.post("/api/routes", { body });
          else if (editing) await api.put("/api/routes/{routeId}", { path: { routeId: editing.id }, body });
          onDone();
        },
      })}
    >
      <Group align="flex-start" gap="sm" wrap="wrap">
        <TextInput
          label="Network identifier"
          description="1-40 characters; routes with the same identifier form one highly available route"
          required
          value={f.networkId}
          onChange={(e) => set({ networkId: e.currentTarget.value }, "networkId")}
          error={errors.networkId}
          data-autofocus
          style={{ flex: 1, minWidth: 240 }}
        />
        <Switch label="Enabled" checked={f.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked }, "networkId")} mt={32} />
      </Group>
      <TextInput label="Description" value={f.description} onChange={(e) => set({ description: e.currentTarget.value }, "description")} error={errors.description} />
      <Stack gap={4}>
        <Group justify="space-between" gap="xs">
          <Text size="sm" fw={500} id="route-dest-label">
            Destination
          </Text>
          <SegmentedControl
            size="xs"
            aria-label="Destination: a network range or domains"
            value={f.destKind}
            onChange={(v) => set({ destKind: v as RouteForm["destKind"] }, "destination")}
            data={[
              { value: "network", label: "Network range" },
              { value: "domains", label: "Domains" },
            ]}
          />
        </Group>
        {f.destKind === "network" ? (
          <TextInput
            aria-labelledby="route-dest-label"
            description="A CIDR such as 10.64.0.0/24; 0.0.0.0/0 or ::/0 makes the routing peer an exit node"
            placeholder="10.64.0.0/24"
            value={f.network}
            onChange={(e) => set({ network: e.currentTarget.value }, "destination")}
            error={errors.destination}
          />
        ) : (
          <>
            <Textarea
              aria-labelledby="route-dest-label"
              description="Up to 32 domains, one per line; *.example.com covers its subdomains. Routed to the addresses they resolve to."
              placeholder={"example.com\n*.internal.example.com"}
              autosize
              minRows={2}
              maxRows={8}
              value={f.domains}
              onChange={(e) => set({ domains: e.currentTarget.value }, "destination")}
              error={errors.destination}
            />
            <Switch
              label="Keep routes"
              description="Keep the resolved addresses routed after the domains stop resolving to them"
              checked={f.keepRoute}
              onChange={(e) => set({ keepRoute: e.currentTarget.checked }, "destination")}
            />
          </>
        )}
      </Stack>
      <RouterPicker
        idPrefix="route"
        kind={f.routerKind}
        peer={f.peer}
        peerGroups={f.peerGroups}
        groupData={groupData}
        peerData={peerData}
        error={errors.router}
        onChange={(o) => set({ ...(o.kind ? { routerKind: o.kind } : {}), ...(o.peer !== undefined ? { peer: o.peer } : {}), ...(o.peerGroups ? { peerGroups: o.peerGroups } : {}) }, "router")}
      />
      <MultiSelect
        label="Distribution groups"
        description="Peers in these groups get the route"
        required
        data={groupData}
        value={f.groups}
        onChange={(v) => set({ groups: v }, "groups")}
        searchable
        error={errors.groups}
      />
      <MultiSelect
        label="Access control groups"
        description="Optional: only traffic that access policies allow to these groups passes the routing peer"
        data={groupData}
        value={f.accessControlGroups}
        onChange={(v) => set({ accessControlGroups: v }, "accessControlGroups")}
        searchable
        clearable
        placeholder="None: every distribution peer may use the route"
        error={errors.accessControlGroups}
      />
      <Group align="flex-start" gap="lg" wrap="wrap">
        <MetricInput value={f.metric} error={errors.metric} onChange={(v) => set({ metric: v }, "metric")} />
        <Switch
          label="Masquerade"
          description="The routing peer translates the source address to its own"
          checked={f.masquerade}
          onChange={(e) => set({ masquerade: e.currentTarget.checked }, "metric")}
          mt={28}
        />
      </Group>
      {(exit || f.skipAutoApply) && (
        <Switch
          label="Do not apply automatically"
          description="Clients use this exit node only after selecting it (netbird networks select, or netbird up --exit-node)"
          checked={f.skipAutoApply}
          onChange={(e) => set({ skipAutoApply: e.currentTarget.checked }, "skipAutoApply")}
          error={errors.skipAutoApply}
        />
      )}
    </FormModal>
  );
}

export function RoutesPage() {
  const { api } = useApp();
  const { me } = useCurrentUser();
  const noRead = me ? deniedReason(me, "routes", "read") : "";
  const routes = usePoll((signal) => (noRead ? Promise.resolve([] as Route[]) : api.get("/api/routes", { signal })), LIVE_INTERVAL_MS, [noRead], ["routes"]);
  const groups = usePoll((signal) => api.get("/api/groups", { signal }), 10_000, [], ["groups"]);
  const peers = usePoll((signal) => api.get("/api/peers", { signal }), 10_000, [], ["peers"]);
  const { groupData, peerData } = useOptions(groups.data, peers.data);
  const [editing, setEditing] = useState<Route | "new" | null>(null);
  const [deleting, setDeleting] = useState<Route | null>(null);
  const groupName = useMemo(() => new Map(groupData.map((g) => [g.value, g.label])), [groupData]);
  const peerName = useMemo(() => new Map((peers.data ?? []).map((p) => [p.id, p.name])), [peers.data]);
  const names = (ids: string[] | undefined) => (ids ?? []).map((id) => groupName.get(id) ?? id).join(", ");
  const list = useMemo(() => [...(routes.data ?? [])].sort((a, b) => a.network_id.localeCompare(b.network_id) || a.metric - b.metric), [routes.data]);
  const noCreate = deniedReason(me, "routes", "create");
  const noUpdate = deniedReason(me, "routes", "update");
  const noDelete = deniedReason(me, "routes", "delete");

  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Title order={2}>Routes</Title>
        {!noRead && (
          <Allowed why={noCreate}>
            <Button onClick={() => setEditing("new")}>Create route</Button>
          </Allowed>
        )}
      </Group>
      <Text size="sm" c="dimmed">
        A route sends traffic for a network range or for domains through a routing peer; peers in the distribution groups get it. Routes with the
        same identifier fail over to each other; a route of 0.0.0.0/0 makes an exit node.
      </Text>
      {noRead ? (
        <Unavailable reason={noRead} />
      ) : (
        <>
          <ListTable
            label="Routes"
            minWidth={980}
            headers={["Enabled", "Identifier", "Network or domains", "Routing peer", "Distribution", "Metric", "Masquerade"]}
            empty={list.length === 0 ? "No routes yet." : null}
            loading={routes.loading}
            error={routes.error}
            errorTitle="Could not load the routes"
          >
            {list.map((r) => (
              <Table.Tr key={r.id} data-route-id={r.network_id}>
                <Table.Td>
                  <EnabledCell
                    enabled={r.enabled}
                    name={r.network_id}
                    denied={noUpdate}
                    errorId={`route-enable-error-${r.id}`}
                    onToggle={(enabled) => api.put("/api/routes/{routeId}", { path: { routeId: r.id }, body: { ...routeRequest(fromRoute(r)), enabled } })}
                    onDone={() => void routes.reload()}
                  />
                </Table.Td>
                <Table.Td>
                  <Group gap={6} wrap="nowrap">
                    <Text size="sm" fw={500}>
                      {r.network_id}
                    </Text>
                    {isExitNode(r) && (
                      <Badge size="xs" color="grape" variant="light">
                        exit node
                      </Badge>
                    )}
                  </Group>
                  {r.description && (
                    <Text size="xs" c="dimmed">
                      {r.description}
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>
                  <Text size="sm" ff="monospace">
                    {r.network_type === "Domain" ? r.domains.join(", ") : r.network}
                  </Text>
                  {r.network_type === "Domain" && r.keep_route && (
                    <Text size="xs" c="dimmed">
                      keeps routes
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>
                  <Text size="sm">{r.peer ? peerName.get(r.peer) ?? r.peer : `groups: ${names(r.peer_groups)}`}</Text>
                </Table.Td>
                <Table.Td>
                  <Text size="sm">{names(r.groups)}</Text>
                  {(r.access_control_groups ?? []).length > 0 && (
                    <Text size="xs" c="dimmed">
                      access control: {names(r.access_control_groups)}
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>{r.metric}</Table.Td>
                <Table.Td>{r.masquerade ? "yes" : "no"}</Table.Td>
                <RowActions name={r.network_id} noUpdate={noUpdate} noDelete={noDelete} onEdit={() => setEditing(r)} onDelete={() => setDeleting(r)} />
              </Table.Tr>
            ))}
          </ListTable>
        </>
      )}
      <RouteModal editing={editing} groupData={groupData} peerData={peerData} onClose={() => setEditing(null)} onDone={() => void routes.reload()} />
      <ConfirmModal
        opened={deleting !== null}
        title="Delete route"
        verb="Delete"
        errorId="route-delete-error"
        errorTitle="The server refused"
        onClose={() => setDeleting(null)}
        onConfirm={async () => {
          if (!deleting) return;
          await api.delete("/api/routes/{routeId}", { path: { routeId: deleting.id } });
          void routes.reload();
        }}
      >
        The route &quot;{deleting?.network_id}&quot; ({deleting?.network_type === "Domain" ? deleting.domains.join(", ") : deleting?.network}) will be deleted; peers
        stop routing through it within seconds.
      </ConfirmModal>
    </Stack>
  );
}

export default RoutesPage;
