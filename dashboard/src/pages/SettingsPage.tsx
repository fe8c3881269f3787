/**
 * Account settings: peer login and inactivity expiration, approvals, the
 * regular users' view, groups propagation, JWT groups, DNS domain, network
 * range, lazy connections, local MFA and the claimed domain. The form is
 * checked with the server's bounds before sending (settings/form.ts), Save
 * sends the settings as PUT expects them, and a refusal shows beside the
 * field it names. The danger zone deletes the account.
 */
import {
  Alert,
  Button,
  Card,
  Code,
  Group,
  Loader,
  Modal,
  NumberInput,
  Select,
  Stack,
  Switch,
  TagsInput,
  Text,
  TextInput,
  Title,
} from "@mantine/core";
import { useEffect, useState, type FormEvent, type ReactNode } from "react";
import { ApiError, messageOf } from "../api/client";
import { fieldOf } from "../api/fielderror";
import { usePoll } from "../api/poll";
import { useApp } from "../app";
import { Allowed } from "../common/Allowed";
import { deniedReason } from "../common/permissions";
import { useCurrentUser } from "../common/useCurrentUser";
import {
  changedFields,
  DEFAULT_DNS_DOMAIN,
  fromAccount,
  settingsFields,
  toRequest,
  validateSettings,
  type Account,
  type SettingsErrors,
  type SettingsForm,
  type Unit,
} from "../settings/form";

const units: { value: Unit; label: string }[] = [
  { value: "minutes", label: "minutes" },
  { value: "hours", label: "hours" },
  { value: "days", label: "days" },
];

function Section({ title, children }: { title: string; children: ReactNode }) {
  return (
    <Card withBorder padding="md" component="section" aria-label={title}>
      <Title order={3} size="h5" mb="sm">
        {title}
      </Title>
      <Stack gap="sm">{children}</Stack>
    </Card>
  );
}

function Duration({
  label,
  value,
  unit,
  disabled,
  error,
  onValue,
  onUnit,
}: {
  label: string;
  value: number;
  unit: Unit;
  disabled: boolean;
  error?: string | undefined;
  onValue: (v: number) => void;
  onUnit: (u: Unit) => void;
}) {
  return (
    <Group align="flex-start" gap="xs">
      <NumberInput label={label} min={1} allowDecimal={false} value={value} onChange={(v) => onValue(typeof v === "number" ? v : Number.NaN)} disabled={disabled} error={error} w={200} />
      <Select label="Unit" aria-label={`${label}: unit`} data={units} value={unit} onChange={(v) => onUnit((v ?? "hours") as Unit)} allowDeselect={false} disabled={disabled} w={130} />
    </Group>
  );
}

function DeleteAccount({ account, why }: { account: Account; why: string }) {
  const { api, auth } = useApp();
  const [open, setOpen] = useState(false);
  const [typed, setTyped] = useState("");
  const [err, setErr] = useState("");
  const [busy, setBusy] = useState(false);
  const name = account.domain;
  const run = async () => {
    setBusy(true);
    setErr("");
    try {
      await api.delete("/api/accounts/{accountId}", { path: { accountId: account.id } });
      await auth.logout();
    } catch (e) {
      setErr(e instanceof ApiError && e.status === 412 ? `The server refused: ${e.message}` : messageOf(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Card withBorder padding="md" component="section" aria-label="Danger zone" style={{ borderColor: "var(--mantine-color-red-6)" }}>
      <Title order={3} size="h5" c="red" mb="xs">
        Danger zone
      </Title>
      <Group justify="space-between" align="flex-start">
        <Text size="sm" maw={560}>
          Deleting the account removes its users, peers, groups, policies, keys and everything else, voids its tokens and disconnects its
          peers. The install's own account cannot be deleted (remove the server's data to start over).
        </Text>
        <Allowed why={why}>
          <Button color="red" variant="light" onClick={() => setOpen(true)}>
            Delete account
          </Button>
        </Allowed>
      </Group>
      <Modal opened={open} onClose={() => (setOpen(false), setTyped(""), setErr(""))} title="Delete the account">
        <Stack>
          <Text size="sm">
            This cannot be undone. Type <Code>{name}</Code> to confirm.
          </Text>
          <TextInput label="Account domain" value={typed} onChange={(e) => setTyped(e.currentTarget.value)} autoComplete="off" data-autofocus />
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setOpen(false)}>
              Cancel
            </Button>
            <Button color="red" disabled={typed !== name} loading={busy} onClick={() => void run()} aria-describedby={err ? "delete-account-error" : undefined}>
              Delete the account
            </Button>
          </Group>
          {err && (
            <Alert color="red" role="alert" id="delete-account-error">
              {err}
            </Alert>
          )}
        </Stack>
      </Modal>
    </Card>
  );
}

export function SettingsPage() {
  const { api } = useApp();
  const { me } = useCurrentUser();
  const accounts = usePoll((signal) => api.get("/api/accounts", { signal }), 30_000, [], ["account"]);
  const account = accounts.data?.[0];
  const [f, setF] = useState<SettingsForm | null>(null);
  const [base, setBase] = useState<Account | null>(null);
  const [errors, setErrors] = useState<SettingsErrors>({});
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState("");

  // Load the form from the server, and again when another admin changed
  // the settings while this form holds no edits.
  useEffect(() => {
    if (!account) return;
    if (!f || !base || changedFields(base, f).length === 0) {
      if (JSON.stringify(account) !== JSON.stringify(base)) {
        setBase(account);
        setF(fromAccount(account));
      }
    }
  }, [account, base, f]);

  const noUpdate = deniedReason(me, "settings", "update");
  const noDelete = deniedReason(me, "accounts", "delete");
  if (!f || !base) {
    return (
      <Stack>
        <Title order={2}>Settings</Title>
        {accounts.error !== null ? (
          <Alert color="red" role="alert" title="Could not load the settings">
            {messageOf(accounts.error)}
          </Alert>
        ) : (
          <Loader aria-label="Loading the settings" />
        )}
      </Stack>
    );
  }
  const changed = changedFields(base, f);
  const ro = noUpdate !== "";
  const set = <K extends keyof SettingsForm>(k: K, v: SettingsForm[K]) => {
    setF((o) => (o ? { ...o, [k]: v } : o));
    setErrors((o) => ({ ...o, [k]: undefined, form: undefined }));
    setSaved("");
  };
  const sw = (k: keyof SettingsForm, label: string, description: string, extra?: { disabled?: string }) => (
    <Switch
      label={label}
      description={extra?.disabled ? `${description} (${extra.disabled})` : description}
      checked={f[k] as boolean}
      onChange={(e) => set(k, e.currentTarget.checked as never)}
      disabled={ro || !!extra?.disabled}
      error={errors[k]}
    />
  );
  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validateSettings(f);
    setErrors(e);
    setSaved("");
    if (Object.keys(e).length) return;
    setBusy(true);
    const req = toRequest(base, f);
    try {
      const acc = await api.put("/api/accounts/{accountId}", { path: { accountId: base.id }, body: req });
      setBase(acc);
      setF(fromAccount(acc));
      setSaved(`Saved: ${changed.join(", ")}.`);
      void accounts.reload();
    } catch (err) {
      let field: keyof SettingsErrors = fieldOf(err, settingsFields) ?? "form";
      // Refusals of a claimed domain name the domain, not the field.
      if (field === "form" && req.claimed_domain !== undefined && err instanceof ApiError && /domain/i.test(err.message)) field = "claimedDomain";
      setErrors({ [field]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };
  const s = base.settings;
  return (
    <form onSubmit={(e) => void submit(e)} noValidate>
      <Stack gap="md" maw={900}>
        <Group justify="space-between">
          <Title order={2}>Settings</Title>
          <Group gap="xs">
            <Button variant="default" disabled={changed.length === 0 || busy} onClick={() => (setF(fromAccount(base)), setErrors({}))}>
              Discard changes
            </Button>
            <Allowed why={noUpdate || (changed.length === 0 ? "Nothing changed" : "")}>
              <Button type="submit" loading={busy}>
                Save
              </Button>
            </Allowed>
          </Group>
        </Group>
        {ro && me && <Alert color="yellow">{noUpdate}: the settings are shown read-only.</Alert>}
        {errors.form && (
          <Alert color="red" role="alert" title="The server refused">
            {errors.form}
          </Alert>
        )}
        {saved && (
          <Alert color="green" role="status">
            {saved}
          </Alert>
        )}
        <Section title="Peer login">
          {sw("loginExpirationEnabled", "Peer login expiration", "Peers added by a user login must log in again after this period")}
          <Duration
            label="Log in again after"
            value={f.loginExpiration}
            unit={f.loginExpirationUnit}
            disabled={ro || !f.loginExpirationEnabled}
            error={errors.loginExpiration}
            onValue={(v) => set("loginExpiration", v)}
            onUnit={(u) => set("loginExpirationUnit", u)}
          />
          {sw("inactivityExpirationEnabled", "Peer inactivity expiration", "Peers added by a user login and disconnected this long must log in again")}
          <Duration
            label="Inactive for"
            value={f.inactivityExpiration}
            unit={f.inactivityExpirationUnit}
            disabled={ro || !f.inactivityExpirationEnabled}
            error={errors.inactivityExpiration}
            onValue={(v) => set("inactivityExpiration", v)}
            onUnit={(u) => set("inactivityExpirationUnit", u)}
          />
        </Section>
        <Section title="Approvals">
          {sw("peerApproval", "Peer approval", "New peers wait for an admin's approval before they reach or are reached by anyone (turning it off approves every pending peer)")}
          {sw("userApproval", "User approval", "Users joining by their e-mail domain wait for an admin's approval")}
        </Section>
        <Section title="Users and groups">
          {sw("regularUsersViewBlocked", "Restrict regular users", "Users with the role user see only themselves and their own peers")}
          {sw("groupsPropagation", "Groups propagation", "A user's auto groups (and JWT groups) apply to the peers it added")}
          {sw("jwtGroupsEnabled", "JWT groups", "The identity provider's groups claim becomes the user's groups at each login")}
          <TextInput
            label="JWT groups claim"
            placeholder="groups"
            value={f.jwtGroupsClaimName}
            onChange={(e) => set("jwtGroupsClaimName", e.currentTarget.value)}
            disabled={ro || !f.jwtGroupsEnabled}
            error={errors.jwtGroupsClaimName}
            maw={360}
          />
          <TagsInput
            label="Allowed JWT groups"
            description="If set, only users holding one of these groups may use the account (press Enter after each)"
            value={f.jwtAllowGroups}
            onChange={(v) => set("jwtAllowGroups", v)}
            disabled={ro || !f.jwtGroupsEnabled}
            error={errors.jwtAllowGroups}
          />
        </Section>
        <Section title="Network">
          <TextInput
            label="DNS domain"
            description={`Peers are named <peer>.${f.dnsDomain.trim() || DEFAULT_DNS_DOMAIN}; empty restores ${DEFAULT_DNS_DOMAIN}`}
            value={f.dnsDomain}
            onChange={(e) => set("dnsDomain", e.currentTarget.value)}
            disabled={ro}
            error={errors.dnsDomain}
            maw={420}
          />
          <TextInput
            label="Network range"
            description="A private IPv4 range or 100.64.0.0/10, /8 to /28. Changing it re-addresses every peer at once."
            value={f.networkRange}
            onChange={(e) => set("networkRange", e.currentTarget.value)}
            disabled={ro}
            error={errors.networkRange}
            maw={420}
          />
          {f.networkRange.trim() !== s.network_range && !errors.networkRange && (
            <Alert color="yellow" role="status">
              Every peer gets a new address in {f.networkRange.trim()} when you save.
            </Alert>
          )}
          {sw("lazyConnection", "Lazy connections", "Agents connect to a peer only when traffic for it appears")}
          {sw("routingPeerDnsResolution", "DNS resolution on routing peers", "Routing peers resolve DNS names of the routes they serve")}
        </Section>
        <Section title="Login">
          {sw(
            "localMfa",
            "Second factor for local users",
            "The built-in identity provider asks its users for a one-time code, enrolling each at its next login",
            s.embedded_idp_enabled ? undefined : { disabled: "only with the built-in identity provider" },
          )}
          <TextInput
            label="Claimed e-mail domain"
            description="In domain account mode, verified addresses of this domain join this account"
            value={f.claimedDomain}
            onChange={(e) => set("claimedDomain", e.currentTarget.value)}
            disabled={ro}
            error={errors.claimedDomain}
            maw={420}
          />
        </Section>
        <DeleteAccount account={base} why={noDelete} />
      </Stack>
    </form>
  );
}

export default SettingsPage;
