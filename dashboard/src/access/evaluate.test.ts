import { describe, expect, it } from "vitest";
import {
  buildIndex,
  mapPeers,
  portsText,
  testAccess,
  whomReaches,
  whoReaches,
  type AccessGroup,
  type AccessInput,
  type AccessPeer,
  type AccessPolicy,
  type AccessRule,
  type Protocol,
} from "./evaluate";

const peer = (id: string, o: Partial<AccessPeer> = {}): AccessPeer => ({
  id,
  name: id,
  approval_required: false,
  login_expired: false,
  user_id: "",
  ...o,
});

// dev1, dev2 in devs; srv in servers; pend (pending approval) in devs and
// servers; old (login expired) in servers; bob's peer (blocked user) in devs.
const peers: AccessPeer[] = [
  peer("dev1"),
  peer("dev2"),
  peer("srv"),
  peer("pend", { approval_required: true }),
  peer("old", { login_expired: true }),
  peer("bobs", { user_id: "bob" }),
];
const groups: AccessGroup[] = [
  { id: "g-all", name: "All", peers: peers.map((p) => ({ id: p.id })) },
  { id: "g-devs", name: "devs", peers: [{ id: "dev1" }, { id: "dev2" }, { id: "pend" }, { id: "bobs" }] },
  { id: "g-srv", name: "servers", peers: [{ id: "srv" }, { id: "pend" }, { id: "old" }] },
  { id: "g-empty", name: "empty", peers: [] },
];
const checks = [{ id: "pc-ver", name: "agent >= 0.70" }];

let ruleN = 0;
function rule(o: Partial<AccessRule> & { from?: string[]; to?: string[] }): AccessRule {
  ruleN++;
  const { from, to, ...rest } = o;
  return {
    id: `r${ruleN}`,
    name: `rule${ruleN}`,
    enabled: true,
    action: "accept",
    bidirectional: false,
    protocol: "all",
    ...(from ? { sources: from.map((id) => ({ id })) } : {}),
    ...(to ? { destinations: to.map((id) => ({ id })) } : {}),
    ...rest,
  };
}
function policy(name: string, rules: AccessRule[], o: Partial<AccessPolicy> = {}): AccessPolicy {
  return { id: `pol-${name}`, name, enabled: true, source_posture_checks: [], rules, ...o };
}
const allToAll = () => policy("Default", [rule({ name: "All to All", from: ["g-all"], to: ["g-all"], bidirectional: true })]);
const ssh = (o: Partial<AccessRule> = {}) => rule({ name: "ssh", from: ["g-devs"], to: ["g-srv"], protocol: "tcp", ports: ["22"], ...o });

function input(policies: AccessPolicy[], o: Partial<AccessInput> = {}): AccessInput {
  return { peers, groups, policies, postureChecks: checks, blockedUsers: new Set(["bob"]), ...o };
}

interface Case {
  name: string;
  policies: AccessPolicy[];
  from: string;
  to: string;
  proto: Protocol;
  port?: number;
  want: "allowed" | "denied" | "depends";
  /** A part of the message, naming the rule (or reason). */
  says: string;
  extra?: Partial<AccessInput>;
}

const cases: Case[] = [
  { name: "all-to-all default", policies: [allToAll()], from: "dev1", to: "srv", proto: "udp", port: 53, want: "allowed", says: 'policy "Default" (all peers to all peers)' },
  { name: "no policy", policies: [], from: "dev1", to: "srv", proto: "icmp", want: "denied", says: "no enabled rule lets dev1 reach srv on icmp" },
  { name: "tcp/22 to servers", policies: [policy("SSH", [ssh()])], from: "dev1", to: "srv", proto: "tcp", port: 22, want: "allowed", says: 'policy "SSH" rule "ssh"' },
  { name: "other port refused, with a hint", policies: [policy("SSH", [ssh()])], from: "dev1", to: "srv", proto: "tcp", port: 80, want: "denied", says: "allow only tcp 22" },
  { name: "udp on a tcp rule", policies: [policy("SSH", [ssh()])], from: "dev1", to: "srv", proto: "udp", port: 22, want: "denied", says: "no enabled rule" },
  { name: "icmp on a port rule", policies: [policy("SSH", [ssh({ protocol: "tcp" })])], from: "dev1", to: "srv", proto: "icmp", want: "denied", says: "no enabled rule" },
  { name: "one-way: the reverse is denied", policies: [policy("SSH", [ssh()])], from: "srv", to: "dev1", proto: "tcp", port: 22, want: "denied", says: "no enabled rule lets srv reach dev1" },
  { name: "bidirectional: the reverse is allowed", policies: [policy("SSH", [ssh({ bidirectional: true })])], from: "srv", to: "dev1", proto: "tcp", port: 22, want: "allowed", says: 'rule "ssh"' },
  { name: "port range start", policies: [policy("Web", [ssh({ name: "web", ports: undefined, port_ranges: [{ start: 8000, end: 8100 }] })])], from: "dev2", to: "srv", proto: "tcp", port: 8000, want: "allowed", says: 'rule "web"' },
  { name: "port range end", policies: [policy("Web", [ssh({ name: "web", ports: undefined, port_ranges: [{ start: 8000, end: 8100 }] })])], from: "dev2", to: "srv", proto: "tcp", port: 8100, want: "allowed", says: 'rule "web"' },
  { name: "past the range", policies: [policy("Web", [ssh({ ports: undefined, port_ranges: [{ start: 8000, end: 8100 }] })])], from: "dev2", to: "srv", proto: "tcp", port: 8101, want: "denied", says: "allow only tcp 8000-8100" },
  { name: "tcp without ports: every port", policies: [policy("T", [ssh({ ports: [] })])], from: "dev1", to: "srv", proto: "tcp", port: 65535, want: "allowed", says: 'policy "T"' },
  { name: "protocol all covers icmp", policies: [policy("Ping", [rule({ name: "ping", from: ["g-devs"], to: ["g-srv"] })])], from: "dev1", to: "srv", proto: "icmp", want: "allowed", says: 'rule "ping"' },
  { name: "disabled rule", policies: [policy("SSH", [ssh({ enabled: false })])], from: "dev1", to: "srv", proto: "tcp", port: 22, want: "denied", says: "no enabled rule" },
  { name: "disabled policy", policies: [policy("SSH", [ssh()], { enabled: false })], from: "dev1", to: "srv", proto: "tcp", port: 22, want: "denied", says: "no enabled rule" },
  {
    name: "drop wins over all-to-all",
    policies: [allToAll(), policy("No SSH", [ssh({ name: "block ssh", action: "drop" })])],
    from: "dev1", to: "srv", proto: "tcp", port: 22, want: "denied", says: 'denied by policy "No SSH" rule "block ssh"',
  },
  {
    name: "drop on another port does not matter",
    policies: [allToAll(), policy("No SSH", [ssh({ action: "drop" })])],
    from: "dev1", to: "srv", proto: "tcp", port: 443, want: "allowed", says: "all peers to all peers",
  },
  {
    name: "drop wins over an accept listed first",
    policies: [policy("SSH", [ssh()]), policy("No SSH", [ssh({ name: "nope", action: "drop" })])],
    from: "dev1", to: "srv", proto: "tcp", port: 22, want: "denied", says: 'rule "nope"',
  },
  {
    name: "single peer resources",
    policies: [policy("One", [rule({ name: "one", sourceResource: { id: "dev2", type: "peer" }, destinationResource: { id: "srv", type: "peer" } })])],
    from: "dev2", to: "srv", proto: "icmp", want: "allowed", says: 'rule "one"',
  },
  {
    name: "single peer resource names only that peer",
    policies: [policy("One", [rule({ sourceResource: { id: "dev2", type: "peer" }, to: ["g-srv"] })])],
    from: "dev1", to: "srv", proto: "icmp", want: "denied", says: "no enabled rule",
  },
  { name: "pending destination", policies: [allToAll()], from: "dev1", to: "pend", proto: "icmp", want: "denied", says: "pend takes no part in the network (it is pending approval)" },
  { name: "pending source in a named group", policies: [policy("SSH", [ssh()])], from: "pend", to: "srv", proto: "tcp", port: 22, want: "denied", says: "pending approval" },
  { name: "expired login", policies: [allToAll()], from: "old", to: "dev1", proto: "icmp", want: "denied", says: "its login expired" },
  { name: "blocked user's peer", policies: [allToAll()], from: "dev1", to: "bobs", proto: "icmp", want: "denied", says: "its user is blocked" },
  { name: "blocked user not known: takes part", policies: [allToAll()], from: "dev1", to: "bobs", proto: "icmp", want: "allowed", says: "all peers", extra: { blockedUsers: new Set() } },
  {
    name: "posture check on the source",
    policies: [policy("SSH", [ssh()], { source_posture_checks: ["pc-ver"] })],
    from: "dev1", to: "srv", proto: "tcp", port: 22, want: "depends", says: 'allowed by policy "SSH" rule "ssh" if dev1 passes posture check "agent >= 0.70"',
  },
  {
    name: "posture check: the reverse of a bidirectional rule depends on the other end",
    policies: [policy("SSH", [ssh({ bidirectional: true })], { source_posture_checks: ["pc-ver"] })],
    from: "srv", to: "dev1", proto: "tcp", port: 22, want: "depends", says: "if dev1 passes",
  },
  {
    name: "a deleted posture check fails closed",
    policies: [policy("SSH", [ssh()], { source_posture_checks: ["pc-gone"] })],
    from: "dev1", to: "srv", proto: "tcp", port: 22, want: "denied", says: "no enabled rule",
  },
  {
    name: "all-to-all with posture checks is not the default",
    policies: [policy("Default", allToAll().rules, { source_posture_checks: ["pc-ver"] })],
    from: "dev1", to: "srv", proto: "icmp", want: "depends", says: "posture check",
  },
  {
    name: "one-way All to All is not allow-all but still allows its direction",
    policies: [policy("Out", [rule({ name: "out", from: ["g-all"], to: ["g-all"] })])],
    from: "srv", to: "dev1", proto: "tcp", port: 5432, want: "allowed", says: 'rule "out"',
  },
  {
    name: "a drop depending on posture",
    policies: [allToAll(), policy("Quarantine", [ssh({ name: "q", action: "drop" })], { source_posture_checks: ["pc-ver"] })],
    from: "dev1", to: "srv", proto: "tcp", port: 22, want: "depends", says: 'unless dev1 passes posture check "agent >= 0.70": then denied by policy "Quarantine" rule "q"',
  },
  { name: "empty group", policies: [policy("E", [rule({ from: ["g-empty"], to: ["g-all"], bidirectional: true })])], from: "dev1", to: "srv", proto: "icmp", want: "denied", says: "no enabled rule" },
  { name: "same peer", policies: [allToAll()], from: "dev1", to: "dev1", proto: "icmp", want: "denied", says: "itself" },
];

describe("testAccess", () => {
  for (const c of cases) {
    it(c.name, () => {
      const ix = buildIndex(input(c.policies, c.extra));
      const v = testAccess(ix, c.from, c.to, c.proto, c.port);
      expect({ kind: v.kind, message: v.message }).toEqual({ kind: c.want, message: expect.stringContaining(c.says) });
    });
  }
});

// GET /api/peers/{id}/accessible-peers is documented (openapi.json, and
// management/httpapi/accessible.go) as "the peers this peer reaches under
// the current policies": exactly the peers of its network map, none while
// it is pending approval, its user blocked or its login expired. A network
// map shows both ends of an accept rule to each other, whatever the
// direction. The browser's mapPeers must list the same peers, and every
// pair testAccess allows must be in both ends' lists.
describe("mapPeers matches the accessible-peers semantics", () => {
  const ids = (ps: { peer: string }[]) => ps.map((p) => p.peer).sort();
  it("one-way rule: each end lists the other", () => {
    const ix = buildIndex(input([policy("SSH", [ssh()])]));
    expect(ids(mapPeers(ix, "dev1"))).toEqual(["srv"]);
    expect(ids(mapPeers(ix, "srv"))).toEqual(["dev1", "dev2"]);
    // ...although only the devs may open connections.
    expect(ids(whomReaches(ix, "srv"))).toEqual([]);
    expect(ids(whoReaches(ix, "srv"))).toEqual(["dev1", "dev2"]);
  });
  it("all-to-all: every peer taking part but itself", () => {
    const ix = buildIndex(input([allToAll()]));
    expect(ids(mapPeers(ix, "dev1"))).toEqual(["dev2", "srv"]);
  });
  it("none while pending, expired or blocked, and nobody lists them", () => {
    const ix = buildIndex(input([allToAll()]));
    for (const p of ["pend", "old", "bobs"]) {
      expect(mapPeers(ix, p)).toEqual([]);
      expect(ids(mapPeers(ix, "srv"))).not.toContain(p);
    }
  });
  it("drop rules do not show peers", () => {
    const ix = buildIndex(input([policy("No", [ssh({ action: "drop" })])]));
    expect(mapPeers(ix, "dev1")).toEqual([]);
  });
  it("posture-checked rules show peers conditionally", () => {
    const ix = buildIndex(input([policy("SSH", [ssh()], { source_posture_checks: ["pc-ver"] })]));
    expect(mapPeers(ix, "dev1")).toEqual([{ peer: "srv", conditional: true }]);
  });
  it("every allowed pair is in both ends' lists", () => {
    const ix = buildIndex(input([policy("SSH", [ssh(), rule({ from: ["g-srv"], to: ["g-srv"], protocol: "icmp" })])]));
    const all = peers.map((p) => p.id);
    for (const a of all)
      for (const b of all) {
        if (testAccess(ix, a, b, "tcp", 22).kind !== "allowed" && testAccess(ix, a, b, "icmp").kind !== "allowed") continue;
        expect(ids(mapPeers(ix, a))).toContain(b);
        expect(ids(mapPeers(ix, b))).toContain(a);
      }
  });
});

describe("whoReaches / whomReaches", () => {
  it("names the rules with their traffic", () => {
    const ix = buildIndex(input([policy("SSH", [ssh()]), policy("No", [ssh({ name: "blk", action: "drop", ports: ["23"] })])]));
    const l = whoReaches(ix, "srv").find((x) => x.peer === "dev1");
    expect(l?.accepts.map((a) => [a.rule.ruleName, a.rule.protocol, a.rule.ports])).toEqual([["ssh", "tcp", "22"]]);
    expect(l?.drops.map((a) => a.rule.ruleName)).toEqual(["blk"]);
    expect(whomReaches(ix, "dev1").map((x) => x.peer)).toEqual(["srv"]);
  });
  it("an excluded peer reaches nobody", () => {
    const ix = buildIndex(input([allToAll()]));
    expect(whoReaches(ix, "pend")).toEqual([]);
    expect(whomReaches(ix, "dev1").map((x) => x.peer).sort()).toEqual(["dev2", "srv"]);
  });
});

describe("portsText", () => {
  it("joins ports and ranges", () => {
    expect(portsText({ ports: ["22", "443"] })).toBe("22, 443");
    expect(portsText({ port_ranges: [{ start: 1, end: 1 }, { start: 8000, end: 8100 }] })).toBe("1, 8000-8100");
    expect(portsText({})).toBe("all ports");
  });
});
