/**
 * The account settings form: read from GET /api/accounts, checked with the
 * server's bounds (management/account: login expiration 1 s to 365 days
 * when on, inactivity expiration 60 s to 365 days when on, a DNS domain of
 * two or more labels, a private IPv4 network range /8 to /28, a JWT claim
 * name of at most 256 characters, at most 100 allowed JWT groups) and
 * turned into the PUT body.
 *
 * PUT /api/accounts/{id} replaces the settings: an omitted flag or list is
 * reset to its default. So the body carries the whole settings object as
 * the server sent it, with the form's changes; only dns_domain and
 * network_range are left out when unchanged (omitted means "keep", and
 * sending the range again would be a needless re-addressing check), and
 * claimed_domain is sent only when changed.
 */
import type { Schemas } from "../api/client";

export type Account = Schemas["Account"];
export type AccountSettings = Schemas["AccountSettings"];
export type AccountRequest = Schemas["AccountRequest"];

export const MAX_EXPIRATION_SECONDS = 365 * 24 * 60 * 60;
export const MIN_INACTIVITY_SECONDS = 60;
export const MAX_JWT_ALLOW_GROUPS = 100;
export const DEFAULT_DNS_DOMAIN = "netbird.selfhosted";

export type Unit = "minutes" | "hours" | "days";
export const unitSeconds: Record<Unit, number> = { minutes: 60, hours: 3600, days: 86400 };

export interface SettingsForm {
  loginExpirationEnabled: boolean;
  loginExpiration: number;
  loginExpirationUnit: Unit;
  inactivityExpirationEnabled: boolean;
  inactivityExpiration: number;
  inactivityExpirationUnit: Unit;
  peerApproval: boolean;
  userApproval: boolean;
  regularUsersViewBlocked: boolean;
  groupsPropagation: boolean;
  jwtGroupsEnabled: boolean;
  jwtGroupsClaimName: string;
  jwtAllowGroups: string[];
  routingPeerDnsResolution: boolean;
  dnsDomain: string;
  networkRange: string;
  lazyConnection: boolean;
  localMfa: boolean;
  claimedDomain: string;
}

export type SettingsErrors = Partial<Record<keyof SettingsForm | "form", string>>;

/** The largest unit that expresses seconds exactly (minutes at least, rounding up odd seconds). */
export function splitDuration(seconds: number): { value: number; unit: Unit } {
  if (seconds > 0 && seconds % 86400 === 0) return { value: seconds / 86400, unit: "days" };
  if (seconds > 0 && seconds % 3600 === 0) return { value: seconds / 3600, unit: "hours" };
  return { value: Math.ceil(seconds / 60), unit: "minutes" };
}

export function fromAccount(a: Account): SettingsForm {
  const s = a.settings;
  const login = splitDuration(s.peer_login_expiration || 86400);
  const idle = splitDuration(s.peer_inactivity_expiration || 600);
  return {
    loginExpirationEnabled: s.peer_login_expiration_enabled,
    loginExpiration: login.value,
    loginExpirationUnit: login.unit,
    inactivityExpirationEnabled: s.peer_inactivity_expiration_enabled ?? false,
    inactivityExpiration: idle.value,
    inactivityExpirationUnit: idle.unit,
    peerApproval: s.extra?.peer_approval_enabled ?? false,
    userApproval: s.extra?.user_approval_required ?? false,
    regularUsersViewBlocked: s.regular_users_view_blocked ?? false,
    groupsPropagation: s.groups_propagation_enabled ?? true,
    jwtGroupsEnabled: s.jwt_groups_enabled ?? false,
    jwtGroupsClaimName: s.jwt_groups_claim_name ?? "",
    jwtAllowGroups: s.jwt_allow_groups ?? [],
    routingPeerDnsResolution: s.routing_peer_dns_resolution_enabled ?? false,
    dnsDomain: s.dns_domain ?? "",
    networkRange: s.network_range ?? "",
    lazyConnection: s.lazy_connection_enabled ?? false,
    localMfa: s.local_mfa_enabled ?? false,
    claimedDomain: a.claimed_domain ?? "",
  };
}

/** Checks a DNS domain as the server does; "" is allowed (the default domain). */
export function checkDNSDomain(raw: string): string {
  const d = raw.trim().replace(/\.$/, "").toLowerCase();
  if (d === "") return "";
  if (d.length > 253) return "At most 253 characters";
  const labels = d.split(".");
  if (labels.length < 2) return "At least two labels, e.g. mesh.internal";
  for (const l of labels) {
    if (l === "" || l.length > 63 || l.startsWith("-") || l.endsWith("-") || !/^[a-z0-9-]+$/.test(l)) {
      return "Letters, digits and hyphens, 1 to 63 per label, no hyphen at a label's ends";
    }
  }
  return "";
}

function ipv4(s: string): number | null {
  const parts = s.split(".");
  if (parts.length !== 4) return null;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || (p.length > 1 && p.startsWith("0"))) return null;
    const v = Number(p);
    if (v > 255) return null;
    n = n * 256 + v;
  }
  return n;
}

const privateRanges: [number, number][] = [
  [ipv4("10.0.0.0") as number, 8],
  [ipv4("172.16.0.0") as number, 12],
  [ipv4("192.168.0.0") as number, 16],
  [ipv4("100.64.0.0") as number, 10],
];

function masked(addr: number, bits: number): number {
  if (bits === 0) return 0;
  const size = 2 ** (32 - bits);
  return Math.floor(addr / size) * size;
}

/** Checks an overlay network range as the server does: private IPv4 (or 100.64.0.0/10), /8 to /28. */
export function checkNetworkRange(raw: string): string {
  const s = raw.trim();
  const m = /^([^/]+)\/(\d{1,2})$/.exec(s);
  if (!m) return "A CIDR range, e.g. 100.64.0.0/16";
  const addr = ipv4(m[1] as string);
  const bits = Number(m[2]);
  if (addr === null) return "An IPv4 range (the overlay is IPv4 only)";
  if (bits > 32) return "A CIDR range, e.g. 100.64.0.0/16";
  if (bits < 8 || bits > 28) return "A /8 to /28";
  const net = masked(addr, bits);
  if (!privateRanges.some(([r, rb]) => rb <= bits && masked(net, rb) === r)) {
    return "Inside 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 or 100.64.0.0/10";
  }
  return "";
}

/** How many peer addresses a range holds (the server refuses a range smaller than the account's peers). */
export function hostsOf(raw: string): number {
  const bits = Number(raw.trim().split("/")[1]);
  return 2 ** (32 - bits) - 2;
}

function seconds(value: number, unit: Unit): number {
  return value * unitSeconds[unit];
}

export function validateSettings(f: SettingsForm): SettingsErrors {
  const e: SettingsErrors = {};
  const login = seconds(f.loginExpiration, f.loginExpirationUnit);
  if (f.loginExpirationEnabled && (!Number.isInteger(f.loginExpiration) || login < 1 || login > MAX_EXPIRATION_SECONDS)) {
    e.loginExpiration = "From 1 minute to 365 days";
  }
  const idle = seconds(f.inactivityExpiration, f.inactivityExpirationUnit);
  if (f.inactivityExpirationEnabled && (!Number.isInteger(f.inactivityExpiration) || idle < MIN_INACTIVITY_SECONDS || idle > MAX_EXPIRATION_SECONDS)) {
    e.inactivityExpiration = "From 1 minute to 365 days";
  }
  const dns = checkDNSDomain(f.dnsDomain);
  if (dns) e.dnsDomain = dns;
  const net = checkNetworkRange(f.networkRange);
  if (net) e.networkRange = net;
  if (f.jwtGroupsClaimName.length > 256 || /[\u0000\n\r]/.test(f.jwtGroupsClaimName)) e.jwtGroupsClaimName = "At most 256 characters, on one line";
  if (f.jwtAllowGroups.length > MAX_JWT_ALLOW_GROUPS) e.jwtAllowGroups = `At most ${MAX_JWT_ALLOW_GROUPS} groups`;
  else if (f.jwtAllowGroups.some((g) => g.trim() === "" || g.length > 256)) e.jwtAllowGroups = "Group names are 1 to 256 characters";
  return e;
}

function normDomain(s: string): string {
  return s.trim().replace(/\.$/, "").toLowerCase();
}

/** The PUT body for the form's changes (see the file's comment). */
export function toRequest(a: Account, f: SettingsForm): AccountRequest {
  const s = a.settings;
  const login = seconds(f.loginExpiration, f.loginExpirationUnit);
  const idle = seconds(f.inactivityExpiration, f.inactivityExpirationUnit);
  const settings: AccountSettings = {
    ...s,
    peer_login_expiration_enabled: f.loginExpirationEnabled,
    // A switched-off period keeps its stored value: it does not apply, and
    // the form's placeholder for it must not count as a change.
    peer_login_expiration: f.loginExpirationEnabled ? login : s.peer_login_expiration,
    peer_inactivity_expiration_enabled: f.inactivityExpirationEnabled,
    peer_inactivity_expiration: f.inactivityExpirationEnabled ? idle : (s.peer_inactivity_expiration ?? 0),
    regular_users_view_blocked: f.regularUsersViewBlocked,
    groups_propagation_enabled: f.groupsPropagation,
    jwt_groups_enabled: f.jwtGroupsEnabled,
    jwt_groups_claim_name: f.jwtGroupsClaimName.trim(),
    jwt_allow_groups: f.jwtAllowGroups.map((g) => g.trim()),
    routing_peer_dns_resolution_enabled: f.routingPeerDnsResolution,
    lazy_connection_enabled: f.lazyConnection,
    local_mfa_enabled: f.localMfa,
    extra: { ...(s.extra ?? {}), peer_approval_enabled: f.peerApproval, user_approval_required: f.userApproval },
  };
  // The server describes itself with these; a PUT cannot change them.
  delete settings.embedded_idp_enabled;
  delete settings.local_auth_disabled;
  if (normDomain(f.dnsDomain) === normDomain(s.dns_domain ?? "")) delete settings.dns_domain;
  else settings.dns_domain = normDomain(f.dnsDomain);
  if (f.networkRange.trim() === (s.network_range ?? "")) delete settings.network_range;
  else settings.network_range = f.networkRange.trim();
  const req: AccountRequest = { settings };
  if (f.claimedDomain.trim() !== (a.claimed_domain ?? "")) req.claimed_domain = f.claimedDomain.trim();
  return req;
}

/** The API fields the form changes (empty: nothing to save). */
export function changedFields(a: Account, f: SettingsForm): string[] {
  const req = toRequest(a, f);
  const out: string[] = [];
  const before = a.settings as Record<string, unknown>;
  for (const [k, v] of Object.entries(req.settings)) {
    if (k === "extra") continue;
    if (JSON.stringify(v) !== JSON.stringify(before[k])) out.push(k);
  }
  const ex = req.settings.extra ?? {};
  const was = a.settings.extra ?? {};
  if ((ex.peer_approval_enabled ?? false) !== (was.peer_approval_enabled ?? false)) out.push("extra.peer_approval_enabled");
  if ((ex.user_approval_required ?? false) !== (was.user_approval_required ?? false)) out.push("extra.user_approval_required");
  if (req.claimed_domain !== undefined) out.push("claimed_domain");
  return out;
}

/** Request field names (as the server's messages spell them) to form fields. */
export const settingsFields = {
  peer_login_expiration: "loginExpiration",
  peer_inactivity_expiration: "inactivityExpiration",
  dns_domain: "dnsDomain",
  network_range: "networkRange",
  jwt_groups_claim_name: "jwtGroupsClaimName",
  jwt_allow_groups: "jwtAllowGroups",
  local_mfa_enabled: "localMfa",
  claimed_domain: "claimedDomain",
  "extra.peer_approval_enabled": "peerApproval",
  "extra.user_approval_required": "userApproval",
} as const;
