/**
 * Access computation in the browser: which peer may open which connection
 * to which other peer under the account's groups, policies and posture
 * checks, as the REST API lists them. It mirrors the server's network map
 * (management/networkmap) and the agent's packet filter (client/acl):
 *
 *  - only enabled rules of enabled policies count;
 *  - a rule side is its groups' members or a single peer resource; the All
 *    group holds every peer; a peer pending approval is in no group and no
 *    rule names it; peers whose login expired or whose user is blocked take
 *    no part at all;
 *  - a rule lets its sources connect to its destinations, and the
 *    destinations to the sources too when bidirectional;
 *  - ports and ranges narrow a tcp/udp rule; a rule without ports matches
 *    every port of its protocol; "all" matches every protocol;
 *  - a drop rule that matches wins over any accept rule (both ends of the
 *    connection apply it);
 *  - an accept/all/bidirectional rule from All to All in a policy without
 *    posture checks admits everything (drop rules still apply);
 *  - a policy's posture checks keep only the source peers that pass them,
 *    which the browser cannot tell (peers' metadata is not in the API): such
 *    a rule makes the answer "depends on posture check ...". A check that
 *    no longer exists fails closed: the rule applies to nobody.
 *
 * It does not know temporary-access peers (the API does not list them).
 */
import type { Schemas } from "../api/client";

export type Protocol = "tcp" | "udp" | "icmp";

export type AccessPeer = Pick<Schemas["Peer"], "id" | "name" | "approval_required" | "login_expired" | "user_id">;
export interface AccessGroup {
  id: string;
  name: string;
  peers: { id: string }[];
}
export type AccessRule = Pick<
  Schemas["PolicyRule"],
  | "id"
  | "name"
  | "enabled"
  | "action"
  | "bidirectional"
  | "protocol"
  | "ports"
  | "port_ranges"
  | "sourceResource"
  | "destinationResource"
> & { sources?: { id: string }[]; destinations?: { id: string }[] };
export interface AccessPolicy {
  id: string;
  name: string;
  enabled: boolean;
  source_posture_checks: string[];
  rules: AccessRule[];
}

export interface AccessInput {
  peers: readonly AccessPeer[];
  groups: readonly AccessGroup[];
  policies: readonly AccessPolicy[];
  /** The account's posture checks; undefined: assume every named check exists. */
  postureChecks?: readonly { id: string; name: string }[];
  /** Users whose peers take no part (GET /api/users is_blocked). */
  blockedUsers?: ReadonlySet<string>;
}

/** A rule as the answers name it. */
export interface RuleRef {
  policyId: string;
  policyName: string;
  ruleId: string;
  ruleName: string;
  action: "accept" | "drop";
  protocol: "all" | "tcp" | "udp" | "icmp";
  ports: string; // "all ports", "22, 443", "8000-8100"
  bidirectional: boolean;
  /** Names of the policy's posture checks: the rule holds only for sources that pass them. */
  postureChecks: string[];
  /** The rule is the All-to-All default that admits everything. */
  allowAll: boolean;
}

interface Resolved {
  ref: RuleRef;
  rule: AccessRule;
  src: Set<string>;
  dst: Set<string>;
}

export interface AccessIndex {
  peers: Map<string, AccessPeer>;
  /** Why a peer takes no part (pending, expired, blocked); absent: it does. */
  excluded: Map<string, string>;
  allowAll: RuleRef | null;
  rules: Resolved[];
}

/** The name the API gives the built-in group of every peer. */
export const ALL_GROUP = "All";

export function portsText(r: Pick<AccessRule, "ports" | "port_ranges">): string {
  const parts = [...(r.ports ?? []), ...(r.port_ranges ?? []).map((p) => (p.start === p.end ? `${p.start}` : `${p.start}-${p.end}`))];
  return parts.length ? parts.join(", ") : "all ports";
}

/** "tcp 22, 443", "all traffic", "icmp", "udp (all ports)". */
export function ruleTrafficText(r: Pick<RuleRef, "protocol" | "ports">): string {
  if (r.protocol === "all") return "all traffic";
  if (r.protocol === "icmp") return "icmp";
  return r.ports === "all ports" ? `${r.protocol} (all ports)` : `${r.protocol} ${r.ports}`;
}

/** Prepares the account's state once for many questions. */
export function buildIndex(input: AccessInput): AccessIndex {
  const peers = new Map(input.peers.map((p) => [p.id, p]));
  const excluded = new Map<string, string>();
  for (const p of input.peers) {
    if (p.login_expired) excluded.set(p.id, "its login expired");
    else if (p.user_id && input.blockedUsers?.has(p.user_id)) excluded.set(p.id, "its user is blocked");
    else if (p.approval_required) excluded.set(p.id, "it is pending approval");
  }
  const every = new Set(input.peers.filter((p) => !excluded.has(p.id)).map((p) => p.id));
  const groups = new Map(input.groups.map((g) => [g.id, g]));
  const isAll = (id: string) => groups.get(id)?.name === ALL_GROUP;
  const members = (id: string): string[] => {
    const g = groups.get(id);
    if (!g) return [];
    if (g.name === ALL_GROUP) return [...every];
    return g.peers.map((p) => p.id).filter((p) => every.has(p));
  };
  const side = (gs: { id: string }[] | undefined, res: AccessRule["sourceResource"]): Set<string> => {
    if (res) return new Set(res.type === "peer" && every.has(res.id) ? [res.id] : []);
    const out = new Set<string>();
    for (const g of gs ?? []) for (const id of members(g.id)) out.add(id);
    return out;
  };
  const checkName = new Map((input.postureChecks ?? []).map((c) => [c.id, c.name]));

  let allowAll: RuleRef | null = null;
  const rules: Resolved[] = [];
  for (const pol of input.policies) {
    if (!pol.enabled) continue;
    const checks = pol.source_posture_checks ?? [];
    const missing = input.postureChecks !== undefined && checks.some((c) => !checkName.has(c));
    for (const r of pol.rules) {
      if (!r.enabled) continue;
      const ref: RuleRef = {
        policyId: pol.id,
        policyName: pol.name,
        ruleId: r.id,
        ruleName: r.name,
        action: r.action,
        protocol: r.protocol,
        ports: portsText(r),
        bidirectional: r.bidirectional,
        postureChecks: checks.map((c) => checkName.get(c) ?? c),
        allowAll: false,
      };
      if (
        checks.length === 0 &&
        r.action === "accept" &&
        r.protocol === "all" &&
        r.bidirectional &&
        !r.sourceResource &&
        !r.destinationResource &&
        (r.sources ?? []).some((g) => isAll(g.id)) &&
        (r.destinations ?? []).some((g) => isAll(g.id))
      ) {
        allowAll ??= { ...ref, allowAll: true };
        continue;
      }
      // A posture check that no longer exists fails closed: no source passes.
      const src = missing ? new Set<string>() : side(r.sources, r.sourceResource);
      rules.push({ ref, rule: r, src, dst: side(r.destinations, r.destinationResource) });
    }
  }
  return { peers, excluded, allowAll, rules };
}

/**
 * Which peers must pass the rule's posture checks for the rule to carry a
 * connection from a to b: [] when it does not carry it at all.
 */
function carriers(r: Resolved, a: string, b: string): string[] {
  if (a === b) return [];
  const out: string[] = [];
  if (r.src.has(a) && r.dst.has(b)) out.push(a);
  if (r.rule.bidirectional && r.src.has(b) && r.dst.has(a)) out.push(b);
  return out;
}

function trafficMatches(r: AccessRule, proto: Protocol, port: number | undefined): boolean {
  if (r.protocol !== "all" && r.protocol !== proto) return false;
  const ports = r.ports ?? [];
  const ranges = r.port_ranges ?? [];
  if (ports.length === 0 && ranges.length === 0) return true;
  if (proto === "icmp" || port === undefined) return false;
  return ports.some((p) => Number(p) === port) || ranges.some((pr) => port >= pr.start && port <= pr.end);
}

/** A rule that applies to a pair of peers, and whose posture it depends on. */
export interface Applied {
  rule: RuleRef;
  /** Peers one of which must pass the rule's posture checks; [] when it has none. */
  postureOf: string[];
}

function applied(r: Resolved, via: string[]): Applied {
  return { rule: r.ref, postureOf: r.ref.postureChecks.length ? via : [] };
}

export type Verdict =
  | { kind: "allowed"; by: Applied; message: string }
  | { kind: "denied"; by: Applied | null; message: string; others: RuleRef[] }
  | { kind: "depends"; accept: Applied | null; drop: Applied | null; message: string };

function name(ix: AccessIndex, id: string): string {
  return ix.peers.get(id)?.name ?? id;
}

function byText(a: Applied): string {
  return a.rule.allowAll
    ? `policy "${a.rule.policyName}" (all peers to all peers)`
    : `policy "${a.rule.policyName}" rule "${a.rule.ruleName}"`;
}

function postureText(ix: AccessIndex, a: Applied): string {
  const who = a.postureOf.map((id) => name(ix, id)).join(" or ");
  return `${who} passes posture check${a.rule.postureChecks.length > 1 ? "s" : ""} ${a.rule.postureChecks.map((c) => `"${c}"`).join(", ")}`;
}

/**
 * Can peer a open a connection to peer b with the protocol (and, for tcp
 * and udp, the destination port)?
 */
export function testAccess(ix: AccessIndex, a: string, b: string, proto: Protocol, port?: number): Verdict {
  const traffic = proto === "icmp" ? "icmp" : `${proto}/${port ?? "any"}`;
  const none = (message: string): Verdict => ({ kind: "denied", by: null, message, others: [] });
  if (!ix.peers.has(a)) return none(`peer ${a} does not exist`);
  if (!ix.peers.has(b)) return none(`peer ${b} does not exist`);
  if (a === b) return none("a peer does not connect to itself through the mesh");
  for (const id of [a, b]) {
    const why = ix.excluded.get(id);
    if (why) return none(`denied: ${name(ix, id)} takes no part in the network (${why})`);
  }
  const drops: Applied[] = [];
  const accepts: Applied[] = [];
  const others: RuleRef[] = [];
  for (const r of ix.rules) {
    const via = carriers(r, a, b);
    if (via.length === 0) continue;
    if (!trafficMatches(r.rule, proto, port)) {
      if (r.ref.action === "accept") others.push(r.ref);
      continue;
    }
    (r.ref.action === "drop" ? drops : accepts).push(applied(r, via));
  }
  const hardDrop = drops.find((d) => d.postureOf.length === 0);
  if (hardDrop) {
    return { kind: "denied", by: hardDrop, others: [], message: `denied by ${byText(hardDrop)} (drop ${ruleTrafficText(hardDrop.rule)})` };
  }
  const softDrop = drops[0] ?? null;
  const hardAccept = ix.allowAll ? { rule: ix.allowAll, postureOf: [] } : (accepts.find((x) => x.postureOf.length === 0) ?? null);
  if (hardAccept) {
    if (softDrop) {
      return {
        kind: "depends",
        accept: hardAccept,
        drop: softDrop,
        message: `allowed by ${byText(hardAccept)} unless ${postureText(ix, softDrop)}: then denied by ${byText(softDrop)}`,
      };
    }
    return { kind: "allowed", by: hardAccept, message: `allowed by ${byText(hardAccept)}` };
  }
  const softAccept = accepts[0];
  if (softAccept) {
    const tail = softDrop ? `, and ${byText(softDrop)} does not drop it (unless ${postureText(ix, softDrop)})` : "";
    return {
      kind: "depends",
      accept: softAccept,
      drop: softDrop,
      message: `depends on posture: allowed by ${byText(softAccept)} if ${postureText(ix, softAccept)}${tail}`,
    };
  }
  const hint = others.length
    ? `; rules between them allow only ${[...new Set(others.map((o) => ruleTrafficText(o)))].join("; ")}`
    : "";
  return {
    kind: "denied",
    by: null,
    others,
    message: `denied: no enabled rule lets ${name(ix, a)} reach ${name(ix, b)} on ${traffic}${hint}`,
  };
}

/** One peer on the other end, and the rules that connect the pair (one way). */
export interface Link {
  peer: string;
  accepts: Applied[];
  drops: Applied[];
}

function links(ix: AccessIndex, self: string, from: boolean): Link[] {
  if (!ix.peers.has(self) || ix.excluded.has(self)) return [];
  const out: Link[] = [];
  for (const id of ix.peers.keys()) {
    if (id === self || ix.excluded.has(id)) continue;
    const [a, b] = from ? [self, id] : [id, self];
    const l: Link = { peer: id, accepts: ix.allowAll ? [{ rule: ix.allowAll, postureOf: [] }] : [], drops: [] };
    for (const r of ix.rules) {
      const via = carriers(r, a, b);
      if (via.length) (r.ref.action === "drop" ? l.drops : l.accepts).push(applied(r, via));
    }
    if (l.accepts.length) out.push(l);
  }
  return out;
}

/** The peers that may open connections to self, each with the rules that let them. */
export function whoReaches(ix: AccessIndex, self: string): Link[] {
  return links(ix, self, false);
}

/** The peers self may open connections to, each with the rules that let it. */
export function whomReaches(ix: AccessIndex, self: string): Link[] {
  return links(ix, self, true);
}

/**
 * The peers of self's network map, as GET /api/peers/{id}/accessible-peers
 * lists them: every peer an enabled accept rule pairs with self in either
 * direction (a one-way rule shows each end to the other), all peers under
 * the All-to-All default, none while self is pending, expired or blocked.
 * conditional marks peers shown only if a posture check passes.
 */
export function mapPeers(ix: AccessIndex, self: string): { peer: string; conditional: boolean }[] {
  if (!ix.peers.has(self) || ix.excluded.has(self)) return [];
  const out: { peer: string; conditional: boolean }[] = [];
  for (const id of ix.peers.keys()) {
    if (id === self || ix.excluded.has(id)) continue;
    if (ix.allowAll) {
      out.push({ peer: id, conditional: false });
      continue;
    }
    let seen = false;
    let sure = false;
    for (const r of ix.rules) {
      if (r.ref.action !== "accept") continue;
      if ((r.src.has(self) && r.dst.has(id)) || (r.src.has(id) && r.dst.has(self))) {
        seen = true;
        if (r.ref.postureChecks.length === 0) {
          sure = true;
          break;
        }
      }
    }
    if (seen) out.push({ peer: id, conditional: !sure });
  }
  return out;
}
