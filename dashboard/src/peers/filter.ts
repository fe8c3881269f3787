/**
 * Client-side search, filter and sort of the peer list (pure functions, so
 * they are unit-tested and fast enough for 5,000 peers on every keystroke).
 */
import type { Peer } from "../api/client";

export type StatusFilter = "all" | "online" | "offline" | "pending" | "expired";
export type SortKey = "name" | "ip" | "connected" | "last_seen" | "os" | "version";
export type SortDir = "asc" | "desc";

export interface PeerQuery {
  /** Free text: matched against name, hostname, DNS label, IPs, OS, version, user and group names. */
  search: string;
  status: StatusFilter;
  /** Group ID to require, or "" for any. */
  group: string;
  /** OS family ("linux", "windows", "darwin", ...) or "" for any. */
  os: string;
  sort: SortKey;
  dir: SortDir;
}

export const defaultQuery: PeerQuery = { search: "", status: "all", group: "", os: "", sort: "name", dir: "asc" };

/** The first word of the OS string, lower-cased: "linux", "windows", "darwin"... */
export function osFamily(os: string): string {
  const w = os.trim().split(/\s+/)[0] ?? "";
  return w.toLowerCase();
}

/** Orders IPv4 addresses numerically (100.64.0.10 after 100.64.0.9); other strings after them. */
export function ipKey(ip: string): number {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  if (!m) return Number.MAX_SAFE_INTEGER;
  return ((Number(m[1]) * 256 + Number(m[2])) * 256 + Number(m[3])) * 256 + Number(m[4]);
}

function haystack(p: Peer): string {
  const parts = [p.name, p.hostname, p.dns_label, p.ip, p.connection_ip, p.os, p.version, p.user_id, p.serial_number];
  for (const g of p.groups) parts.push(g.name);
  for (const l of p.extra_dns_labels ?? []) parts.push(l);
  return parts.join("\u0000").toLowerCase();
}

// The search text of each peer object, computed once per object.
const hayCache = new WeakMap<Peer, string>();
function hay(p: Peer): string {
  let h = hayCache.get(p);
  if (h === undefined) {
    h = haystack(p);
    hayCache.set(p, h);
  }
  return h;
}

/**
 * Computes the search text of every peer ahead of the first search, so that
 * a keystroke after a list refresh (new peer objects every 2 s) only scans.
 */
export function prepareSearch(peers: readonly Peer[]): void {
  for (const p of peers) hay(p);
}

export function matchesStatus(p: Peer, s: StatusFilter): boolean {
  switch (s) {
    case "all":
      return true;
    case "online":
      return p.connected;
    case "offline":
      return !p.connected;
    case "pending":
      return p.approval_required;
    case "expired":
      return p.login_expired;
  }
}

/** Peers matching q's search and filters (not sorted). Every search word must match. */
export function filterPeers(peers: readonly Peer[], q: Pick<PeerQuery, "search" | "status" | "group" | "os">): Peer[] {
  const words = q.search.toLowerCase().split(/\s+/).filter(Boolean);
  return peers.filter((p) => {
    if (!matchesStatus(p, q.status)) return false;
    if (q.group && !p.groups.some((g) => g.id === q.group)) return false;
    if (q.os && osFamily(p.os) !== q.os) return false;
    if (words.length === 0) return true;
    const h = hay(p);
    return words.every((w) => h.includes(w));
  });
}

const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

function time(s: string): number {
  const t = Date.parse(s);
  return Number.isNaN(t) ? 0 : t;
}

function compare(a: Peer, b: Peer, key: SortKey): number {
  switch (key) {
    case "name":
      return collator.compare(a.name, b.name);
    case "ip":
      return ipKey(a.ip) - ipKey(b.ip) || collator.compare(a.ip, b.ip);
    case "connected":
      // Online first, then the most recently seen.
      return Number(b.connected) - Number(a.connected) || time(b.last_seen) - time(a.last_seen);
    case "last_seen":
      // A connected peer is seen now.
      return (a.connected ? Infinity : time(a.last_seen)) - (b.connected ? Infinity : time(b.last_seen)) || 0;
    case "os":
      return collator.compare(a.os, b.os);
    case "version":
      return collator.compare(a.version, b.version);
  }
}

/** A sorted copy; ties are broken by name, then ID, so the order is stable across refreshes. */
export function sortPeers(peers: readonly Peer[], key: SortKey, dir: SortDir): Peer[] {
  const sign = dir === "asc" ? 1 : -1;
  return [...peers].sort((a, b) => {
    const c = compare(a, b, key);
    if (c !== 0 && !Number.isNaN(c)) return sign * c;
    return collator.compare(a.name, b.name) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  });
}

/** Filter then sort. */
export function queryPeers(peers: readonly Peer[], q: PeerQuery): Peer[] {
  return sortPeers(filterPeers(peers, q), q.sort, q.dir);
}

/** The OS families present, for the filter's choices. */
export function osFamilies(peers: readonly Peer[]): string[] {
  return [...new Set(peers.map((p) => osFamily(p.os)).filter(Boolean))].sort();
}

/** "online", "2 minutes ago", "3 days ago", "never". */
export function lastSeenText(p: Pick<Peer, "connected" | "last_seen">, now: number = Date.now()): string {
  if (p.connected) return "online";
  const t = Date.parse(p.last_seen);
  if (Number.isNaN(t) || t <= 0 || new Date(t).getUTCFullYear() < 2000) return "never";
  const s = Math.max(0, Math.round((now - t) / 1000));
  const unit = (n: number, u: string) => `${n} ${u}${n === 1 ? "" : "s"} ago`;
  if (s < 60) return unit(s, "second");
  if (s < 3600) return unit(Math.floor(s / 60), "minute");
  if (s < 86400) return unit(Math.floor(s / 3600), "hour");
  return unit(Math.floor(s / 86400), "day");
}
