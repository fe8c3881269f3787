/**
 * The routing forms (classic routes, networks, network resources and
 * network routers): what the admin types, the checks before anything is
 * sent (the server's rules, so a refusal is rare), the translation to and
 * from the API's shapes, and where a server refusal belongs.
 */
import { fieldOf } from "../api/fielderror";
import type { Schemas } from "../api/client";
import { domainError, isDefaultRoute, parsePrefix, resourceType } from "./net";

export type Route = Schemas["Route"];
export type RouteRequest = Schemas["RouteRequest"];
export type Network = Schemas["Network"];
export type NetworkResource = Schemas["NetworkResource"];
export type NetworkRouter = Schemas["NetworkRouter"];

export const MAX_NET_ID = 40;
export const MAX_NAME = 255;
export const MIN_METRIC = 1;
export const MAX_METRIC = 9999;
export const MAX_DOMAINS = 32;

/** Whether a route goes through one peer or the peers of groups. */
export type RouterKind = "peer" | "groups";

function metricError(m: number | string): string {
  const n = typeof m === "number" ? m : Number(String(m).trim());
  if (String(m).trim() === "" || !Number.isInteger(n)) return "The metric is a whole number from 1 to 9999";
  if (n < MIN_METRIC || n > MAX_METRIC) return `The metric ${n} is outside 1-9999`;
  return "";
}

function routerError(kind: RouterKind, peer: string, groups: string[]): string {
  if (kind === "peer") return peer ? "" : "Pick the routing peer";
  return groups.length ? "" : "Pick at least one group of routing peers";
}

/** Splits a list typed one per line or separated by commas or spaces. */
export function splitList(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);
}

// ---- classic routes ----

export interface RouteForm {
  networkId: string;
  description: string;
  enabled: boolean;
  routerKind: RouterKind;
  peer: string;
  peerGroups: string[];
  destKind: "network" | "domains";
  network: string;
  /** Domains, one per line (or separated by commas). */
  domains: string;
  keepRoute: boolean;
  metric: number | string;
  masquerade: boolean;
  groups: string[];
  accessControlGroups: string[];
  skipAutoApply: boolean;
}

export type RouteField = "networkId" | "description" | "router" | "destination" | "metric" | "groups" | "accessControlGroups" | "skipAutoApply";
export type RouteErrors = Partial<Record<RouteField | "form", string>>;

export function newRoute(): RouteForm {
  return {
    networkId: "",
    description: "",
    enabled: true,
    routerKind: "peer",
    peer: "",
    peerGroups: [],
    destKind: "network",
    network: "",
    domains: "",
    keepRoute: true,
    metric: 9999,
    masquerade: true,
    groups: [],
    accessControlGroups: [],
    skipAutoApply: false,
  };
}

/** Whether the form routes everything (0.0.0.0/0 or ::/0): an exit node. */
export function isExitNodeForm(f: RouteForm): boolean {
  return f.destKind === "network" && isDefaultRoute(f.network);
}

/** The form's check before sending: an empty result means it may go. */
export function validateRoute(f: RouteForm): RouteErrors {
  const e: RouteErrors = {};
  const id = f.networkId.trim();
  if (!id) e.networkId = "A route needs a network identifier";
  else if ([...id].length > MAX_NET_ID) e.networkId = `At most ${MAX_NET_ID} characters (this has ${[...id].length})`;
  const r = routerError(f.routerKind, f.peer, f.peerGroups);
  if (r) e.router = r;
  if (f.destKind === "network") {
    if (!f.network.trim()) e.destination = "Give the network to route, e.g. 10.64.0.0/24 (0.0.0.0/0 for an exit node)";
    else {
      const p = parsePrefix(f.network);
      if (typeof p === "string") e.destination = p;
    }
  } else {
    const ds = splitList(f.domains);
    if (ds.length === 0) e.destination = "Give at least one domain";
    else if (ds.length > MAX_DOMAINS) e.destination = `${ds.length} domains; a route takes at most ${MAX_DOMAINS}`;
    else {
      const bad = ds.map(domainError).find(Boolean);
      if (bad) e.destination = bad;
    }
  }
  const m = metricError(f.metric);
  if (m) e.metric = m;
  if (f.groups.length === 0) e.groups = "Pick the distribution groups: their peers get the route";
  if (f.skipAutoApply && !isExitNodeForm(f)) e.skipAutoApply = "Only exit node routes (0.0.0.0/0 or ::/0) can skip auto-apply";
  return e;
}

/** The request for a valid form: one of peer/peer_groups, one of network/domains. */
export function routeRequest(f: RouteForm): RouteRequest {
  const out: RouteRequest = {
    network_id: f.networkId.trim(),
    description: f.description.trim(),
    enabled: f.enabled,
    metric: Number(f.metric),
    masquerade: f.masquerade,
    groups: f.groups,
    keep_route: f.destKind === "domains" ? f.keepRoute : false,
    access_control_groups: f.accessControlGroups,
  };
  if (f.routerKind === "peer") out.peer = f.peer;
  else out.peer_groups = f.peerGroups;
  if (f.destKind === "network") out.network = f.network.trim();
  else out.domains = splitList(f.domains);
  if (isExitNodeForm(f)) out.skip_auto_apply = f.skipAutoApply;
  return out;
}

/** The form for an existing route. */
export function fromRoute(r: Route): RouteForm {
  const domain = r.network_type === "Domain";
  return {
    networkId: r.network_id,
    description: r.description,
    enabled: r.enabled,
    routerKind: r.peer ? "peer" : "groups",
    peer: r.peer ?? "",
    peerGroups: r.peer_groups ?? [],
    destKind: domain ? "domains" : "network",
    network: domain ? "" : r.network,
    domains: domain ? r.domains.join("\n") : "",
    keepRoute: r.keep_route,
    metric: r.metric,
    masquerade: r.masquerade,
    groups: r.groups,
    accessControlGroups: r.access_control_groups ?? [],
    skipAutoApply: r.skip_auto_apply ?? false,
  };
}

/** Whether a route is an exit node (routes 0.0.0.0/0 or ::/0). */
export function isExitNode(r: Route): boolean {
  return r.network_type !== "Domain" && isDefaultRoute(r.network);
}

/** The route field a server refusal names ("metric: ...", "peer_groups: ..."), or "form". */
export function routeErrorField(err: unknown): RouteField | "form" {
  return (
    fieldOf(err, {
      network_id: "networkId",
      description: "description",
      peer: "router",
      peer_groups: "router",
      network: "destination",
      domains: "destination",
      metric: "metric",
      groups: "groups",
      access_control_groups: "accessControlGroups",
      skip_auto_apply: "skipAutoApply",
    } as const) ?? "form"
  );
}

// ---- networks ----

export interface NetworkForm {
  name: string;
  description: string;
}
export type NetworkErrors = Partial<Record<"name" | "description" | "form", string>>;

function nameError(what: string, name: string): string {
  const n = name.trim();
  if (!n) return `A ${what} needs a name`;
  if (n.length > MAX_NAME) return `A name has at most ${MAX_NAME} characters`;
  return "";
}

export function validateNetwork(f: NetworkForm): NetworkErrors {
  const n = nameError("network", f.name);
  return n ? { name: n } : {};
}

export function networkRequest(f: NetworkForm): Schemas["NetworkRequest"] {
  return { name: f.name.trim(), description: f.description.trim() };
}

// ---- network resources ----

export interface ResourceForm {
  name: string;
  description: string;
  address: string;
  enabled: boolean;
  groups: string[];
}
export type ResourceErrors = Partial<Record<"name" | "description" | "address" | "groups" | "form", string>>;

export function newResource(): ResourceForm {
  return { name: "", description: "", address: "", enabled: true, groups: [] };
}

export function validateResource(f: ResourceForm): ResourceErrors {
  const e: ResourceErrors = {};
  const n = nameError("resource", f.name);
  if (n) e.name = n;
  const t = resourceType(f.address);
  if ("error" in t) e.address = t.error;
  return e;
}

export function resourceRequest(f: ResourceForm): Schemas["NetworkResourceRequest"] {
  return { name: f.name.trim(), description: f.description.trim(), address: f.address.trim(), enabled: f.enabled, groups: f.groups };
}

export function fromResource(r: NetworkResource): ResourceForm {
  return { name: r.name, description: r.description ?? "", address: r.address, enabled: r.enabled, groups: r.groups.map((g) => g.id) };
}

export function resourceErrorField(err: unknown): "name" | "description" | "address" | "groups" | "form" {
  return fieldOf(err, { name: "name", description: "description", address: "address", groups: "groups", group: "groups" } as const) ?? "form";
}

// ---- network routers ----

export interface RouterForm {
  kind: RouterKind;
  peer: string;
  peerGroups: string[];
  metric: number | string;
  masquerade: boolean;
  enabled: boolean;
}
export type RouterErrors = Partial<Record<"router" | "metric" | "form", string>>;

export function newRouter(): RouterForm {
  return { kind: "peer", peer: "", peerGroups: [], metric: 9999, masquerade: true, enabled: true };
}

export function validateRouter(f: RouterForm): RouterErrors {
  const e: RouterErrors = {};
  const r = routerError(f.kind, f.peer, f.peerGroups);
  if (r) e.router = r;
  const m = metricError(f.metric);
  if (m) e.metric = m;
  return e;
}

export function routerRequest(f: RouterForm): Schemas["NetworkRouterRequest"] {
  const out: Schemas["NetworkRouterRequest"] = { metric: Number(f.metric), masquerade: f.masquerade, enabled: f.enabled };
  if (f.kind === "peer") out.peer = f.peer;
  else out.peer_groups = f.peerGroups;
  return out;
}

export function fromRouter(r: NetworkRouter): RouterForm {
  return { kind: r.peer ? "peer" : "groups", peer: r.peer, peerGroups: r.peer_groups ?? [], metric: r.metric, masquerade: r.masquerade, enabled: r.enabled };
}

export function routerErrorField(err: unknown): "router" | "metric" | "form" {
  return fieldOf(err, { peer: "router", peer_groups: "router", metric: "metric" } as const) ?? "form";
}

// ---- what a peer serves ----

export interface Served {
  kind: "route" | "router";
  /** The route's network_id, or the network's name. */
  name: string;
  /** Route ID, or the network ID (the router's page). */
  id: string;
  /** What is routed: a prefix, domains, or the network's resources. */
  what: string;
  /** "as itself" or "through group X". */
  how: string;
  enabled: boolean;
  exitNode: boolean;
}

/**
 * The routes and network routers a peer serves: those naming the peer, or
 * a group the peer is in (by group ID).
 */
export function servedBy(
  peerId: string,
  peerGroups: { id: string; name: string }[],
  routes: Route[],
  networks: Network[],
  routers: (NetworkRouter & { network_id?: string })[],
): Served[] {
  const groupName = new Map(peerGroups.map((g) => [g.id, g.name]));
  const how = (peer: string | undefined, groups: string[] | undefined): string | null => {
    if (peer && peer === peerId) return "as its routing peer";
    const via = (groups ?? []).filter((g) => groupName.has(g));
    if (via.length) return `through group ${via.map((g) => groupName.get(g)).join(", ")}`;
    return null;
  };
  const out: Served[] = [];
  for (const r of routes) {
    const h = how(r.peer, r.peer_groups);
    if (!h) continue;
    const what = r.network_type === "Domain" ? r.domains.join(", ") : r.network;
    out.push({ kind: "route", name: r.network_id, id: r.id, what, how: h, enabled: r.enabled, exitNode: isExitNode(r) });
  }
  // A router of /api/networks/routers does not say its network; find it by ID.
  const netOf = new Map<string, Network>();
  for (const n of networks) for (const rid of n.routers) netOf.set(rid, n);
  for (const r of routers) {
    const h = how(r.peer, r.peer_groups);
    if (!h) continue;
    const n = netOf.get(r.id);
    const count = n?.resources.length ?? 0;
    out.push({
      kind: "router",
      name: n?.name ?? "(unknown network)",
      id: n?.id ?? "",
      what: `${count} resource${count === 1 ? "" : "s"}`,
      how: h,
      enabled: r.enabled,
      exitNode: false,
    });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}
