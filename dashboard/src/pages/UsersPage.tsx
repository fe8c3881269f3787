/**
 * Users: people and service users of the account, live. Add people
 * (generated password or invite link), pending invite links, role and
 * auto-group changes, block/unblock, approve/reject users waiting for
 * approval, delete, and each user's personal access tokens. Controls the
 * signed-in user may not use are disabled with the reason in a tooltip;
 * the server's refusal shows beside the control otherwise.
 */
import { Alert, Badge, Button, Group, Stack, Table, Tabs, Text, TextInput, Title, VisuallyHidden } from "@mantine/core";
import { useMemo, useState } from "react";
import { useLocation, useNavigate } from "react-router";
import { ApiError, messageOf, type Schemas, type User } from "../api/client";
import { LIVE_INTERVAL_MS, usePoll } from "../api/poll";
import { useApp } from "../app";
import { Allowed } from "../common/Allowed";
import { when } from "../common/format";
import { deniedReason } from "../common/permissions";
import { useCurrentUser } from "../common/useCurrentUser";
import { TokensModal } from "../users/TokensModal";
import { AddServiceUserModal, AddUserModal, ConfirmUserModal, EditUserModal, type GroupOption, type UserAction } from "../users/UserModals";
import { inviteLink, roleLabel, statusColor, statusOf, tokenAccess } from "../users/users";

type Invite = Schemas["UserInvite"];

function UserRows({
  list,
  me,
  groupName,
  onAction,
  onEdit,
  onTokens,
  service,
}: {
  list: User[];
  me: User | undefined;
  groupName: Map<string, string>;
  onAction: (a: UserAction, u: User) => void;
  onEdit: (u: User) => void;
  onTokens: (u: User) => void;
  service: boolean;
}) {
  const noUpdate = deniedReason(me, "users", "update");
  const noDelete = deniedReason(me, "users", "delete");
  return (
    <>
      {list.map((u) => {
        const st = statusOf(u);
        const self = u.id === me?.id;
        const owner = u.role === "owner";
        const pending = st === "pending approval";
        const blockWhy = noUpdate || (self ? "You cannot block yourself" : owner ? "The owner cannot be blocked" : pending ? "Approve or reject this user first" : "");
        const editWhy = noUpdate || (pending ? "Approve or reject this user first" : "");
        const deleteWhy = noDelete || (self ? "You cannot delete yourself" : owner ? "The owner cannot be deleted" : "");
        const who = u.name || u.email;
        return (
          <Table.Tr key={u.id} data-user-email={u.email}>
            <Table.Td>
              <Text size="sm" fw={500}>
                {u.name || "—"}
                {self && (
                  <Badge ml={6} size="xs" variant="light">
                    you
                  </Badge>
                )}
              </Text>
              {!service && (
                <Text size="xs" c="dimmed">
                  {u.email}
                </Text>
              )}
            </Table.Td>
            <Table.Td>{roleLabel[u.role] ?? u.role}</Table.Td>
            <Table.Td>
              <Badge color={statusColor[st]} variant="light">
                {st}
              </Badge>
            </Table.Td>
            {!service && <Table.Td>{when(u.last_login)}</Table.Td>}
            <Table.Td>{u.auto_groups.map((g) => groupName.get(g) ?? g).join(", ") || "—"}</Table.Td>
            <Table.Td>
              <Group gap={4} wrap="nowrap" justify="flex-end">
                {pending && (
                  <>
                    <Allowed why={noUpdate}>
                      <Button size="xs" color="green" variant="light" onClick={() => onAction("approve", u)} aria-label={`Approve ${who}`}>
                        Approve
                      </Button>
                    </Allowed>
                    <Allowed why={noDelete}>
                      <Button size="xs" color="red" variant="light" onClick={() => onAction("reject", u)} aria-label={`Reject ${who}`}>
                        Reject
                      </Button>
                    </Allowed>
                  </>
                )}
                <Allowed why={editWhy}>
                  <Button size="xs" variant="light" onClick={() => onEdit(u)} aria-label={`Edit ${who}`}>
                    Edit
                  </Button>
                </Allowed>
                <Allowed why={tokenAccess(me, u)}>
                  <Button size="xs" variant="light" onClick={() => onTokens(u)} aria-label={`Tokens of ${who}`}>
                    Tokens
                  </Button>
                </Allowed>
                {!pending && (
                  <Allowed why={blockWhy}>
                    <Button
                      size="xs"
                      variant="light"
                      color={u.is_blocked ? "indigo" : "orange"}
                      onClick={() => onAction(u.is_blocked ? "unblock" : "block", u)}
                      aria-label={`${u.is_blocked ? "Unblock" : "Block"} ${who}`}
                    >
                      {u.is_blocked ? "Unblock" : "Block"}
                    </Button>
                  </Allowed>
                )}
                <Allowed why={deleteWhy}>
                  <Button size="xs" variant="light" color="red" onClick={() => onAction("delete", u)} aria-label={`Delete ${who}`}>
                    Delete
                  </Button>
                </Allowed>
              </Group>
            </Table.Td>
          </Table.Tr>
        );
      })}
    </>
  );
}

function InvitesTable({ me, groupName }: { me: User | undefined; groupName: Map<string, string> }) {
  const { api } = useApp();
  const invites = usePoll((signal) => api.get("/api/users/invites", { signal }), 5000, [], ["users"]);
  const [err, setErr] = useState<{ id: string; msg: string } | null>(null);
  const [confirm, setConfirm] = useState<string | null>(null);
  const [fresh, setFresh] = useState<{ id: string; token: string } | null>(null);
  const noDelete = deniedReason(me, "users", "delete");
  const noCreate = deniedReason(me, "users", "create");
  const act = async (inv: Invite, kind: "delete" | "regenerate") => {
    setErr(null);
    try {
      if (kind === "delete") {
        await api.delete("/api/users/invites/{inviteId}", { path: { inviteId: inv.id } });
        setConfirm(null);
      } else {
        const r = await api.post("/api/users/invites/{inviteId}/regenerate", { path: { inviteId: inv.id }, body: {} });
        setFresh({ id: inv.id, token: r.invite_token });
      }
      void invites.reload();
    } catch (e) {
      setErr({ id: inv.id, msg: messageOf(e) });
    }
  };
  if (invites.error instanceof ApiError && invites.error.status === 412) {
    return (
      <Text size="sm" c="dimmed">
        Invite links: {invites.error.message}
      </Text>
    );
  }
  const list = invites.data ?? [];
  return (
    <Stack gap="xs">
      <Title order={3} size="h5">
        Pending invite links
      </Title>
      {invites.error !== null && (
        <Alert color="red" role="alert">
          {messageOf(invites.error)}
        </Alert>
      )}
      {list.length === 0 ? (
        <Text size="sm" c="dimmed">
          No pending invites.
        </Text>
      ) : (
        <Table aria-label="Pending invite links" verticalSpacing="xs">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>E-mail</Table.Th>
              <Table.Th>Role</Table.Th>
              <Table.Th>Auto groups</Table.Th>
              <Table.Th>Expires</Table.Th>
              <Table.Th>
                <VisuallyHidden>Actions</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {list.map((inv) => (
              <Table.Tr key={inv.id}>
                <Table.Td>
                  {inv.email}
                  {fresh?.id === inv.id && (
                    <TextInput mt={4} size="xs" readOnly label="New link (shown once)" value={inviteLink(window.location.origin, fresh.token)} onFocus={(e) => e.currentTarget.select()} />
                  )}
                </Table.Td>
                <Table.Td>{roleLabel[inv.role] ?? inv.role}</Table.Td>
                <Table.Td>{inv.auto_groups.map((g) => groupName.get(g) ?? g).join(", ") || "—"}</Table.Td>
                <Table.Td>
                  <Text size="sm" c={inv.expired ? "red" : undefined}>
                    {when(inv.expires_at)}
                    {inv.expired ? " (expired)" : ""}
                  </Text>
                </Table.Td>
                <Table.Td>
                  <Group gap={4} justify="flex-end" wrap="nowrap">
                    <Allowed why={noCreate}>
                      <Button size="xs" variant="light" onClick={() => void act(inv, "regenerate")} aria-label={`New link for ${inv.email}`}>
                        New link
                      </Button>
                    </Allowed>
                    {confirm === inv.id ? (
                      <Button size="xs" color="red" onClick={() => void act(inv, "delete")} aria-label={`Confirm deleting the invite of ${inv.email}`}>
                        Confirm delete
                      </Button>
                    ) : (
                      <Allowed why={noDelete}>
                        <Button size="xs" variant="light" color="red" onClick={() => setConfirm(inv.id)} aria-label={`Delete the invite of ${inv.email}`}>
                          Delete
                        </Button>
                      </Allowed>
                    )}
                  </Group>
                  {err?.id === inv.id && (
                    <Text size="xs" c="red" role="alert">
                      {err.msg}
                    </Text>
                  )}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Stack>
  );
}

export function UsersPage() {
  const { api } = useApp();
  const { me } = useCurrentUser();
  const users = usePoll((signal) => api.get("/api/users", { signal }), LIVE_INTERVAL_MS, [], ["users"]);
  const groups = usePoll((signal) => api.get("/api/groups", { signal }), 10_000, [], ["groups"]);
  // The service users tab has its own address (/service-users) for the navigation.
  const loc = useLocation();
  const navigate = useNavigate();
  const tab = loc.pathname.startsWith("/service-users") ? "service" : "people";
  const setTab = (t: string | null) => void navigate(t === "service" ? "/service-users" : "/users");
  const [adding, setAdding] = useState(false);
  const [addingService, setAddingService] = useState(false);
  const [editing, setEditing] = useState<User | null>(null);
  const [tokensOf, setTokensOf] = useState<User | null>(null);
  const [pending, setPending] = useState<{ action: UserAction; user: User } | null>(null);
  const [search, setSearch] = useState("");

  const groupName = useMemo(() => new Map((groups.data ?? []).map((g) => [g.id, g.name])), [groups.data]);
  const groupOptions: GroupOption[] = useMemo(() => (groups.data ?? []).filter((g) => g.name !== "All").map((g) => ({ value: g.id, label: g.name })), [groups.data]);
  const q = search.trim().toLowerCase();
  const { people, service } = useMemo(() => {
    const all = [...(users.data ?? [])]
      .filter((u) => !q || u.name.toLowerCase().includes(q) || u.email.toLowerCase().includes(q) || u.role.includes(q))
      .sort((a, b) => Number(b.pending_approval ?? false) - Number(a.pending_approval ?? false) || (a.name || a.email).localeCompare(b.name || b.email));
    return { people: all.filter((u) => !u.is_service_user), service: all.filter((u) => u.is_service_user) };
  }, [users.data, q]);
  const waiting = people.filter((u) => u.pending_approval).length;
  const noCreate = deniedReason(me, "users", "create");
  const rowProps = { me, groupName, onAction: (action: UserAction, user: User) => setPending({ action, user }), onEdit: setEditing, onTokens: setTokensOf };

  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Title order={2}>Users</Title>
        <Group gap="xs">
          {me && (
            <Button variant="default" onClick={() => setTokensOf(me)}>
              My tokens
            </Button>
          )}
          {tab === "service" ? (
            <Allowed why={noCreate}>
              <Button onClick={() => setAddingService(true)}>Create service user</Button>
            </Allowed>
          ) : (
            <Allowed why={noCreate}>
              <Button onClick={() => setAdding(true)}>Add user</Button>
            </Allowed>
          )}
        </Group>
      </Group>
      {users.error !== null && (
        <Alert color="red" role="alert" title="Could not load the users">
          {messageOf(users.error)}
        </Alert>
      )}
      {waiting > 0 && (
        <Alert color="orange" role="status">
          {waiting} user{waiting > 1 ? "s wait" : " waits"} for approval.
        </Alert>
      )}
      <TextInput label="Search users" placeholder="Name, e-mail or role" value={search} onChange={(e) => setSearch(e.currentTarget.value)} maw={360} />
      <Tabs value={tab} onChange={setTab}>
        <Tabs.List>
          <Tabs.Tab value="people">People ({people.length})</Tabs.Tab>
          <Tabs.Tab value="service">Service users ({service.length})</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="people" pt="sm">
          <Stack>
            <Table.ScrollContainer minWidth={900}>
              <Table striped highlightOnHover aria-label="Users" verticalSpacing="xs">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Name</Table.Th>
                    <Table.Th>Role</Table.Th>
                    <Table.Th>Status</Table.Th>
                    <Table.Th>Last login</Table.Th>
                    <Table.Th>Auto groups</Table.Th>
                    <Table.Th>
                      <VisuallyHidden>Actions</VisuallyHidden>
                    </Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  <UserRows list={people} service={false} {...rowProps} />
                </Table.Tbody>
              </Table>
            </Table.ScrollContainer>
            {!deniedReason(me, "users", "create") && <InvitesTable me={me} groupName={groupName} />}
          </Stack>
        </Tabs.Panel>
        <Tabs.Panel value="service" pt="sm">
          <Text size="sm" c="dimmed" mb="xs">
            Service users act for scripts and automation through their personal access tokens; they cannot log in.
          </Text>
          <Table.ScrollContainer minWidth={800}>
            <Table striped highlightOnHover aria-label="Service users" verticalSpacing="xs">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Name</Table.Th>
                  <Table.Th>Role</Table.Th>
                  <Table.Th>Status</Table.Th>
                  <Table.Th>Auto groups</Table.Th>
                  <Table.Th>
                    <VisuallyHidden>Actions</VisuallyHidden>
                  </Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {service.length === 0 && !users.loading && (
                  <Table.Tr>
                    <Table.Td colSpan={5}>
                      <Text size="sm" c="dimmed">
                        No service users yet.
                      </Text>
                    </Table.Td>
                  </Table.Tr>
                )}
                <UserRows list={service} service {...rowProps} />
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        </Tabs.Panel>
      </Tabs>
      <AddUserModal opened={adding} onClose={() => setAdding(false)} onDone={() => void users.reload()} groups={groupOptions} />
      <AddServiceUserModal
        opened={addingService}
        onClose={() => setAddingService(false)}
        onDone={(u) => {
          void users.reload();
          setTokensOf(u);
        }}
        groups={groupOptions}
      />
      <EditUserModal user={editing} onClose={() => setEditing(null)} onDone={() => void users.reload()} groups={groupOptions} />
      <ConfirmUserModal pending={pending} onClose={() => setPending(null)} onDone={() => void users.reload()} />
      <TokensModal user={tokensOf} onClose={() => setTokensOf(null)} />
    </Stack>
  );
}

export default UsersPage;
