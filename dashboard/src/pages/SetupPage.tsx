/**
 * First run: the install has no owner yet (GET /api/instance says
 * setup_required), so the first visitor creates one with POST /api/setup,
 * then logs in with it.
 */
import { Alert, Button, Center, Code, List, Paper, PasswordInput, Stack, Text, TextInput, Title } from "@mantine/core";
import { useState, type FormEvent } from "react";
import { messageOf } from "../api/client";
import { fieldOf } from "../api/fielderror";
import { useApp } from "../app";
import { validateSetup, type SetupErrors as Errors, type SetupForm as Form } from "./setupForm";

export function SetupPage({ onDone }: { onDone: () => void }) {
  const { api, auth } = useApp();
  const [f, setF] = useState<Form>({ email: "", name: "", password: "", confirm: "" });
  const [errors, setErrors] = useState<Errors>({});
  const [busy, setBusy] = useState(false);
  const [created, setCreated] = useState<string | null>(null);

  const set = (k: keyof Form) => (ev: { currentTarget: { value: string } }) => {
    const v = ev.currentTarget.value;
    setF((o) => ({ ...o, [k]: v }));
    setErrors((o) => ({ ...o, [k]: undefined, form: undefined }));
  };

  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    const e = validateSetup(f);
    setErrors(e);
    if (Object.keys(e).length) return;
    setBusy(true);
    try {
      const out = await api.post("/api/setup", { body: { email: f.email.trim(), name: f.name.trim(), password: f.password } });
      setCreated(out.email);
    } catch (err) {
      const field = fieldOf(err, { email: "email", password: "password", name: "name" } as const) ?? "form";
      setErrors({ [field]: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };

  if (created) {
    return (
      <Center mih="100vh" p="md">
        <Paper withBorder shadow="sm" p="xl" maw={520} w="100%" component="main">
          <Stack>
            <Title order={1} size="h2">
              Owner created
            </Title>
            <Text>
              {created} owns this install. Log in with that address and the password you chose.
            </Text>
            <Button
              onClick={() => {
                onDone();
                void auth.login("/peers");
              }}
            >
              Log in
            </Button>
          </Stack>
        </Paper>
      </Center>
    );
  }

  return (
    <Center mih="100vh" p="md">
      <Paper withBorder shadow="sm" p="xl" maw={560} w="100%" component="main">
        <form onSubmit={(e) => void submit(e)} noValidate aria-labelledby="setup-title">
          <Stack>
            <Title order={1} size="h2" id="setup-title">
              Set up wiremesh
            </Title>
            <Text size="sm">
              This server has no owner yet. Create the owner's account: it can do everything, including inviting the
              other administrators.
            </Text>
            <TextInput label="E-mail" type="email" autoComplete="username" required value={f.email} onChange={set("email")} error={errors.email} data-autofocus />
            <TextInput label="Name" autoComplete="name" value={f.name} onChange={set("name")} error={errors.name} description="Optional; the e-mail address is used without one" />
            <PasswordInput label="Password" autoComplete="new-password" required value={f.password} onChange={set("password")} error={errors.password} description="At least 8 characters with an upper-case letter, a digit and a symbol" />
            <PasswordInput label="Repeat the password" autoComplete="new-password" required value={f.confirm} onChange={set("confirm")} error={errors.confirm} />
            <Button type="submit" loading={busy}>
              Create the owner
            </Button>
            {errors.form && (
              <Alert color="red" role="alert" title="The server refused">
                {errors.form}
              </Alert>
            )}
            <Alert color="blue" variant="light" title="The initial-password path">
              <List size="sm" spacing={4}>
                <List.Item>
                  By default netbird-server creates the owner itself at its first start (<Code>--owner-email</Code>,
                  default admin@netbird.selfhosted) and prints a one-time initial password in its log. This page
                  appears only when it was started with <Code>--owner-email ""</Code>.
                </List.Item>
                <List.Item>
                  Scripts can do the same as this form: <Code>POST /api/setup</Code> with email, password and name
                  (and <Code>create_pat</Code> for a personal access token).
                </List.Item>
              </List>
            </Alert>
          </Stack>
        </form>
      </Paper>
    </Center>
  );
}
