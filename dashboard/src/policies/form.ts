/**
 * The access policy editor's form: what the admin types, its checks
 * before anything is sent (the server's own rules, so a refusal is rare),
 * and its translation to and from the API's PolicyUpdate / Policy.
 */
import type { Schemas } from "../api/client";

export type Policy = Schemas["Policy"];
export type PolicyUpdate = Schemas["PolicyUpdate"];
export type RuleProtocol = Schemas["PolicyRule"]["protocol"];
export type SideKind = "groups" | "peer";

export interface RuleForm {
  /** The rule's ID when it exists (kept so the server keeps it). */
  id: string;
  name: string;
  enabled: boolean;
  action: "accept" | "drop";
  protocol: RuleProtocol;
  /** "22, 443, 8000-8100"; empty: every port. */
  ports: string;
  bidirectional: boolean;
  sourceKind: SideKind;
  sources: string[];
  sourcePeer: string;
  destinationKind: SideKind;
  destinations: string[];
  destinationPeer: string;
}

export interface PolicyForm {
  name: string;
  description: string;
  enabled: boolean;
  postureChecks: string[];
  rules: RuleForm[];
}

export type RuleErrors = Partial<Record<"name" | "ports" | "sources" | "destinations" | "protocol", string>>;
export interface PolicyErrors {
  name?: string;
  description?: string;
  postureChecks?: string;
  rules?: string;
  rule?: RuleErrors[];
}

export function newRule(): RuleForm {
  return {
    id: "",
    name: "",
    enabled: true,
    action: "accept",
    protocol: "all",
    ports: "",
    bidirectional: true,
    sourceKind: "groups",
    sources: [],
    sourcePeer: "",
    destinationKind: "groups",
    destinations: [],
    destinationPeer: "",
  };
}

export function newPolicy(): PolicyForm {
  return { name: "", description: "", enabled: true, postureChecks: [], rules: [newRule()] };
}

export interface ParsedPorts {
  ports: number[];
  ranges: { start: number; end: number }[];
}

/**
 * Reads "22, 443 8000-8100": single ports and ranges, separated by commas
 * or spaces. Each port is 1-65535 and each range's start is at most its
 * end. Returns an error message instead when the text is not that.
 */
export function parsePorts(text: string): ParsedPorts | string {
  const out: ParsedPorts = { ports: [], ranges: [] };
  const items = text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);
  const num = (s: string): number | string => {
    if (!/^\d+$/.test(s)) return `"${s}" is not a port number`;
    const n = Number(s);
    if (n < 1 || n > 65535) return `port ${n} is outside 1-65535`;
    return n;
  };
  for (const it of items) {
    const m = /^(\d+)\s*-\s*(\d+)$/.exec(it) ?? /^(.+?)-(.+)$/.exec(it);
    if (m) {
      const s = num(m[1] ?? "");
      const e = num(m[2] ?? "");
      if (typeof s === "string") return s;
      if (typeof e === "string") return e;
      if (s > e) return `range ${s}-${e} starts after it ends`;
      out.ranges.push({ start: s, end: e });
    } else {
      const n = num(it);
      if (typeof n === "string") return n;
      out.ports.push(n);
    }
  }
  return out;
}

/** The form's check before sending: an empty result means it may go. */
export function validatePolicy(f: PolicyForm): PolicyErrors {
  const e: PolicyErrors = {};
  const name = f.name.trim();
  if (!name) e.name = "A policy needs a name";
  else if (name.length > 255) e.name = "A name has at most 255 characters";
  if (f.rules.length === 0) e.rules = "A policy needs at least one rule";
  const rules: RuleErrors[] = f.rules.map((r) => {
    const re: RuleErrors = {};
    if (r.name.trim().length > 255) re.name = "A name has at most 255 characters";
    if (r.ports.trim()) {
      if (r.protocol !== "tcp" && r.protocol !== "udp") {
        re.ports = "Ports need protocol TCP or UDP";
      } else {
        const p = parsePorts(r.ports);
        if (typeof p === "string") re.ports = p;
      }
    }
    if (r.sourceKind === "groups" ? r.sources.length === 0 : !r.sourcePeer) {
      re.sources = r.sourceKind === "groups" ? "Pick at least one source group" : "Pick the source peer";
    }
    if (r.destinationKind === "groups" ? r.destinations.length === 0 : !r.destinationPeer) {
      re.destinations = r.destinationKind === "groups" ? "Pick at least one destination group" : "Pick the destination peer";
    }
    return re;
  });
  if (rules.some((r) => Object.keys(r).length > 0)) e.rule = rules;
  return e;
}

export function hasErrors(e: PolicyErrors): boolean {
  return Object.keys(e).length > 0;
}

type RuleUpdate = Schemas["PolicyRuleUpdate"];

/**
 * The request for a valid form. Single ports go as ports; when the rule
 * also has ranges, they all go as port_ranges (the server takes one or
 * the other in a rule; port 22 is the range 22-22).
 */
export function toRequest(f: PolicyForm): PolicyUpdate {
  return {
    name: f.name.trim(),
    description: f.description.trim(),
    enabled: f.enabled,
    source_posture_checks: f.postureChecks,
    rules: f.rules.map((r): RuleUpdate => {
      const out: RuleUpdate = {
        name: r.name.trim() || f.name.trim(),
        enabled: r.enabled,
        action: r.action,
        protocol: r.protocol,
        bidirectional: r.bidirectional,
      };
      if (r.id) out.id = r.id;
      if (r.sourceKind === "peer") out.sourceResource = { id: r.sourcePeer, type: "peer" };
      else out.sources = r.sources;
      if (r.destinationKind === "peer") out.destinationResource = { id: r.destinationPeer, type: "peer" };
      else out.destinations = r.destinations;
      const p = r.protocol === "tcp" || r.protocol === "udp" ? parsePorts(r.ports) : null;
      if (p && typeof p !== "string") {
        if (p.ranges.length === 0 && p.ports.length > 0) out.ports = p.ports.map(String);
        else if (p.ranges.length > 0) out.port_ranges = [...p.ports.map((n) => ({ start: n, end: n })), ...p.ranges];
      }
      return out;
    }),
  };
}

/** The form for an existing policy. */
export function fromPolicy(p: Policy): PolicyForm {
  return {
    name: p.name,
    description: p.description,
    enabled: p.enabled,
    postureChecks: [...p.source_posture_checks],
    rules: p.rules.map((r) => ({
      id: r.id,
      name: r.name,
      enabled: r.enabled,
      action: r.action,
      protocol: r.protocol,
      ports: [...(r.ports ?? []), ...(r.port_ranges ?? []).map((x) => (x.start === x.end ? `${x.start}` : `${x.start}-${x.end}`))].join(", "),
      bidirectional: r.bidirectional,
      sourceKind: r.sourceResource ? "peer" : "groups",
      sources: (r.sources ?? []).map((g) => g.id),
      sourcePeer: r.sourceResource?.id ?? "",
      destinationKind: r.destinationResource ? "peer" : "groups",
      destinations: (r.destinations ?? []).map((g) => g.id),
      destinationPeer: r.destinationResource?.id ?? "",
    })),
  };
}

/**
 * Where a server refusal belongs: the rule control its message names, or
 * the form. The server's messages name the field ("ports need protocol tcp
 * or udp", "port range 9-1", "group \"x\" does not exist", "posture check
 * ...", "a name must have ...").
 */
export function placeServerError(
  message: string,
  ruleCount: number,
): { field: "name" | "postureChecks" | "form" } | { rule: number; field: keyof RuleErrors } {
  const m = message.toLowerCase();
  const rule = ruleCount === 1 ? 0 : -1;
  if (m.includes("posture check")) return { field: "postureChecks" };
  if (rule >= 0) {
    if (m.includes("port")) return { rule, field: "ports" };
    if (m.includes("protocol")) return { rule, field: "protocol" };
    if (m.startsWith("source") || m.includes("source")) return { rule, field: "sources" };
    if (m.startsWith("destination") || m.includes("destination")) return { rule, field: "destinations" };
    if (m.includes("each side of a rule")) return { rule, field: "sources" };
  }
  if (m.includes("name")) return { field: "name" };
  return { field: "form" };
}
