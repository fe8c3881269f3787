/**
 * The DNS forms (nameserver groups, custom zones, zone records): what the
 * admin types, the checks before anything is sent (the server's rules in
 * management/dnsadmin, so a refusal is rare), the translation to and from
 * the API's shapes, and which control a server refusal belongs beside.
 */
import { ApiError, type Schemas } from "../api/client";
import { fieldOf } from "../api/fielderror";
import { splitList } from "../routing/form";
import { domainError, parseIP, parseIPv4, parseIPv6 } from "../routing/net";

export type NameserverGroup = Schemas["NameserverGroup"];
export type NameserverGroupRequest = Schemas["NameserverGroupRequest"];
export type Zone = Schemas["Zone"];
export type ZoneRequest = Schemas["ZoneRequest"];
export type DNSRecord = Schemas["DNSRecord"];
export type DNSRecordRequest = Schemas["DNSRecordRequest"];
export type RecordType = DNSRecord["type"];

export const MAX_GROUP_NAME = 40;
export const MAX_ZONE_NAME = 255;
export const MAX_DESCRIPTION = 1024;
export const MIN_NAMESERVERS = 1;
export const MAX_NAMESERVERS = 3;
export const MAX_MATCH_DOMAINS = 32;
export const MAX_TTL = 604800;
export const MAX_CONTENT = 255;
export const DEFAULT_TTL = 300;

/** The characters of s, counted as the server counts them (runes). */
const runes = (s: string) => [...s].length;
/** The UTF-8 length of s (the server limits descriptions in bytes). */
const bytes = (s: string) => new TextEncoder().encode(s).length;

/** A domain that may not be a wildcard: an error message, or "". */
function plainDomainError(d: string): string {
  if (d.trim().startsWith("*.")) return `"${d.trim()}": a wildcard is not allowed here`;
  return domainError(d);
}

/** A domain as the server keeps it: lower case, without the final dot. */
export function normDomain(d: string): string {
  return d.trim().replace(/\.$/, "").toLowerCase();
}

// ---- nameserver groups ----

export interface NameserverRow {
  ip: string;
  port: number | string;
  nsType: "udp";
}

export interface NameserverForm {
  name: string;
  description: string;
  nameservers: NameserverRow[];
  /** "primary" resolves every domain; "match" only the domains below. */
  mode: "primary" | "match";
  /** Match domains, one per line (or separated by commas). */
  domains: string;
  searchDomains: boolean;
  groups: string[];
  enabled: boolean;
}

/** A control of the nameserver form; ns<i>.ip / ns<i>.port are rows. */
export type NameserverField = "name" | "description" | "nameservers" | "domains" | "searchDomains" | "groups" | `ns${number}.ip` | `ns${number}.port`;
export type NameserverErrors = Partial<Record<NameserverField | "form", string>>;

export function newNameserverRow(): NameserverRow {
  return { ip: "", port: 53, nsType: "udp" };
}

export function newNameserverGroup(): NameserverForm {
  return { name: "", description: "", nameservers: [newNameserverRow()], mode: "match", domains: "", searchDomains: false, groups: [], enabled: true };
}

/** Why ip cannot be a nameserver, or "". */
export function nameserverIPError(ip: string): string {
  const s = ip.trim();
  if (!s) return "Give the nameserver's IP address";
  if (s.includes("%")) return `${s}: an address with a zone cannot be used by other peers`;
  const b = parseIP(s);
  if (!b) return `"${s}" is not an IPv4 or IPv6 address`;
  const v4 = b.length === 4 ? b : b.slice(0, 12).every((x, i) => x === (i < 10 ? 0 : 0xff)) ? b.slice(12) : null;
  if (v4) {
    if (v4.every((x) => x === 0)) return `${s} is not a unicast address`;
    if ((v4[0] ?? 0) >= 224 && (v4[0] ?? 0) <= 239) return `${s} is a multicast address, not a nameserver`;
  } else {
    if (b.every((x) => x === 0)) return `${s} is not a unicast address`;
    if (b[0] === 0xff) return `${s} is a multicast address, not a nameserver`;
  }
  return "";
}

/** Why port is not a port, or "". */
export function portError(port: number | string): string {
  const t = String(port).trim();
  const n = Number(t);
  if (t === "" || !Number.isInteger(n)) return "The port is a whole number from 1 to 65535";
  if (n < 1 || n > 65535) return `The port ${n} is outside 1-65535`;
  return "";
}

export function validateNameserverGroup(f: NameserverForm): NameserverErrors {
  const e: NameserverErrors = {};
  const name = f.name.trim();
  if (!name) e.name = "A nameserver group needs a name";
  else if (runes(name) > MAX_GROUP_NAME) e.name = `At most ${MAX_GROUP_NAME} characters (this has ${runes(name)})`;
  if (bytes(f.description) > MAX_DESCRIPTION) e.description = `At most ${MAX_DESCRIPTION} bytes`;
  const n = f.nameservers.length;
  if (n < MIN_NAMESERVERS || n > MAX_NAMESERVERS) e.nameservers = `A group has ${MIN_NAMESERVERS} to ${MAX_NAMESERVERS} nameservers (this has ${n})`;
  const seen = new Set<string>();
  f.nameservers.forEach((ns, i) => {
    const ipErr = nameserverIPError(ns.ip);
    if (ipErr) e[`ns${i}.ip`] = ipErr;
    const pErr = portError(ns.port);
    if (pErr) e[`ns${i}.port`] = pErr;
    const key = `${ns.ip.trim().toLowerCase()}|${String(ns.port).trim()}`;
    if (!ipErr && !pErr && seen.has(key)) e[`ns${i}.ip`] = `${ns.ip.trim()}:${String(ns.port).trim()} is listed twice`;
    seen.add(key);
  });
  if (f.mode === "match") {
    const ds = splitList(f.domains);
    if (ds.length === 0) e.domains = "Give the match domains this group resolves, or make it the primary nameserver";
    else if (ds.length > MAX_MATCH_DOMAINS) e.domains = `${ds.length} domains; a group has at most ${MAX_MATCH_DOMAINS}`;
    else {
      const bad = ds.map(plainDomainError).find(Boolean);
      if (bad) e.domains = bad;
    }
  }
  if (f.groups.length === 0) e.groups = "Pick the distribution groups: their peers use these nameservers";
  return e;
}

/** The request for a valid form: domains only when matching, search domains only with domains. */
export function nameserverGroupRequest(f: NameserverForm): NameserverGroupRequest {
  const match = f.mode === "match";
  return {
    name: f.name.trim(),
    description: f.description.trim(),
    nameservers: f.nameservers.map((ns) => ({ ip: ns.ip.trim(), ns_type: ns.nsType, port: Number(String(ns.port).trim()) })),
    enabled: f.enabled,
    groups: f.groups,
    primary: !match,
    domains: match ? splitList(f.domains) : [],
    search_domains_enabled: match && f.searchDomains,
  };
}

export function fromNameserverGroup(g: NameserverGroup): NameserverForm {
  return {
    name: g.name,
    description: g.description,
    nameservers: g.nameservers.map((ns) => ({ ip: ns.ip, port: ns.port, nsType: ns.ns_type })),
    mode: g.primary ? "primary" : "match",
    domains: g.domains.join("\n"),
    searchDomains: g.search_domains_enabled,
    groups: g.groups,
    enabled: g.enabled,
  };
}

/** The server's error field names, and a nameserver row's ("nameservers[1].ip"). */
const refused = (err: unknown): err is ApiError => err instanceof ApiError && (err.status === 400 || err.status === 422 || err.status === 409);

/** The nameserver control a server refusal names, or "form". */
export function nameserverErrorField(err: unknown): NameserverField | "form" {
  if (refused(err)) {
    const m = /nameservers\[(\d+)\]\.(ip|port|ns_type)/.exec(err.message);
    if (m) return m[2] === "port" ? `ns${Number(m[1])}.port` : `ns${Number(m[1])}.ip`;
  }
  return (
    fieldOf(err, {
      name: "name",
      description: "description",
      nameservers: "nameservers",
      primary: "domains",
      domains: "domains",
      search_domains_enabled: "searchDomains",
      groups: "groups",
    } as const) ?? "form"
  );
}

/** "1.1.1.1:53, [2606:4700::1111]:53" */
export function formatNameservers(nss: { ip: string; port: number }[]): string {
  return nss.map((ns) => (ns.ip.includes(":") ? `[${ns.ip}]:${ns.port}` : `${ns.ip}:${ns.port}`)).join(", ");
}

// ---- zones ----

export interface ZoneForm {
  name: string;
  domain: string;
  searchDomain: boolean;
  groups: string[];
  enabled: boolean;
}
export type ZoneField = "name" | "domain" | "searchDomain" | "groups";
export type ZoneErrors = Partial<Record<ZoneField | "form", string>>;

export function newZone(): ZoneForm {
  return { name: "", domain: "", searchDomain: false, groups: [], enabled: true };
}

export function validateZone(f: ZoneForm): ZoneErrors {
  const e: ZoneErrors = {};
  const name = f.name.trim();
  if (!name) e.name = "A zone needs a name";
  else if (runes(name) > MAX_ZONE_NAME) e.name = `At most ${MAX_ZONE_NAME} characters`;
  if (!f.domain.trim()) e.domain = "Give the zone's domain, e.g. internal.example.com";
  else {
    const d = plainDomainError(f.domain);
    if (d) e.domain = d;
  }
  if (f.groups.length === 0) e.groups = "Pick the distribution groups: their peers resolve this zone";
  return e;
}

export function zoneRequest(f: ZoneForm): ZoneRequest {
  return { name: f.name.trim(), domain: normDomain(f.domain), enable_search_domain: f.searchDomain, distribution_groups: f.groups, enabled: f.enabled };
}

export function fromZone(z: Zone): ZoneForm {
  return { name: z.name, domain: z.domain, searchDomain: z.enable_search_domain, groups: z.distribution_groups, enabled: z.enabled };
}

export function zoneErrorField(err: unknown): ZoneField | "form" {
  return fieldOf(err, { name: "name", domain: "domain", enable_search_domain: "searchDomain", distribution_groups: "groups" } as const) ?? "form";
}

// ---- records ----

export interface RecordForm {
  /** The name as typed: a full name under the zone, or a label relative to it ("www", "@"). */
  name: string;
  type: RecordType;
  content: string;
  ttl: number | string;
}
export type RecordField = "name" | "type" | "content" | "ttl";
export type RecordErrors = Partial<Record<RecordField | "form", string>>;

export function newRecord(): RecordForm {
  return { name: "", type: "A", content: "", ttl: DEFAULT_TTL };
}

/**
 * The record's full name in zone: "@" is the zone's domain, a name that
 * already ends in the zone's domain stays, anything else is relative to
 * the zone ("www" -> www.example.com) unless it ends with a dot (written
 * absolute: kept, and refused when outside the zone).
 */
export function recordFQDN(name: string, zone: string): string {
  const n = name.trim().toLowerCase();
  const z = normDomain(zone);
  if (n === "" || n === "@") return z;
  if (n.endsWith(".")) return n.slice(0, -1);
  if (n === z || n.endsWith(`.${z}`)) return n;
  return `${n}.${z}`;
}

/** Whether fqdn is the zone's domain or a name below it (a wildcard counts by what it covers). */
export function inZone(fqdn: string, zone: string): boolean {
  const n = fqdn.replace(/^\*\./, "");
  const z = normDomain(zone);
  return n === z || n.endsWith(`.${z}`);
}

export function validateRecord(f: RecordForm, zone: string): RecordErrors {
  const e: RecordErrors = {};
  const fqdn = recordFQDN(f.name, zone);
  if (!f.name.trim()) e.name = `Give the name: a label such as www, ${normDomain(zone)} itself, or @ for it`;
  else {
    const d = domainError(fqdn);
    if (d) e.name = d;
    else if (!inZone(fqdn, zone)) e.name = `${fqdn} is not in the zone ${normDomain(zone)}; give its domain or a name below it`;
  }
  const c = f.content.trim();
  if (!c) e.content = f.type === "CNAME" ? "Give the domain the name is an alias of" : `Give the ${f.type === "A" ? "IPv4" : "IPv6"} address`;
  else if (c.length > MAX_CONTENT) e.content = `At most ${MAX_CONTENT} characters`;
  else if (f.type === "A") {
    if (!parseIPv4(c)) e.content = parseIPv6(c) ? `An A record holds an IPv4 address; ${c} is IPv6 (use AAAA)` : `"${c}" is not an IPv4 address`;
  } else if (f.type === "AAAA") {
    if (c.includes("%") || !parseIPv6(c)) e.content = parseIPv4(c) ? `An AAAA record holds an IPv6 address; ${c} is IPv4 (use A)` : `"${c}" is not an IPv6 address`;
  } else {
    const d = plainDomainError(c);
    if (d) e.content = d;
    else if (!e.name && normDomain(c) === fqdn) e.content = `A CNAME record cannot point at its own name ${fqdn}`;
  }
  const t = String(f.ttl).trim();
  const n = Number(t);
  if (t === "" || !Number.isInteger(n)) e.ttl = "The TTL is a whole number of seconds";
  else if (n < 0 || n > MAX_TTL) e.ttl = `The TTL ${n} is outside 0-${MAX_TTL} seconds`;
  return e;
}

export function recordRequest(f: RecordForm, zone: string): DNSRecordRequest {
  const c = f.content.trim();
  return { name: recordFQDN(f.name, zone), type: f.type, content: f.type === "CNAME" ? normDomain(c) : c, ttl: Number(String(f.ttl).trim()) };
}

export function fromRecord(r: DNSRecord): RecordForm {
  return { name: r.name, type: r.type, content: r.content, ttl: r.ttl };
}

export function recordErrorField(err: unknown): RecordField | "form" {
  return fieldOf(err, { name: "name", type: "type", content: "content", ttl: "ttl" } as const) ?? "form";
}
