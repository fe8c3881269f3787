import { describe, expect, it } from "vitest";
import { fromPolicy, hasErrors, newPolicy, newRule, parsePorts, placeServerError, toRequest, validatePolicy, type PolicyForm, type RuleForm } from "./form";

describe("parsePorts", () => {
  const cases: [string, ReturnType<typeof parsePorts>][] = [
    ["", { ports: [], ranges: [] }],
    ["22", { ports: [22], ranges: [] }],
    ["22, 443 8000-8100", { ports: [22, 443], ranges: [{ start: 8000, end: 8100 }] }],
    ["1,65535", { ports: [1, 65535], ranges: [] }],
    ["5-5", { ports: [], ranges: [{ start: 5, end: 5 }] }],
    ["0", "port 0 is outside 1-65535"],
    ["65536", "port 65536 is outside 1-65535"],
    ["http", '"http" is not a port number'],
    ["100-10", "range 100-10 starts after it ends"],
    ["1-70000", "port 70000 is outside 1-65535"],
    ["a-b", '"a" is not a port number'],
    ["-5", '"-5" is not a port number'],
  ];
  for (const [text, want] of cases) {
    it(JSON.stringify(text), () => expect(parsePorts(text)).toEqual(want));
  }
});

function form(rule: Partial<RuleForm>, o: Partial<PolicyForm> = {}): PolicyForm {
  return { ...newPolicy(), name: "SSH", rules: [{ ...newRule(), sources: ["g1"], destinations: ["g2"], ...rule }], ...o };
}

describe("validatePolicy", () => {
  const cases: { name: string; f: PolicyForm; want: object }[] = [
    { name: "valid", f: form({}), want: {} },
    { name: "no name", f: form({}, { name: "  " }), want: { name: "A policy needs a name" } },
    { name: "no rules", f: form({}, { rules: [] }), want: { rules: "A policy needs at least one rule" } },
    { name: "ports with protocol all", f: form({ ports: "22" }), want: { rule: [{ ports: "Ports need protocol TCP or UDP" }] } },
    { name: "ports with icmp", f: form({ protocol: "icmp", ports: "22" }), want: { rule: [{ ports: "Ports need protocol TCP or UDP" }] } },
    { name: "bad range", f: form({ protocol: "udp", ports: "9-1" }), want: { rule: [{ ports: "range 9-1 starts after it ends" }] } },
    { name: "out of range", f: form({ protocol: "tcp", ports: "0" }), want: { rule: [{ ports: "port 0 is outside 1-65535" }] } },
    {
      name: "missing sides",
      f: form({ sources: [], destinationKind: "peer", destinationPeer: "" }),
      want: { rule: [{ sources: "Pick at least one source group", destinations: "Pick the destination peer" }] },
    },
    { name: "peer sides", f: form({ sources: [], sourceKind: "peer", sourcePeer: "p1", destinations: [], destinationKind: "peer", destinationPeer: "p2" }), want: {} },
  ];
  for (const c of cases) {
    it(c.name, () => expect(validatePolicy(c.f)).toEqual(c.want));
  }
  it("hasErrors", () => {
    expect(hasErrors({})).toBe(false);
    expect(hasErrors({ name: "x" })).toBe(true);
  });
});

describe("toRequest", () => {
  it("single ports go as ports", () => {
    const r = toRequest(form({ protocol: "tcp", ports: "22, 443" })).rules[0];
    expect(r).toEqual({ name: "SSH", enabled: true, action: "accept", protocol: "tcp", bidirectional: true, sources: ["g1"], destinations: ["g2"], ports: ["22", "443"] });
  });
  it("ports mixed with ranges all go as ranges", () => {
    const r = toRequest(form({ protocol: "udp", ports: "53 1000-2000" })).rules[0];
    expect(r?.ports).toBeUndefined();
    expect(r?.port_ranges).toEqual([
      { start: 53, end: 53 },
      { start: 1000, end: 2000 },
    ]);
  });
  it("peer resources replace groups; ports dropped for protocol all", () => {
    const req = toRequest(form({ id: "r1", name: " one ", sourceKind: "peer", sourcePeer: "p1", destinationKind: "peer", destinationPeer: "p2", ports: "" }, { postureChecks: ["pc"], description: " d " }));
    expect(req).toEqual({
      name: "SSH",
      description: "d",
      enabled: true,
      source_posture_checks: ["pc"],
      rules: [{ id: "r1", name: "one", enabled: true, action: "accept", protocol: "all", bidirectional: true, sourceResource: { id: "p1", type: "peer" }, destinationResource: { id: "p2", type: "peer" } }],
    });
  });
  it("round-trips a policy", () => {
    const f = fromPolicy({
      id: "pol",
      name: "Web",
      description: "x",
      enabled: false,
      source_posture_checks: ["pc"],
      rules: [
        {
          id: "r",
          name: "web",
          description: "",
          enabled: true,
          action: "drop",
          bidirectional: false,
          protocol: "tcp",
          port_ranges: [
            { start: 80, end: 80 },
            { start: 8000, end: 8100 },
          ],
          sources: [{ id: "g1", name: "a", peers_count: 1, resources_count: 0 }],
          destinationResource: { id: "p9", type: "peer" },
        },
      ],
    });
    expect(f.rules[0]?.ports).toBe("80, 8000-8100");
    expect(f.rules[0]?.destinationKind).toBe("peer");
    expect(toRequest(f).rules[0]).toEqual({
      id: "r",
      name: "web",
      enabled: true,
      action: "drop",
      protocol: "tcp",
      bidirectional: false,
      sources: ["g1"],
      destinationResource: { id: "p9", type: "peer" },
      port_ranges: [
        { start: 80, end: 80 },
        { start: 8000, end: 8100 },
      ],
    });
  });
});

describe("placeServerError", () => {
  it("places the server's messages", () => {
    expect(placeServerError("ports need protocol tcp or udp", 1)).toEqual({ rule: 0, field: "ports" });
    expect(placeServerError('group "x" does not exist', 1)).toEqual({ field: "form" });
    expect(placeServerError('posture check "x" does not exist', 1)).toEqual({ field: "postureChecks" });
    expect(placeServerError("source: give either groups or a resource, not both", 1)).toEqual({ rule: 0, field: "sources" });
    expect(placeServerError("a name must have 1 to 255 characters", 2)).toEqual({ field: "name" });
    expect(placeServerError("port 0 is outside 1-65535", 2)).toEqual({ field: "form" });
  });
});
