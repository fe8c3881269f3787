/**
 * A peer's "routes it serves" card: the classic routes naming the peer or
 * a group it is in, and the network routers naming it (routing/form.ts
 * servedBy). A role that may not read routes or networks sees that part
 * left out, with the reason.
 */
import { Anchor, Badge, Card, Stack, Table, Text, Title } from "@mantine/core";
import { useMemo } from "react";
import { Link as RouterLink } from "react-router";
import { messageOf, type Schemas } from "../api/client";
import { usePoll } from "../api/poll";
import { useApp } from "../app";
import { deniedReason } from "../common/permissions";
import { useCurrentUser } from "../common/useCurrentUser";
import { servedBy, type Network, type NetworkRouter, type Route } from "./form";

export function ServedRoutes({ peer }: { peer: Schemas["Peer"] }) {
  const { api } = useApp();
  const { me } = useCurrentUser();
  const noRoutes = me ? deniedReason(me, "routes", "read") : "";
  const noNetworks = me ? deniedReason(me, "networks", "read") : "";
  const data = usePoll(
    async (signal) => {
      const [routes, networks, routers] = await Promise.all([
        noRoutes ? Promise.resolve([] as Route[]) : api.get("/api/routes", { signal }),
        noNetworks ? Promise.resolve([] as Network[]) : api.get("/api/networks", { signal }),
        noNetworks ? Promise.resolve([] as NetworkRouter[]) : api.get("/api/networks/routers", { signal }),
      ]);
      return { routes, networks, routers };
    },
    5000,
    [noRoutes, noNetworks],
  );
  const served = useMemo(
    () => (data.data ? servedBy(peer.id, peer.groups, data.data.routes, data.data.networks, data.data.routers) : []),
    [data.data, peer.id, peer.groups],
  );
  return (
    <Card withBorder>
      <Stack gap="xs">
        <Title order={3} size="h4">
          Routes it serves
        </Title>
        {data.error !== null && (
          <Text size="sm" c="red" role="alert">
            Could not load the routes: {messageOf(data.error)}
          </Text>
        )}
        {[noRoutes, noNetworks].filter(Boolean).map((r) => (
          <Text size="xs" c="dimmed" key={r}>
            {r}; those are left out.
          </Text>
        ))}
        {served.length === 0 && !data.loading ? (
          <Text size="sm" c="dimmed">
            This peer routes no network: it is not a routing peer of any route or network, by itself or through its groups.
          </Text>
        ) : (
          <Table.ScrollContainer minWidth={600}>
            <Table aria-label="Routes this peer serves" verticalSpacing="xs">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Route or network</Table.Th>
                  <Table.Th>Routes</Table.Th>
                  <Table.Th>How</Table.Th>
                  <Table.Th>Enabled</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {served.map((s) => (
                  <Table.Tr key={`${s.kind}-${s.id}-${s.name}-${s.how}`}>
                    <Table.Td>
                      {s.kind === "router" && s.id ? (
                        <Anchor component={RouterLink} to={`/networks/${encodeURIComponent(s.id)}`} size="sm">
                          network {s.name}
                        </Anchor>
                      ) : s.kind === "router" ? (
                        <Text size="sm">network {s.name}</Text>
                      ) : (
                        <Anchor component={RouterLink} to="/routes" size="sm">
                          route {s.name}
                        </Anchor>
                      )}
                      {s.exitNode && (
                        <Badge size="xs" color="grape" variant="light" ml={6}>
                          exit node
                        </Badge>
                      )}
                    </Table.Td>
                    <Table.Td>
                      <Text size="sm" ff="monospace">
                        {s.what}
                      </Text>
                    </Table.Td>
                    <Table.Td>{s.how}</Table.Td>
                    <Table.Td>{s.enabled ? "yes" : "no"}</Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
      </Stack>
    </Card>
  );
}
