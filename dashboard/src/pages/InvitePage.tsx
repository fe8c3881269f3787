/**
 * The page an invite link opens (/invite?token=nbi_…), before any login:
 * it shows who invited whom, lets the invitee choose a password
 * (POST /api/users/invites/{token}/accept) and then log in.
 */
import { Alert, Button, Center, Loader, Paper, PasswordInput, Stack, Text, TextInput, Title } from "@mantine/core";
import { useEffect, useState, type FormEvent } from "react";
import { useSearchParams } from "react-router";
import { messageOf, type Schemas } from "../api/client";
import { fieldOf } from "../api/fielderror";
import { useApp } from "../app";
import { validateSetup } from "./setupForm";

type Info = Schemas["UserInviteInfo"];

export function InvitePage() {
  const { api, auth } = useApp();
  const [params] = useSearchParams();
  const token = params.get("token") ?? "";
  const [info, setInfo] = useState<Info | null>(null);
  const [loadErr, setLoadErr] = useState("");
  const [password, setPassword] = useState("");
  const [confirm, setConfirm] = useState("");
  const [errors, setErrors] = useState<{ password?: string; confirm?: string; form?: string }>({});
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState(false);

  useEffect(() => {
    if (!token) {
      setLoadErr("This link holds no invitation token.");
      return;
    }
    api.get("/api/users/invites/{inviteId}", { path: { inviteId: token } }).then(setInfo, (e: unknown) => setLoadErr(messageOf(e)));
  }, [api, token]);

  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    if (!info) return;
    const e = validateSetup({ email: info.email, name: info.name, password, confirm });
    const mine = { password: e.password, confirm: e.confirm };
    setErrors(mine);
    if (mine.password || mine.confirm) return;
    setBusy(true);
    try {
      await api.post("/api/users/invites/{token}/accept", { path: { token }, body: { password } });
      setDone(true);
    } catch (err) {
      setErrors({ [fieldOf(err, { password: "password" } as const) ?? "form"]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <Center mih="100vh" p="md">
      <Paper withBorder p="xl" maw={460} w="100%">
        <Stack>
          <Title order={1} size="h3">
            Join wiremesh
          </Title>
          {loadErr && (
            <Alert color="red" role="alert" title="This invitation cannot be used">
              {loadErr}
            </Alert>
          )}
          {!loadErr && !info && <Loader aria-label="Reading the invitation" />}
          {info && !info.valid && !done && (
            <Alert color="red" role="alert" title="This invitation expired">
              It was valid until {new Date(info.expires_at).toLocaleString()}. Ask {info.invited_by || "your admin"} for a new link.
            </Alert>
          )}
          {info && done && (
            <>
              <Alert color="green" role="status">
                Your password is set. Log in with {info.email}.
              </Alert>
              <Button onClick={() => void auth.login("/peers")}>Log in</Button>
            </>
          )}
          {info && info.valid && !done && (
            <form onSubmit={(e) => void submit(e)} noValidate>
              <Stack>
                <Text size="sm">
                  {info.invited_by || "An admin"} invited {info.name || info.email} to this network. Choose a password to finish.
                </Text>
                <TextInput label="E-mail" value={info.email} readOnly />
                <PasswordInput
                  label="Password"
                  description="At least 8 characters with an upper-case letter, a digit and a symbol"
                  required
                  value={password}
                  onChange={(e) => (setPassword(e.currentTarget.value), setErrors({}))}
                  error={errors.password}
                  autoComplete="new-password"
                  data-autofocus
                />
                <PasswordInput label="Repeat the password" required value={confirm} onChange={(e) => (setConfirm(e.currentTarget.value), setErrors({}))} error={errors.confirm} autoComplete="new-password" />
                <Button type="submit" loading={busy}>
                  Set password
                </Button>
                {errors.form && (
                  <Alert color="red" role="alert" title="The server refused">
                    {errors.form}
                  </Alert>
                )}
              </Stack>
            </form>
          )}
        </Stack>
      </Paper>
    </Center>
  );
}

export default InvitePage;
