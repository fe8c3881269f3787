import { describe, expect, it } from "vitest";
import { ApiError } from "../api/client";
import {
  fromRoute,
  newResource,
  newRoute,
  newRouter,
  resourceErrorField,
  routeErrorField,
  routeRequest,
  routerRequest,
  servedBy,
  validateNetwork,
  validateResource,
  validateRoute,
  validateRouter,
  type Network,
  type Route,
  type RouteForm,
} from "./form";
import { formatIP, isDefaultRoute, parseIPv6, parsePrefix, resourceType } from "./net";

const valid = (o: Partial<RouteForm> = {}): RouteForm => ({ ...newRoute(), networkId: "office", peer: "p1", network: "10.64.0.0/24", groups: ["g1"], ...o });

describe("parsePrefix", () => {
  it.each([
    ["10.64.0.0/24", 24, false],
    ["0.0.0.0/0", 0, false],
    ["fd00::/64", 64, true],
    ["::/0", 0, true],
    ["2001:db8::ffff:10.0.0.0/120", 120, true],
  ])("reads %s", (s, bits, v6) => {
    const p = parsePrefix(s);
    expect(typeof p).toBe("object");
    if (typeof p !== "string") expect([p.bits, p.v6]).toEqual([bits, v6]);
  });
  it.each([
    ["10.64.0.1/24", "has host bits set; did you mean 10.64.0.0/24?"],
    ["fd00::1/64", "did you mean fd00::/64?"],
    ["10.64.0.0", "is not a CIDR prefix"],
    ["10.64.0.0/33", "longer than the address"],
    ["300.0.0.0/8", "is not a CIDR prefix"],
    ["010.0.0.0/8", "is not a CIDR prefix"],
    ["fd00:::/64", "is not a CIDR prefix"],
    ["1:2:3:4:5:6:7:8:9/64", "is not a CIDR prefix"],
    ["", "is not a CIDR prefix"],
  ])("refuses %s", (s, msg) => {
    const p = parsePrefix(s);
    expect(p).toBeTypeOf("string");
    expect(p as string).toContain(msg);
  });
  it("formats IPv6 as RFC 5952", () => {
    expect(formatIP(parseIPv6("2001:0db8:0:0:1:0:0:1") ?? [])).toBe("2001:db8::1:0:0:1");
    expect(formatIP(parseIPv6("::") ?? [])).toBe("::");
    expect(formatIP(parseIPv6("1:0:2:0:3:0:4:0") ?? [])).toBe("1:0:2:0:3:0:4:0");
  });
  it("knows exit node prefixes", () => {
    expect(isDefaultRoute("0.0.0.0/0")).toBe(true);
    expect(isDefaultRoute("::/0")).toBe(true);
    expect(isDefaultRoute("10.0.0.0/8")).toBe(false);
    expect(isDefaultRoute(undefined)).toBe(false);
  });
});

describe("resourceType", () => {
  it.each([
    ["1.1.1.1", "host"],
    ["1.1.1.1/32", "host"],
    ["fd00::1", "host"],
    ["192.168.178.0/24", "subnet"],
    ["example.com", "domain"],
    ["*.example.com", "domain"],
    ["bücher.example", "domain"],
  ])("%s is a %s", (a, t) => expect(resourceType(a)).toEqual({ type: t }));
  it.each(["", "192.168.178.1/24", "fe80::1%eth0", "exa mple.com", "-bad.example", "a..b"])("refuses %j", (a) => {
    expect(resourceType(a)).toHaveProperty("error");
  });
});

describe("validateRoute", () => {
  it("passes a complete form", () => expect(validateRoute(valid())).toEqual({}));
  it("needs a network_id of 1..40 characters", () => {
    expect(validateRoute(valid({ networkId: "  " })).networkId).toMatch(/needs/);
    expect(validateRoute(valid({ networkId: "x".repeat(41) })).networkId).toMatch(/At most 40/);
    expect(validateRoute(valid({ networkId: "x".repeat(40) })).networkId).toBeUndefined();
  });
  it("checks the metric is 1..9999", () => {
    expect(validateRoute(valid({ metric: 0 })).metric).toMatch(/outside/);
    expect(validateRoute(valid({ metric: 10000 })).metric).toMatch(/outside/);
    expect(validateRoute(valid({ metric: "1.5" })).metric).toMatch(/whole number/);
    expect(validateRoute(valid({ metric: "" })).metric).toMatch(/whole number/);
    expect(validateRoute(valid({ metric: "1" })).metric).toBeUndefined();
  });
  it("needs the chosen router and destination", () => {
    expect(validateRoute(valid({ peer: "" })).router).toMatch(/routing peer/);
    expect(validateRoute(valid({ routerKind: "groups" })).router).toMatch(/group/);
    expect(validateRoute(valid({ routerKind: "groups", peerGroups: ["g"] })).router).toBeUndefined();
    expect(validateRoute(valid({ network: "10.64.0.1/24" })).destination).toMatch(/did you mean 10.64.0.0\/24/);
    expect(validateRoute(valid({ destKind: "domains", domains: "" })).destination).toMatch(/at least one domain/);
    expect(validateRoute(valid({ destKind: "domains", domains: "a.example, *.b.example" })).destination).toBeUndefined();
    expect(validateRoute(valid({ destKind: "domains", domains: "a_b.example" })).destination).toMatch(/bad label/);
    expect(validateRoute(valid({ destKind: "domains", domains: Array.from({ length: 33 }, (_, i) => `d${i}.example`).join("\n") })).destination).toMatch(/at most 32/);
  });
  it("needs distribution groups", () => expect(validateRoute(valid({ groups: [] })).groups).toMatch(/distribution/));
  it("allows skip_auto_apply only for exit nodes", () => {
    expect(validateRoute(valid({ skipAutoApply: true })).skipAutoApply).toMatch(/Only exit node/);
    expect(validateRoute(valid({ skipAutoApply: true, network: "0.0.0.0/0" })).skipAutoApply).toBeUndefined();
    expect(validateRoute(valid({ skipAutoApply: true, network: "::/0" })).skipAutoApply).toBeUndefined();
  });
});

describe("routeRequest", () => {
  it("sends one of peer/peer_groups and one of network/domains", () => {
    const a = routeRequest(valid({ peerGroups: ["stale"], domains: "stale.example", skipAutoApply: true }));
    expect(a).toMatchObject({ network_id: "office", peer: "p1", network: "10.64.0.0/24", metric: 9999, keep_route: false });
    expect(a).not.toHaveProperty("peer_groups");
    expect(a).not.toHaveProperty("domains");
    expect(a).not.toHaveProperty("skip_auto_apply");
    const b = routeRequest(valid({ routerKind: "groups", peerGroups: ["g2"], destKind: "domains", domains: "a.example\nb.example", metric: "20" }));
    expect(b).toMatchObject({ peer_groups: ["g2"], domains: ["a.example", "b.example"], metric: 20, keep_route: true });
    expect(b).not.toHaveProperty("peer");
    expect(b).not.toHaveProperty("network");
    expect(routeRequest(valid({ network: "0.0.0.0/0", skipAutoApply: true })).skip_auto_apply).toBe(true);
  });
  it("round-trips a route", () => {
    const r: Route = {
      id: "r1",
      description: "d",
      network_id: "dns",
      enabled: false,
      peer_groups: ["g2"],
      network: "192.0.2.0/32",
      domains: ["a.example"],
      metric: 5,
      masquerade: false,
      groups: ["g1"],
      keep_route: true,
      access_control_groups: ["g3"],
      network_type: "Domain",
    };
    const f = fromRoute(r);
    expect(f).toMatchObject({ routerKind: "groups", destKind: "domains", domains: "a.example", network: "" });
    expect(routeRequest(f)).toEqual({
      network_id: "dns",
      description: "d",
      enabled: false,
      peer_groups: ["g2"],
      domains: ["a.example"],
      metric: 5,
      masquerade: false,
      groups: ["g1"],
      keep_route: true,
      access_control_groups: ["g3"],
    });
  });
});

describe("server errors", () => {
  const err = (m: string) => new ApiError(422, m, 422, "POST", "/api/routes");
  it.each([
    ["network_id: must have 1 to 40 characters", "networkId"],
    ["metric: 0 is outside 1-9999", "metric"],
    ["peer and peer_groups cannot be combined; give one of them", "router"],
    ['peer_groups: group "x" (g) has no peers to route through', "router"],
    ["network: 10.0.0.1/24 has host bits set; did you mean 10.0.0.0/24?", "destination"],
    ["domains: 33 domains, at most 32", "destination"],
    ["groups: the distribution groups (the peers that get the route) must not be empty", "groups"],
    ['access_control_groups: group "x" does not exist', "accessControlGroups"],
    ["skip_auto_apply: only exit node routes (0.0.0.0/0 or ::/0) can skip auto-apply", "skipAutoApply"],
    ["something else", "form"],
  ])("%s -> %s", (m, f) => expect(routeErrorField(err(m))).toBe(f));
  it("places resource errors", () => {
    expect(resourceErrorField(err('address: "x y" is not a host IP, subnet or domain'))).toBe("address");
    expect(resourceErrorField(err('name: a resource named "db" already exists'))).toBe("name");
    expect(resourceErrorField(new Error("network down"))).toBe("form");
  });
});

describe("networks, resources, routers", () => {
  it("validates", () => {
    expect(validateNetwork({ name: " ", description: "" }).name).toMatch(/needs a name/);
    expect(validateNetwork({ name: "lab", description: "" })).toEqual({});
    expect(validateResource({ ...newResource(), name: "db", address: "10.0.0.5/24" }).address).toMatch(/host bits/);
    expect(validateResource({ ...newResource(), name: "db", address: "10.0.0.0/24" })).toEqual({});
    expect(validateRouter(newRouter())).toEqual({ router: "Pick the routing peer" });
    expect(validateRouter({ ...newRouter(), peer: "p", metric: 0 }).metric).toMatch(/outside/);
    expect(validateRouter({ ...newRouter(), kind: "groups", peerGroups: ["g"] })).toEqual({});
  });
  it("sends one of peer/peer_groups for a router", () => {
    expect(routerRequest({ ...newRouter(), peer: "p", peerGroups: ["g"] })).toEqual({ peer: "p", metric: 9999, masquerade: true, enabled: true });
    expect(routerRequest({ ...newRouter(), kind: "groups", peer: "p", peerGroups: ["g"], metric: "7" })).toEqual({ peer_groups: ["g"], metric: 7, masquerade: true, enabled: true });
  });
});

describe("servedBy", () => {
  const route = (o: Partial<Route>): Route => ({
    id: "r",
    description: "",
    network_id: "n",
    enabled: true,
    network: "10.0.0.0/24",
    domains: [],
    metric: 1,
    masquerade: true,
    groups: [],
    keep_route: false,
    network_type: "IPv4",
    ...o,
  });
  const net: Network = { id: "net1", name: "Lab", routers: ["rt1", "rt2"], resources: ["x", "y"], policies: [], routing_peers_count: 1 };
  it("lists what names the peer or its groups", () => {
    const s = servedBy(
      "p1",
      [{ id: "g1", name: "gw" }],
      [
        route({ id: "a", network_id: "direct", peer: "p1" }),
        route({ id: "b", network_id: "via-group", peer_groups: ["g1", "g9"], network: "0.0.0.0/0" }),
        route({ id: "c", network_id: "other", peer: "p2" }),
        route({ id: "d", network_id: "other-group", peer_groups: ["g9"] }),
      ],
      [net],
      [
        { id: "rt1", peer: "p1", peer_groups: [], metric: 1, masquerade: true, enabled: false },
        { id: "rt2", peer: "p2", peer_groups: [], metric: 1, masquerade: true, enabled: true },
      ],
    );
    expect(s.map((x) => [x.kind, x.name, x.how, x.exitNode, x.enabled])).toEqual([
      ["route", "direct", "as its routing peer", false, true],
      ["router", "Lab", "as its routing peer", false, false],
      ["route", "via-group", "through group gw", true, true],
    ]);
    expect(s[1]?.what).toBe("2 resources");
  });
});
