/**
 * A user's personal access tokens: list, create with an expiry (the token
 * is shown once, with a copy button) and delete (confirmed).
 */
import { Alert, Button, Group, Modal, NumberInput, Stack, Table, Text, TextInput, VisuallyHidden } from "@mantine/core";
import { useState, type FormEvent } from "react";
import { messageOf, type Schemas, type User } from "../api/client";
import { fieldOf } from "../api/fielderror";
import { usePoll } from "../api/poll";
import { useApp } from "../app";
import { when } from "../common/format";
import { ShownOnce } from "./Copy";
import { MAX_TOKEN_DAYS, validateToken } from "./users";

type Token = Schemas["PersonalAccessToken"];

function TokenList({ user, onDelete, tokens, loading, error }: { user: User; onDelete: (t: Token) => void; tokens: Token[]; loading: boolean; error: unknown }) {
  return (
    <>
      {error !== null && (
        <Alert color="red" role="alert" title="Could not load the tokens">
          {messageOf(error)}
        </Alert>
      )}
      <Table aria-label={`Tokens of ${user.name || user.email}`} verticalSpacing="xs">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Name</Table.Th>
            <Table.Th>Expires</Table.Th>
            <Table.Th>Last used</Table.Th>
            <Table.Th>Created</Table.Th>
            <Table.Th>
              <VisuallyHidden>Actions</VisuallyHidden>
            </Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {tokens.length === 0 && !loading && (
            <Table.Tr>
              <Table.Td colSpan={5}>
                <Text size="sm" c="dimmed">
                  No tokens.
                </Text>
              </Table.Td>
            </Table.Tr>
          )}
          {tokens.map((t) => {
            const expired = Date.parse(t.expiration_date) < Date.now();
            return (
              <Table.Tr key={t.id}>
                <Table.Td>{t.name}</Table.Td>
                <Table.Td>
                  <Text size="sm" c={expired ? "red" : undefined}>
                    {when(t.expiration_date)}
                    {expired ? " (expired)" : ""}
                  </Text>
                </Table.Td>
                <Table.Td>{when(t.last_used)}</Table.Td>
                <Table.Td>{when(t.created_at)}</Table.Td>
                <Table.Td>
                  <Button size="xs" variant="light" color="red" onClick={() => onDelete(t)} aria-label={`Delete token ${t.name}`}>
                    Delete
                  </Button>
                </Table.Td>
              </Table.Tr>
            );
          })}
        </Table.Tbody>
      </Table>
    </>
  );
}

export function TokensModal({ user, onClose }: { user: User | null; onClose: () => void }) {
  const { api } = useApp();
  const userId = user?.id ?? "";
  const tokens = usePoll(
    (signal) => (userId ? api.get("/api/users/{userId}/tokens", { path: { userId }, signal }) : Promise.resolve([] as Token[])),
    10_000,
    [userId],
  );
  const [name, setName] = useState("");
  const [days, setDays] = useState<number>(30);
  const [errors, setErrors] = useState<{ name?: string; expiresDays?: string; form?: string }>({});
  const [busy, setBusy] = useState(false);
  const [plain, setPlain] = useState("");
  const [deleting, setDeleting] = useState<Token | null>(null);
  const [delErr, setDelErr] = useState("");
  const [delBusy, setDelBusy] = useState(false);

  const close = () => {
    setName("");
    setDays(30);
    setErrors({});
    setPlain("");
    setDeleting(null);
    setDelErr("");
    onClose();
  };
  const create = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validateToken({ name, expiresDays: days });
    setErrors(e);
    if (Object.keys(e).length || !user) return;
    setBusy(true);
    try {
      const out = await api.post("/api/users/{userId}/tokens", { path: { userId: user.id }, body: { name: name.trim(), expires_in: days } });
      setPlain(out.plain_token);
      setName("");
      void tokens.reload();
    } catch (err) {
      const field = fieldOf(err, { name: "name", expires_in: "expiresDays" } as const) ?? "form";
      setErrors({ [field]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };
  const remove = async () => {
    if (!deleting || !user) return;
    setDelBusy(true);
    setDelErr("");
    try {
      await api.delete("/api/users/{userId}/tokens/{tokenId}", { path: { userId: user.id, tokenId: deleting.id } });
      setDeleting(null);
      void tokens.reload();
    } catch (e) {
      setDelErr(messageOf(e));
    } finally {
      setDelBusy(false);
    }
  };
  const list = [...(tokens.data ?? [])].sort((a, b) => a.name.localeCompare(b.name));
  return (
    <Modal opened={user !== null} onClose={close} title={`Personal access tokens of ${user?.name || user?.email || ""}`} size="xl">
      <Stack>
        <Text size="sm" c="dimmed">
          A token calls the REST API as this user: <code>Authorization: Token nbp_…</code>. It is stored hashed and shown only once.
        </Text>
        {user && <TokenList user={user} tokens={list} loading={tokens.loading} error={tokens.error} onDelete={(t) => (setDeleting(t), setDelErr(""))} />}
        {deleting && (
          <Alert color="red" title={`Delete token "${deleting.name}"?`} role="alertdialog">
            <Stack gap="xs">
              <Text size="sm">Scripts using it stop working at once.</Text>
              <Group>
                <Button size="xs" variant="default" onClick={() => setDeleting(null)}>
                  Cancel
                </Button>
                <Button size="xs" color="red" loading={delBusy} onClick={() => void remove()}>
                  Delete token
                </Button>
              </Group>
              {delErr && (
                <Text size="sm" c="red" role="alert">
                  {delErr}
                </Text>
              )}
            </Stack>
          </Alert>
        )}
        {plain && (
          <Alert color="green" title="Token created: copy it now, it is not shown again">
            <ShownOnce value={plain} label="Copy the token" testId="new-token" />
          </Alert>
        )}
        <form onSubmit={(e) => void create(e)} noValidate>
          <Group align="flex-start" grow>
            <TextInput label="New token name" required value={name} onChange={(e) => (setName(e.currentTarget.value), setErrors({}))} error={errors.name} />
            <NumberInput
              label="Expires in (days)"
              min={1}
              max={MAX_TOKEN_DAYS}
              allowDecimal={false}
              value={days}
              onChange={(v) => (setDays(typeof v === "number" ? v : Number.NaN), setErrors({}))}
              error={errors.expiresDays}
            />
          </Group>
          <Group justify="flex-end" mt="sm">
            <Button type="submit" loading={busy}>
              Create token
            </Button>
          </Group>
          {errors.form && (
            <Alert color="red" role="alert" mt="sm" title="The server refused">
              {errors.form}
            </Alert>
          )}
        </form>
      </Stack>
    </Modal>
  );
}
