/**
 * One peer: its facts, rename, login expiration, SSH, approval, its groups
 * (added and removed through the groups' own PUT), who can reach it and
 * whom it reaches, the routes and networks it serves as a routing peer,
 * and delete (confirmed). Everything refreshes every 2 s.
 *
 * "Whom it reaches" is the server's list (GET /api/peers/{id}/accessible-peers,
 * the peers of its network map); the rules beside each peer, and the
 * reverse list, are computed in the browser from the policies and groups
 * (access/evaluate.ts).
 */
import {
  Alert,
  Anchor,
  Badge,
  Button,
  Card,
  Code,
  Group,
  Select,
  SimpleGrid,
  Stack,
  Switch,
  Table,
  Text,
  TextInput,
  Title,
} from "@mantine/core";
import { useEffect, useMemo, useState, type FormEvent, type ReactNode } from "react";
import { Link as RouterLink, useNavigate, useParams } from "react-router";
import { ApiError, messageOf, type Peer, type Schemas } from "../api/client";

/** The peer as GET /api/peers/{id} answers (without the list's count). */
type OnePeer = Schemas["Peer"];
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { ConfirmModal } from "../common/ConfirmModal";
import { mapPeers, whomReaches, whoReaches, type Link } from "../access/evaluate";
import { LinkRules } from "../access/RuleText";
import { useAccessState, usersNote } from "../access/useAccess";
import { isBuiltIn, withPeer } from "../groups/edit";
import { notApplied, peerRequest, validatePeerName, type PeerRequest } from "../peers/detail";
import { lastSeenText } from "../peers/filter";
import { connectionsText, connectionTypeLabel } from "../peers/connections";
import { ServedRoutes } from "../routing/ServedRoutes";

function when(s: string): string {
  const t = Date.parse(s);
  if (Number.isNaN(t) || new Date(t).getUTCFullYear() < 2000) return "never";
  return new Date(t).toLocaleString();
}

function Fact({ label, children }: { label: string; children: ReactNode }) {
  return (
    <div>
      <Text size="xs" c="dimmed">
        {label}
      </Text>
      <Text size="sm" component="div">
        {children || "—"}
      </Text>
    </div>
  );
}

function ErrorText({ id, children }: { id: string; children: string }) {
  if (!children) return null;
  return (
    <Text size="sm" c="red" role="alert" id={id}>
      {children}
    </Text>
  );
}

/** Saves one change of the peer and reports what the server did not apply. */
function useSave(peer: OnePeer, onSaved: () => void) {
  const { api } = useApp();
  const [busy, setBusy] = useState("");
  const [errors, setErrors] = useState<Record<string, string>>({});
  const save = async (what: string, change: Partial<PeerRequest>): Promise<boolean> => {
    setBusy(what);
    setErrors((e) => ({ ...e, [what]: "" }));
    const req = peerRequest(peer, change);
    try {
      const got = await api.put("/api/peers/{peerId}", { path: { peerId: peer.id }, body: req });
      const ignored = notApplied(req, got);
      if (ignored.length) setErrors((e) => ({ ...e, [what]: `The server did not apply: ${ignored.join(", ")}.` }));
      onSaved();
      return ignored.length === 0;
    } catch (err) {
      setErrors((e) => ({ ...e, [what]: messageOf(err) }));
      return false;
    } finally {
      setBusy("");
    }
  };
  return { busy, errors, save };
}

function Settings({ peer, onSaved }: { peer: OnePeer; onSaved: () => void }) {
  const { busy, errors, save } = useSave(peer, onSaved);
  const [name, setName] = useState(peer.name);
  const [nameErr, setNameErr] = useState("");
  const [editing, setEditing] = useState(false);
  useEffect(() => {
    if (!editing) setName(peer.name);
  }, [peer.name, editing]);

  const rename = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validatePeerName(name);
    setNameErr(e);
    if (e) return;
    if (await save("name", { name: name.trim() })) setEditing(false);
  };
  return (
    <Card withBorder>
      <Stack>
        <Title order={3} size="h4">
          Settings
        </Title>
        <form onSubmit={(e) => void rename(e)} noValidate>
          <Group align="flex-start" gap="xs">
            <TextInput
              label="Name"
              description="Its DNS label follows the name"
              value={name}
              onChange={(e) => {
                setName(e.currentTarget.value);
                setEditing(true);
                setNameErr("");
              }}
              error={nameErr || errors.name || undefined}
              style={{ flex: 1 }}
              maxLength={255}
            />
            <Button type="submit" mt={44} loading={busy === "name"} disabled={!editing || name.trim() === peer.name}>
              Rename
            </Button>
          </Group>
        </form>
        <Stack gap={4}>
          <Switch
            label="Login expiration"
            description={
              peer.user_id
                ? "The peer must log in again when the account's login expiry passes"
                : "Only for peers added by a user login: a peer added with a setup key never expires"
            }
            checked={peer.login_expiration_enabled}
            disabled={busy === "expiry" || !peer.user_id}
            onChange={(e) => void save("expiry", { login_expiration_enabled: e.currentTarget.checked })}
            aria-describedby={errors.expiry ? "peer-expiry-error" : undefined}
          />
          <ErrorText id="peer-expiry-error">{errors.expiry ?? ""}</ErrorText>
        </Stack>
        <Stack gap={4}>
          <Switch
            label="SSH server"
            description="Allow SSH connections to the peer's built-in SSH server (the policies still decide who reaches port 22)"
            checked={peer.ssh_enabled}
            disabled={busy === "ssh"}
            onChange={(e) => void save("ssh", { ssh_enabled: e.currentTarget.checked })}
            aria-describedby={errors.ssh ? "peer-ssh-error" : undefined}
          />
          <ErrorText id="peer-ssh-error">{errors.ssh ?? ""}</ErrorText>
        </Stack>
        {peer.approval_required && (
          <Alert color="yellow" title="Pending approval" role="status">
            <Stack gap="xs">
              <Text size="sm">This peer joined while the account requires approval: it reaches nobody and nobody reaches it until an admin approves it.</Text>
              <Group>
                <Button color="yellow" loading={busy === "approve"} onClick={() => void save("approve", { approval_required: false })} aria-describedby={errors.approve ? "peer-approve-error" : undefined}>
                  Approve {peer.name}
                </Button>
              </Group>
              <ErrorText id="peer-approve-error">{errors.approve ?? ""}</ErrorText>
            </Stack>
          </Alert>
        )}
      </Stack>
    </Card>
  );
}

function Groups({ peer, onSaved }: { peer: OnePeer; onSaved: () => void }) {
  const { api } = useApp();
  const groups = usePoll((signal) => api.get("/api/groups", { signal }), LIVE_INTERVAL_MS, [], ["groups"]);
  const [adding, setAdding] = useState<string | null>(null);
  const [busy, setBusy] = useState("");
  const [err, setErr] = useState("");
  const mine = peer.groups.filter((g) => !isBuiltIn(g));
  const options = useMemo(
    () =>
      (groups.data ?? [])
        .filter((g) => !isBuiltIn(g) && !peer.groups.some((m) => m.id === g.id))
        .map((g) => ({ value: g.id, label: g.name }))
        .sort((a, b) => a.label.localeCompare(b.label)),
    [groups.data, peer.groups],
  );
  const change = async (groupId: string, member: boolean) => {
    setBusy(groupId);
    setErr("");
    try {
      // The group as the server has it now: PUT replaces its whole list.
      const g = await api.get("/api/groups/{groupId}", { path: { groupId } });
      await api.put("/api/groups/{groupId}", { path: { groupId }, body: withPeer(g, peer.id, member) });
      if (member) setAdding(null);
      onSaved();
      void groups.reload();
    } catch (e) {
      setErr(`${member ? "Adding to" : "Removing from"} the group failed: ${messageOf(e)}`);
    } finally {
      setBusy("");
    }
  };
  return (
    <Card withBorder>
      <Stack>
        <Title order={3} size="h4">
          Groups
        </Title>
        <Text size="sm" c="dimmed">
          Every peer is in the built-in group All.
        </Text>
        <Group gap="xs" aria-label="Groups of this peer" role="list">
          {mine.length === 0 && (
            <Text size="sm" c="dimmed" role="listitem">
              No other group.
            </Text>
          )}
          {mine.map((g) => (
            <Badge
              key={g.id}
              role="listitem"
              variant="light"
              size="lg"
              rightSection={
                <Button
                  variant="subtle"
                  size="compact-xs"
                  color="gray"
                  aria-label={`Remove ${peer.name} from ${g.name}`}
                  loading={busy === g.id}
                  onClick={() => void change(g.id, false)}
                >
                  ×
                </Button>
              }
            >
              {g.name}
            </Badge>
          ))}
        </Group>
        <Group align="flex-end" gap="xs">
          <Select
            label="Add to group"
            placeholder={options.length ? "Pick a group" : "No other group exists"}
            data={options}
            value={adding}
            onChange={setAdding}
            searchable
            clearable
            style={{ flex: 1 }}
            error={groups.error ? `groups could not be loaded: ${messageOf(groups.error)}` : undefined}
            aria-describedby={err ? "peer-groups-error" : undefined}
          />
          <Button disabled={!adding} loading={busy !== "" && busy === adding} onClick={() => adding && void change(adding, true)}>
            Add
          </Button>
        </Group>
        <ErrorText id="peer-groups-error">{err}</ErrorText>
      </Stack>
    </Card>
  );
}

function PeerName({ id, names }: { id: string; names: Map<string, Peer> }) {
  const p = names.get(id);
  return (
    <Anchor component={RouterLink} to={`/peers/${encodeURIComponent(id)}`} size="sm">
      {p?.name ?? id}
    </Anchor>
  );
}

function LinksTable({ label, rows, names, empty, extra }: { label: string; rows: { id: string; link?: Link; note?: string }[]; names: Map<string, Peer>; empty: string; extra?: ReactNode }) {
  const nameOf = (id: string) => names.get(id)?.name ?? id;
  return (
    <Table.ScrollContainer minWidth={560}>
      <Table aria-label={label} verticalSpacing="xs">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Peer</Table.Th>
            <Table.Th>Address</Table.Th>
            <Table.Th>Allowed by</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.length === 0 && (
            <Table.Tr>
              <Table.Td colSpan={3}>
                <Text size="sm" c="dimmed">
                  {empty}
                </Text>
              </Table.Td>
            </Table.Tr>
          )}
          {rows.map((r) => (
            <Table.Tr key={r.id}>
              <Table.Td>
                <PeerName id={r.id} names={names} />
                {names.get(r.id)?.connected && (
                  <Badge ml={6} size="xs" color="green" variant="light">
                    online
                  </Badge>
                )}
              </Table.Td>
              <Table.Td>
                <Text size="sm" ff="monospace">
                  {names.get(r.id)?.ip ?? ""}
                </Text>
              </Table.Td>
              <Table.Td>
                {r.link ? <LinkRules link={r.link} names={nameOf} /> : null}
                {r.note && (
                  <Text size="xs" c="dimmed">
                    {r.note}
                  </Text>
                )}
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
      {extra}
    </Table.ScrollContainer>
  );
}

/** How this peer's connections go, as its wiremesh agent reports them. */
function Connections({ peer }: { peer: OnePeer }) {
  const access = useAccessState();
  const names = useMemo(() => new Map((access.data?.peers ?? []).map((p) => [p.id, p])), [access.data]);
  const rows = useMemo(
    () => [...(peer.peer_connections ?? [])].sort((a, b) => (names.get(a.peer_id)?.name ?? a.peer_id).localeCompare(names.get(b.peer_id)?.name ?? b.peer_id)),
    [peer.peer_connections, names],
  );
  return (
    <Card withBorder>
      <Stack gap="xs">
        <Title order={4}>Connections</Title>
        {!peer.connections ? (
          <Text size="sm" c="dimmed">
            {peer.connected ? "This peer's agent does not report its connections (only wiremesh agents do)." : "The peer is offline."}
          </Text>
        ) : (
          <>
            <Text size="sm">{connectionsText(peer)}</Text>
            {rows.length > 0 && (
              <Table aria-label="Connections to other peers" verticalSpacing="xs">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Peer</Table.Th>
                    <Table.Th>Type</Table.Th>
                    <Table.Th>Latency</Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {rows.map((c) => (
                    <Table.Tr key={c.peer_id}>
                      <Table.Td>
                        <PeerName id={c.peer_id} names={names} />
                      </Table.Td>
                      <Table.Td>
                        <Badge variant="light" color={c.type === "p2p" ? "green" : c.type === "relayed" ? "blue" : "gray"}>
                          {connectionTypeLabel(c.type)}
                        </Badge>
                      </Table.Td>
                      <Table.Td>{c.latency_ms !== undefined ? `${c.latency_ms} ms` : "—"}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            )}
          </>
        )}
      </Stack>
    </Card>
  );
}

function Access({ peer }: { peer: OnePeer }) {
  const { api } = useApp();
  const reached = usePoll((signal) => api.get("/api/peers/{peerId}/accessible-peers", { signal, path: { peerId: peer.id } }), LIVE_INTERVAL_MS, [peer.id], ["peers", "groups", "policies"]);
  const access = useAccessState();
  const names = useMemo(() => new Map((access.data?.peers ?? []).map((p) => [p.id, p])), [access.data]);
  const ix = access.index;

  const whom = useMemo(() => {
    if (!ix || !reached.data) return [];
    const links = new Map(whomReaches(ix, peer.id).map((l) => [l.peer, l]));
    return reached.data
      .map((p) => {
        const link = links.get(p.id);
        return { id: p.id, link, note: link ? undefined : `In its network map because ${p.name} may connect to it; it opens no connection to ${p.name} itself.` };
      })
      .sort((a, b) => (names.get(a.id)?.name ?? a.id).localeCompare(names.get(b.id)?.name ?? b.id));
  }, [ix, reached.data, peer.id, names]);
  const who = useMemo(
    () => (ix ? whoReaches(ix, peer.id).map((l) => ({ id: l.peer, link: l })).sort((a, b) => (names.get(a.id)?.name ?? "").localeCompare(names.get(b.id)?.name ?? "")) : []),
    [ix, peer.id, names],
  );
  // Peers the browser expects in the map that the server did not list (or
  // the reverse) mean the computation and the server disagree: say so.
  const mismatch = useMemo(() => {
    if (!ix || !reached.data) return "";
    const server = new Set(reached.data.map((p) => p.id));
    const mine = mapPeers(ix, peer.id);
    const missing = mine.filter((m) => !m.conditional && !server.has(m.peer)).map((m) => names.get(m.peer)?.name ?? m.peer);
    return missing.length ? `The server's list leaves out ${missing.join(", ")}, which the policies seem to allow (their state may have changed since).` : "";
  }, [ix, reached.data, peer.id, names]);
  const excluded = ix?.excluded.get(peer.id);

  return (
    <Card withBorder>
      <Stack>
        <Title order={3} size="h4">
          Access
        </Title>
        {excluded && (
          <Alert color="yellow" role="status">
            This peer takes no part in the network now: {excluded}.
          </Alert>
        )}
        {(access.error ?? reached.error) !== null && (
          <Alert color="red" role="alert" title="Could not load the access rules">
            {messageOf(access.error ?? reached.error)}
          </Alert>
        )}
        {access.data?.usersError ? (
          <Text size="xs" c="dimmed">
            {usersNote(access.data.usersError)}
          </Text>
        ) : null}
        <Title order={4} size="h5">
          Whom it reaches ({reached.data?.length ?? "…"})
        </Title>
        <LinksTable label={`Peers ${peer.name} reaches`} rows={whom} names={names} empty={reached.loading ? "Loading…" : "No peer: no enabled policy pairs it with another peer."} />
        {mismatch && (
          <Text size="xs" c="orange">
            {mismatch}
          </Text>
        )}
        <Title order={4} size="h5">
          Who can reach it ({ix ? who.length : "…"})
        </Title>
        <LinksTable label={`Peers that reach ${peer.name}`} rows={who} names={names} empty={access.loading ? "Loading…" : "No peer may open a connection to it."} />
        <Text size="xs" c="dimmed">
          Computed from the policies and groups; a drop rule shown in red cuts that traffic out of what the others allow. Test one connection under{" "}
          <Anchor component={RouterLink} to={`/policies?test=${encodeURIComponent(peer.id)}`} size="xs" underline="always">
            Access policies › Test access
          </Anchor>
          .
        </Text>
      </Stack>
    </Card>
  );
}

function DeletePeer({ peer }: { peer: OnePeer }) {
  const { api } = useApp();
  const navigate = useNavigate();
  const [open, setOpen] = useState(false);
  return (
    <>
      <Button color="red" variant="light" onClick={() => setOpen(true)}>
        Delete peer
      </Button>
      <ConfirmModal
        opened={open}
        title="Delete peer"
        verb="Delete"
        errorId="peer-delete-error"
        onClose={() => setOpen(false)}
        onConfirm={async () => {
          await api.delete("/api/peers/{peerId}", { path: { peerId: peer.id } });
          void navigate("/peers");
        }}
      >
        &quot;{peer.name}&quot; ({peer.ip}) will be removed from the account and disconnected. It can join again only with a setup key or a user login.
      </ConfirmModal>
    </>
  );
}

export function PeerDetailPage() {
  const { id = "" } = useParams();
  const { api } = useApp();
  const peer = usePoll((signal) => api.get("/api/peers/{peerId}", { signal, path: { peerId: id } }), LIVE_INTERVAL_MS, [id], ["peers", "groups"]);
  const p = peer.data?.id === id ? peer.data : undefined;
  const gone = peer.error instanceof ApiError && peer.error.status === 404;

  return (
    <Stack gap="md">
      <Anchor component={RouterLink} to="/peers" size="sm">
        ← Peers
      </Anchor>
      {gone ? (
        <Alert color="gray" title="No such peer" role="alert">
          This peer does not exist (any more).
        </Alert>
      ) : peer.error !== null && !p ? (
        <Alert color="red" role="alert" title="Could not load the peer">
          {messageOf(peer.error)}
        </Alert>
      ) : !p ? (
        <Text c="dimmed">Loading…</Text>
      ) : (
        <>
          <Group justify="space-between" align="center">
            <Group gap="sm" align="center">
              <Title order={2}>{p.name}</Title>
              {p.connected ? (
                <Badge color="green" variant="light">
                  online
                </Badge>
              ) : (
                <Badge color="gray" variant="light">
                  offline · {lastSeenText(p)}
                </Badge>
              )}
              {p.approval_required && (
                <Badge color="yellow" variant="light">
                  pending approval
                </Badge>
              )}
              {p.login_expired && (
                <Badge color="red" variant="light">
                  login expired
                </Badge>
              )}
            </Group>
            <DeletePeer peer={p} />
          </Group>
          {peer.error !== null && (
            <Alert color="red" role="alert">
              Refreshing failed: {messageOf(peer.error)} (showing the last state received)
            </Alert>
          )}
          <Card withBorder>
            <SimpleGrid cols={{ base: 1, xs: 2, md: 4 }} spacing="sm">
              <Fact label="Address">
                <Code>{p.ip}</Code>
              </Fact>
              {p.ipv6 && (
                <Fact label="IPv6 address">
                  <Code>{p.ipv6}</Code>
                </Fact>
              )}
              <Fact label="DNS name">{p.dns_label}</Fact>
              <Fact label="Hostname">{p.hostname}</Fact>
              <Fact label="Connected from">{p.connection_ip}</Fact>
              <Fact label="OS">{p.os}</Fact>
              <Fact label="Kernel">{p.kernel_version}</Fact>
              <Fact label="Agent version">{p.version}</Fact>
              <Fact label="Last seen">{p.connected ? "now" : when(p.last_seen)}</Fact>
              <Fact label="Added">{when(p.created_at)}</Fact>
              <Fact label="Last login">{when(p.last_login)}</Fact>
              <Fact label="Added by">{p.user_id ? p.user_id : "a setup key"}</Fact>
              <Fact label="Serial number">{p.serial_number}</Fact>
              {p.ephemeral && <Fact label="Ephemeral">removed after 10 minutes offline</Fact>}
            </SimpleGrid>
          </Card>
          <SimpleGrid cols={{ base: 1, lg: 2 }} spacing="md">
            <Settings peer={p} onSaved={() => void peer.reload()} />
            <Groups peer={p} onSaved={() => void peer.reload()} />
          </SimpleGrid>
          <Connections peer={p} />
          <Access peer={p} />
          <ServedRoutes peer={p} />
        </>
      )}
    </Stack>
  );
}

export default PeerDetailPage;
