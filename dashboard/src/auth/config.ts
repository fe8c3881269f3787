/**
 * DashboardConfig is what the server serves at /dashboard-config.json, on
 * the dashboard's origin, built from its own settings:
 *
 *   {"issuer": "https://vpn.example.com/oauth2",
 *    "client_id": "netbird-dashboard",
 *    "audience": "netbird-dashboard"}
 *
 * - issuer: the OpenID Connect issuer the dashboard logs in with (its
 *   discovery document is at issuer + /.well-known/openid-configuration);
 *   the built-in provider's is the server's base URL + /oauth2.
 * - client_id: the dashboard's public client at that issuer (the built-in
 *   provider's is "netbird-dashboard"). The client must allow the redirect
 *   URI <dashboard origin>/nb-auth and, after logout, <dashboard origin>/.
 * - audience: the audience the server accepts in access tokens. When it
 *   differs from client_id it is sent as the `audience` parameter of the
 *   authorization request (Auth0 and similar need it).
 * - scope (optional): scopes to ask for; default
 *   "openid profile email offline_access" (offline_access brings the
 *   refresh token that silent renewal uses).
 * - api_url (optional): origin of the REST API when the dashboard is served
 *   elsewhere (split deployment); default the page's own origin.
 */
export interface DashboardConfig {
  issuer: string;
  client_id: string;
  audience: string;
  scope?: string;
  api_url?: string;
}

export const CONFIG_PATH = "/dashboard-config.json";
export const DEFAULT_SCOPE = "openid profile email offline_access";
/** Where the identity provider sends the browser back after login. */
export const CALLBACK_PATH = "/nb-auth";

function isHttpURL(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:";
  } catch {
    return false;
  }
}

/** Checks a parsed config file; throws an Error naming the bad field. */
export function parseConfig(raw: unknown): DashboardConfig {
  if (!raw || typeof raw !== "object") throw new Error(`${CONFIG_PATH} is not a JSON object`);
  const r = raw as Record<string, unknown>;
  const str = (k: string, required: boolean): string | undefined => {
    const v = r[k];
    if (v === undefined || v === null || v === "") {
      if (required) throw new Error(`${CONFIG_PATH}: ${k} is missing`);
      return undefined;
    }
    if (typeof v !== "string") throw new Error(`${CONFIG_PATH}: ${k} must be a string`);
    return v;
  };
  const issuer = str("issuer", true) as string;
  if (!isHttpURL(issuer)) throw new Error(`${CONFIG_PATH}: issuer ${JSON.stringify(issuer)} is not an http(s) URL`);
  const client_id = str("client_id", true) as string;
  const audience = str("audience", false) ?? client_id;
  const cfg: DashboardConfig = { issuer, client_id, audience };
  const scope = str("scope", false);
  if (scope) cfg.scope = scope;
  const api = str("api_url", false);
  if (api) {
    if (!isHttpURL(api)) throw new Error(`${CONFIG_PATH}: api_url ${JSON.stringify(api)} is not an http(s) URL`);
    cfg.api_url = api.replace(/\/$/, "");
  }
  return cfg;
}

/** Fetches and checks the config file. */
export async function loadConfig(fetchFn: typeof fetch = fetch): Promise<DashboardConfig> {
  let res: Response;
  try {
    res = await fetchFn(CONFIG_PATH, { headers: { Accept: "application/json" }, cache: "no-store" });
  } catch (e) {
    throw new Error(`could not fetch ${CONFIG_PATH}: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!res.ok) throw new Error(`${CONFIG_PATH} answered ${res.status}: the server does not serve the dashboard's settings`);
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    throw new Error(`${CONFIG_PATH} is not JSON`);
  }
  return parseConfig(body);
}
