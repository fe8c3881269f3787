/**
 * Boot loads the server's dashboard settings, completes a login coming
 * back from the identity provider, asks whether the install still needs its
 * first owner, then hands over to the routes.
 */
import { Alert, Center, Code, Loader, Stack, Text, Title } from "@mantine/core";
import { useEffect, useState } from "react";
import { BrowserRouter } from "react-router";
import { Client, messageOf } from "./api/client";
import { LiveContext, LiveStream } from "./api/live";
import { AppContext, type AppServices } from "./app";
import { Auth } from "./auth/auth";
import { CALLBACK_PATH, CONFIG_PATH, loadConfig } from "./auth/config";
import { AppRoutes } from "./Routes";

type State =
  | { kind: "loading" }
  | { kind: "failed"; message: string }
  | { kind: "ready"; services: AppServices; setupRequired: boolean; loginError: string };

async function boot(): Promise<State> {
  const config = await loadConfig();
  const auth = new Auth(config);
  const base = config.api_url ?? "";
  const api = new Client({
    baseURL: base,
    token: () => auth.token(),
    // The session is gone (expired, revoked, user blocked): log in again.
    onUnauthenticated: () => void auth.manager.removeUser(),
  });
  let loginError = "";
  if (window.location.pathname === CALLBACK_PATH) {
    try {
      const to = await auth.completeLogin();
      window.history.replaceState(null, "", to);
    } catch (e) {
      loginError = `The login did not complete: ${messageOf(e)}`;
      window.history.replaceState(null, "", "/");
    }
  } else {
    await auth.restore();
  }
  const inst = await api.get("/api/instance");
  return {
    kind: "ready",
    services: {
      api,
      auth,
      config,
      live: new LiveStream({ open: (signal) => api.openStream("/api/events/stream", signal) }),
      managementURL: base || window.location.origin,
    },
    setupRequired: inst.setup_required,
    loginError,
  };
}

export function Boot() {
  const [state, setState] = useState<State>({ kind: "loading" });
  useEffect(() => {
    boot().then(setState, (e: unknown) => setState({ kind: "failed", message: messageOf(e) }));
  }, []);
  // The live stream's state on <html data-live=...> (connecting, live or
  // down): for styling and for tests that wait until pushes arrive.
  const live = state.kind === "ready" ? state.services.live : null;
  useEffect(() => {
    if (!live) return;
    document.documentElement.dataset.live = live.state;
    return live.onState((s) => {
      document.documentElement.dataset.live = s;
    });
  }, [live]);
  switch (state.kind) {
    case "loading":
      return (
        <Center h="100vh">
          <Loader aria-label="Loading the dashboard" />
        </Center>
      );
    case "failed":
      return (
        <Center h="100vh" p="md">
          <Stack maw={560}>
            <Title order={1} size="h3">
              The dashboard cannot start
            </Title>
            <Alert color="red" title="Error" role="alert">
              {state.message}
            </Alert>
            <Text size="sm">
              The dashboard reads its login settings from <Code>{CONFIG_PATH}</Code>, served by netbird-server, and
              talks to the REST API under <Code>/api</Code> on the same origin. Check that the server is running and
              reachable, then reload.
            </Text>
          </Stack>
        </Center>
      );
    case "ready":
      return (
        <AppContext.Provider value={state.services}>
          <LiveContext.Provider value={state.services.live}>
            <BrowserRouter>
              <AppRoutes initialSetupRequired={state.setupRequired} loginError={state.loginError} />
            </BrowserRouter>
          </LiveContext.Provider>
        </AppContext.Provider>
      );
  }
}
