/**
 * The Users page's dialogs: add a person (the server answers with a
 * generated password, shown once), create an invite link, create a
 * service user, edit a user's role and auto groups, and the confirmations
 * of block, delete, approve and reject. Each shows the server's refusal
 * beside the control it names.
 */
import { Alert, Button, Group, Modal, MultiSelect, NumberInput, SegmentedControl, Select, Stack, Text, TextInput } from "@mantine/core";
import { useRef, useState, type FormEvent } from "react";
import { messageOf, type User } from "../api/client";
import { fieldOf } from "../api/fielderror";
import { useApp } from "../app";
import { ConfirmModal } from "../common/ConfirmModal";
import { ShownOnce } from "./Copy";
import {
  assignableRoles,
  inviteLink,
  MAX_INVITE_DAYS,
  roleHelp,
  roleLabel,
  validatePerson,
  validateServiceUser,
  type PersonErrors,
  type PersonForm,
} from "./users";

export type GroupOption = { value: string; label: string };

function FormError({ msg }: { msg?: string | undefined }) {
  if (!msg) return null;
  return (
    <Alert color="red" role="alert" title="The server refused">
      {msg}
    </Alert>
  );
}

function RoleSelect({ value, onChange, error }: { value: string; onChange: (v: string) => void; error?: string | undefined }) {
  return (
    <Select
      label="Role"
      required
      data={assignableRoles()}
      value={value}
      onChange={(v) => onChange(v ?? "")}
      allowDeselect={false}
      description={roleHelp[value] ?? ""}
      error={error}
    />
  );
}

const personFields = { email: "email", "e-mail": "email", name: "name", role: "role", auto_groups: "autoGroups", expires_in: "expiresDays", group: "autoGroups" } as const;

/** Add a person: directly (a generated password) or by an invite link. */
export function AddUserModal({ opened, onClose, onDone, groups }: { opened: boolean; onClose: () => void; onDone: () => void; groups: GroupOption[] }) {
  const { api } = useApp();
  const blank: PersonForm = { email: "", name: "", role: "user", autoGroups: [] };
  const [mode, setMode] = useState<"password" | "link">("link");
  const [f, setF] = useState<PersonForm>(blank);
  const [days, setDays] = useState<number>(7);
  const [errors, setErrors] = useState<PersonErrors & { form?: string }>({});
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState<{ kind: "password"; user: User } | { kind: "link"; token: string; expires: string } | null>(null);
  const update = <K extends keyof PersonForm>(k: K, v: PersonForm[K]) => {
    setF((o) => ({ ...o, [k]: v }));
    setErrors((o) => ({ ...o, [k]: undefined, form: undefined }));
  };
  const close = () => {
    setF(blank);
    setErrors({});
    setDone(null);
    onClose();
  };
  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    const e: PersonErrors = validatePerson(f, mode);
    if (mode === "link" && (!Number.isInteger(days) || days < 1 || days > MAX_INVITE_DAYS)) e.expiresDays = `1 to ${MAX_INVITE_DAYS} days`;
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      const base = { email: f.email.trim(), name: f.name.trim(), role: f.role, auto_groups: f.autoGroups };
      if (mode === "password") {
        const user = await api.post("/api/users", { body: { ...base, is_service_user: false } });
        setDone({ kind: "password", user });
      } else {
        const inv = await api.post("/api/users/invites", { body: { ...base, expires_in: days * 86400 } });
        setDone({ kind: "link", token: inv.invite_token ?? "", expires: inv.expires_at });
      }
      onDone();
    } catch (err) {
      const field = fieldOf(err, personFields) ?? "form";
      setErrors({ [field]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal opened={opened} onClose={close} title={done ? "User added" : "Add a user"} size="lg">
      {done?.kind === "password" && (
        <Stack>
          <Text size="sm">
            {done.user.email} can log in now with this password (shown only once: copy it and pass it on safely). They can change it
            after logging in.
          </Text>
          {done.user.password ? (
            <ShownOnce value={done.user.password} label="Copy the password" testId="new-user-password" />
          ) : (
            <Alert color="yellow">The server returned no password: the user logs in through the identity provider.</Alert>
          )}
          <Group justify="flex-end">
            <Button onClick={close}>Done</Button>
          </Group>
        </Stack>
      )}
      {done?.kind === "link" && (
        <Stack>
          <Text size="sm">
            Send this link to the invitee: it lets them choose a password and log in. It works once, until{" "}
            {new Date(done.expires).toLocaleString()}, and is shown only now.
          </Text>
          <ShownOnce value={inviteLink(window.location.origin, done.token)} label="Copy the invite link" testId="invite-link" />
          <Group justify="flex-end">
            <Button onClick={close}>Done</Button>
          </Group>
        </Stack>
      )}
      {!done && (
        <form onSubmit={(e) => void submit(e)} noValidate>
          <Stack>
            <Stack gap={4}>
              <Text size="sm" fw={500} id="add-user-how">
                How
              </Text>
              <SegmentedControl
                aria-labelledby="add-user-how"
                value={mode}
                onChange={(v) => setMode(v as "password" | "link")}
                data={[
                  { value: "link", label: "Invite link (they choose a password)" },
                  { value: "password", label: "Create now (generated password)" },
                ]}
              />
            </Stack>
            <TextInput label="E-mail" required type="email" value={f.email} onChange={(e) => update("email", e.currentTarget.value)} error={errors.email} data-autofocus />
            <TextInput label="Name" required={mode === "link"} description={mode === "link" ? "" : "Defaults to the e-mail address"} value={f.name} onChange={(e) => update("name", e.currentTarget.value)} error={errors.name} />
            <RoleSelect value={f.role} onChange={(v) => update("role", v)} error={errors.role} />
            <MultiSelect
              label="Auto groups"
              description="Peers this user adds join these groups"
              data={groups}
              value={f.autoGroups}
              onChange={(v) => update("autoGroups", v)}
              searchable
              error={errors.autoGroups}
            />
            {mode === "link" && (
              <NumberInput
                label="Link valid for (days)"
                min={1}
                max={MAX_INVITE_DAYS}
                allowDecimal={false}
                value={days}
                onChange={(v) => {
                  setDays(typeof v === "number" ? v : Number.NaN);
                  setErrors((o) => ({ ...o, expiresDays: undefined }));
                }}
                error={errors.expiresDays}
              />
            )}
            <Group justify="flex-end">
              <Button variant="default" onClick={close}>
                Cancel
              </Button>
              <Button type="submit" loading={busy}>
                {mode === "link" ? "Create invite link" : "Create user"}
              </Button>
            </Group>
            <FormError msg={errors.form} />
          </Stack>
        </form>
      )}
    </Modal>
  );
}

/** Create a service user: a name, a role, auto groups; it holds tokens for automation. */
export function AddServiceUserModal({ opened, onClose, onDone, groups }: { opened: boolean; onClose: () => void; onDone: (u: User) => void; groups: GroupOption[] }) {
  const { api } = useApp();
  const [name, setName] = useState("");
  const [role, setRole] = useState("user");
  const [autoGroups, setAutoGroups] = useState<string[]>([]);
  const [errors, setErrors] = useState<{ name?: string; role?: string; autoGroups?: string; form?: string }>({});
  const [busy, setBusy] = useState(false);
  const close = () => {
    setName("");
    setRole("user");
    setAutoGroups([]);
    setErrors({});
    onClose();
  };
  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validateServiceUser({ name, role, autoGroups });
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      const u = await api.post("/api/users", { body: { name: name.trim(), role, auto_groups: autoGroups, is_service_user: true } });
      close();
      onDone(u);
    } catch (err) {
      const field = fieldOf(err, { name: "name", role: "role", auto_groups: "autoGroups", group: "autoGroups" } as const) ?? "form";
      setErrors({ [field]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal opened={opened} onClose={close} title="Create a service user">
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Stack>
          <Text size="sm" c="dimmed">
            A service user is for scripts and automation: it cannot log in, it acts through its personal access tokens.
          </Text>
          <TextInput label="Name" required value={name} onChange={(e) => (setName(e.currentTarget.value), setErrors({}))} error={errors.name} data-autofocus />
          <RoleSelect value={role} onChange={(v) => (setRole(v), setErrors({}))} error={errors.role} />
          <MultiSelect label="Auto groups" data={groups} value={autoGroups} onChange={setAutoGroups} searchable error={errors.autoGroups} />
          <Group justify="flex-end">
            <Button variant="default" onClick={close}>
              Cancel
            </Button>
            <Button type="submit" loading={busy}>
              Create service user
            </Button>
          </Group>
          <FormError msg={errors.form} />
        </Stack>
      </form>
    </Modal>
  );
}

/** Change a user's role and auto groups (PUT sends the blocked state unchanged). */
export function EditUserModal({ user, onClose, onDone, groups }: { user: User | null; onClose: () => void; onDone: () => void; groups: GroupOption[] }) {
  const { api } = useApp();
  const [role, setRole] = useState("");
  const [autoGroups, setAutoGroups] = useState<string[]>([]);
  const [errors, setErrors] = useState<{ role?: string; autoGroups?: string; form?: string }>({});
  const [busy, setBusy] = useState(false);
  const [seen, setSeen] = useState<string | null>(null);
  if (user && seen !== user.id) {
    setSeen(user.id);
    setRole(user.role);
    setAutoGroups(user.auto_groups);
    setErrors({});
  }
  const close = () => {
    setSeen(null);
    onClose();
  };
  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    if (!user) return;
    if (!role) {
      setErrors({ role: "Pick a role" });
      return;
    }
    setBusy(true);
    try {
      await api.put("/api/users/{userId}", { path: { userId: user.id }, body: { role, auto_groups: autoGroups, is_blocked: user.is_blocked } });
      onDone();
      close();
    } catch (err) {
      const field = fieldOf(err, { role: "role", auto_groups: "autoGroups", group: "autoGroups", owner: "role" } as const) ?? "form";
      setErrors({ [field]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };
  const isOwner = user?.role === "owner";
  return (
    <Modal opened={user !== null} onClose={close} title={`Edit ${user?.name || user?.email || ""}`}>
      <form onSubmit={(e) => void submit(e)} noValidate>
        <Stack>
          {isOwner ? (
            <TextInput label="Role" value={roleLabel.owner} readOnly description="The owner's role cannot be changed" />
          ) : (
            <RoleSelect value={role} onChange={(v) => (setRole(v), setErrors({}))} error={errors.role} />
          )}
          <MultiSelect
            label="Auto groups"
            description="Peers this user adds join these groups (with groups propagation on, its existing peers follow)"
            data={groups}
            value={autoGroups}
            onChange={(v) => (setAutoGroups(v), setErrors({}))}
            searchable
            error={errors.autoGroups}
          />
          <Group justify="flex-end">
            <Button variant="default" onClick={close}>
              Cancel
            </Button>
            <Button type="submit" loading={busy}>
              Save
            </Button>
          </Group>
          <FormError msg={errors.form} />
        </Stack>
      </form>
    </Modal>
  );
}

export type UserAction = "block" | "unblock" | "delete" | "approve" | "reject";

const actionText: Record<UserAction, { verb: string; color: string; text: (n: string) => string }> = {
  block: { verb: "Block", color: "red", text: (n) => `${n} will be logged out within a second, its peers leave every network map, and its tokens stop working until unblocked.` },
  unblock: { verb: "Unblock", color: "indigo", text: (n) => `${n} may log in again and its peers rejoin the network.` },
  delete: { verb: "Delete", color: "red", text: (n) => `${n} will be deleted with its tokens and the peers it added. This cannot be undone.` },
  approve: { verb: "Approve", color: "green", text: (n) => `${n} joined by its e-mail domain and waits for approval. Once approved it may use the account with its role.` },
  reject: { verb: "Reject", color: "red", text: (n) => `${n} will be deleted (a later login waits for approval again).` },
};

export function ConfirmUserModal({ pending, onClose, onDone }: { pending: { action: UserAction; user: User } | null; onClose: () => void; onDone: () => void }) {
  const { api } = useApp();
  // The last request stays on screen while the dialog fades out.
  const last = useRef(pending);
  if (pending) last.current = pending;
  const shown = last.current;
  const a = shown ? actionText[shown.action] : null;
  const who = shown ? shown.user.name || shown.user.email : "";
  return (
    <ConfirmModal
      opened={pending !== null}
      title={a ? `${a.verb} ${who}` : ""}
      verb={a?.verb ?? ""}
      color={a?.color}
      errorId="user-confirm-error"
      onClose={onClose}
      onConfirm={async () => {
        if (!pending) return;
        const { action, user } = pending;
        const path = { userId: user.id };
        switch (action) {
          case "block":
          case "unblock":
            await api.put("/api/users/{userId}", { path, body: { role: user.role, auto_groups: user.auto_groups, is_blocked: action === "block" } });
            break;
          case "delete":
            await api.delete("/api/users/{userId}", { path });
            break;
          case "approve":
            await api.post("/api/users/{userId}/approve", { path });
            break;
          case "reject":
            await api.delete("/api/users/{userId}/reject", { path });
            break;
        }
        onDone();
      }}
    >
      {a?.text(who)}
    </ConfirmModal>
  );
}
