import { Alert, Button, Center, Code, Paper, Stack, Text, Title } from "@mantine/core";
import { useState } from "react";
import { messageOf } from "../api/client";
import { useApp } from "../app";

export function LoginPage({ returnTo, error }: { returnTo: string; error: string }) {
  const { auth, config } = useApp();
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState(error);
  let issuerHost = config.issuer;
  try {
    issuerHost = new URL(config.issuer).host;
  } catch {
    // keep the raw value
  }
  const login = async () => {
    setBusy(true);
    setErr("");
    try {
      await auth.login(returnTo);
    } catch (e) {
      setErr(`Could not reach the identity provider at ${config.issuer}: ${messageOf(e)}`);
      setBusy(false);
    }
  };
  return (
    <Center mih="100vh" p="md">
      <Paper withBorder shadow="sm" p="xl" maw={460} w="100%" component="main">
        <Stack>
          <Title order={1} size="h2">
            Log in to wiremesh
          </Title>
          <Text c="dimmed" size="sm">
            You will log in at {issuerHost} and come back here.
          </Text>
          <Button onClick={() => void login()} loading={busy} size="md" aria-describedby={err ? "login-error" : undefined}>
            Log in
          </Button>
          {err && (
            <Alert color="red" id="login-error" role="alert" title="Login failed">
              {err}
            </Alert>
          )}
          <Text size="sm" c="dimmed">
            First time here? With the built-in identity provider, netbird-server created the owner at its first start
            and printed a one-time initial password in its log (a line beginning <Code>Owner created:</Code>). Log in
            with that e-mail address and password, then change the password.
          </Text>
        </Stack>
      </Paper>
    </Center>
  );
}
