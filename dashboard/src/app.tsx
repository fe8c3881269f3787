/** The app's shared services: the API client, login and the server's settings. */
import { createContext, useContext } from "react";
import type { Client } from "./api/client";
import type { LiveStream } from "./api/live";
import type { Auth } from "./auth/auth";
import type { DashboardConfig } from "./auth/config";

export interface AppServices {
  api: Client;
  /** The live event stream usePoll listens to. */
  live: LiveStream;
  auth: Auth;
  config: DashboardConfig;
  /** The URL agents reach management at (the API's origin). */
  managementURL: string;
}

export const AppContext = createContext<AppServices | null>(null);

export function useApp(): AppServices {
  const s = useContext(AppContext);
  if (!s) throw new Error("useApp outside AppContext");
  return s;
}
