import { describe, expect, it } from "vitest";
import { ApiError } from "../api/client";
import {
  formatNameservers,
  fromNameserverGroup,
  fromZone,
  nameserverErrorField,
  nameserverGroupRequest,
  nameserverIPError,
  newNameserverGroup,
  newRecord,
  newZone,
  portError,
  recordErrorField,
  recordFQDN,
  recordRequest,
  validateNameserverGroup,
  validateRecord,
  validateZone,
  zoneErrorField,
  zoneRequest,
  type NameserverForm,
  type NameserverGroup,
  type RecordForm,
  type Zone,
  type ZoneField,
  type ZoneForm,
} from "./form";

const ns = (o: Partial<NameserverForm> = {}): NameserverForm => ({
  ...newNameserverGroup(),
  name: "corp",
  nameservers: [{ ip: "10.10.0.53", port: 53, nsType: "udp" }],
  domains: "corp.example.com",
  groups: ["g1"],
  ...o,
});
const refusal = (msg: string, status = 422) => new ApiError(status, msg, status, "POST", "/api/dns/nameservers");

describe("nameserver IPs and ports", () => {
  it.each(["1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "192.168.1.1"])("accepts %s", (ip) => expect(nameserverIPError(ip)).toBe(""));
  it.each([
    ["", "Give the nameserver's IP address"],
    ["dns.google", "is not an IPv4 or IPv6 address"],
    ["300.1.1.1", "is not an IPv4 or IPv6 address"],
    ["1.1.1.1:53", "is not an IPv4 or IPv6 address"],
    ["0.0.0.0", "is not a unicast address"],
    ["::", "is not a unicast address"],
    ["224.0.0.251", "multicast"],
    ["ff02::fb", "multicast"],
    ["fe80::1%eth0", "an address with a zone"],
  ])("refuses %j", (ip, msg) => expect(nameserverIPError(ip)).toContain(msg));
  it.each([
    [53, ""],
    ["5353", ""],
    [65535, ""],
    [0, "outside 1-65535"],
    [65536, "outside 1-65535"],
    ["", "whole number"],
    [5.5, "whole number"],
  ])("port %j", (p, msg) => (msg ? expect(portError(p)).toContain(msg) : expect(portError(p)).toBe("")));
});

describe("validateNameserverGroup", () => {
  it("accepts a match-domain group and a primary one", () => {
    expect(validateNameserverGroup(ns())).toEqual({});
    expect(validateNameserverGroup(ns({ mode: "primary", domains: "" }))).toEqual({});
  });
  it("names each bad row's control", () => {
    const e = validateNameserverGroup(
      ns({
        nameservers: [
          { ip: "1.1.1.1", port: 53, nsType: "udp" },
          { ip: "nope", port: 0, nsType: "udp" },
          { ip: "1.1.1.1", port: 53, nsType: "udp" },
        ],
      }),
    );
    expect(e["ns0.ip"]).toBeUndefined();
    expect(e["ns1.ip"]).toContain("is not an IPv4 or IPv6 address");
    expect(e["ns1.port"]).toContain("outside 1-65535");
    expect(e["ns2.ip"]).toContain("listed twice");
  });
  it("refuses no nameservers or more than 3", () => {
    expect(validateNameserverGroup(ns({ nameservers: [] })).nameservers).toContain("1 to 3");
    const four = Array.from({ length: 4 }, (_, i) => ({ ip: `1.1.1.${i + 1}`, port: 53, nsType: "udp" as const }));
    expect(validateNameserverGroup(ns({ nameservers: four })).nameservers).toContain("this has 4");
  });
  it("needs match domains unless primary, valid and not wildcards", () => {
    expect(validateNameserverGroup(ns({ domains: "  " })).domains).toContain("Give the match domains");
    expect(validateNameserverGroup(ns({ domains: "corp.example.com\nbad_domain!" })).domains).toContain("not a valid domain name");
    expect(validateNameserverGroup(ns({ domains: "*.corp.example.com" })).domains).toContain("wildcard");
    expect(validateNameserverGroup(ns({ domains: Array.from({ length: 33 }, (_, i) => `d${i}.example`).join("\n") })).domains).toContain("at most 32");
  });
  it("needs a name of at most 40 characters and distribution groups", () => {
    const e = validateNameserverGroup(ns({ name: " ", groups: [] }));
    expect(e.name).toBe("A nameserver group needs a name");
    expect(e.groups).toContain("distribution groups");
    expect(validateNameserverGroup(ns({ name: "x".repeat(41) })).name).toContain("this has 41");
    expect(validateNameserverGroup(ns({ name: "é".repeat(40) })).name).toBeUndefined();
  });
});

describe("nameserverGroupRequest", () => {
  it("sends domains and search domains only when matching", () => {
    const primary = nameserverGroupRequest(ns({ mode: "primary", domains: "left.over", searchDomains: true }));
    expect(primary).toMatchObject({ primary: true, domains: [], search_domains_enabled: false });
    const match = nameserverGroupRequest(ns({ domains: "a.example, b.example\nc.example", searchDomains: true, nameservers: [{ ip: " 1.1.1.1 ", port: "5353", nsType: "udp" }] }));
    expect(match).toMatchObject({ primary: false, domains: ["a.example", "b.example", "c.example"], search_domains_enabled: true });
    expect(match.nameservers).toEqual([{ ip: "1.1.1.1", ns_type: "udp", port: 5353 }]);
  });
  it("round-trips a group", () => {
    const g: NameserverGroup = {
      id: "n1",
      name: "corp",
      description: "AD",
      nameservers: [{ ip: "fd00::53", ns_type: "udp", port: 53 }],
      enabled: false,
      groups: ["g1"],
      primary: false,
      domains: ["corp.example.com"],
      search_domains_enabled: true,
    };
    const { id: _id, ...want } = g;
    expect(nameserverGroupRequest(fromNameserverGroup(g))).toEqual(want);
    expect(formatNameservers([...g.nameservers, { ip: "1.1.1.1", port: 5353 }])).toBe("[fd00::53]:53, 1.1.1.1:5353");
  });
});

describe("nameserverErrorField", () => {
  it.each([
    ["nameservers[1].ip: 100.64.0.5 is inside the account's peer network 100.64.0.0/10; a nameserver must be outside it", "ns1.ip"],
    ["nameservers[2].port: 0 is outside 1-65535", "ns2.port"],
    ["nameservers[0].ns_type: \"tcp\" is not supported", "ns0.ip"],
    ["nameservers: 4 given, a group has 1 to 3", "nameservers"],
    ["name: a nameserver group named \"corp\" already exists", "name"],
    ["primary: a primary nameserver group resolves every domain and cannot have domains", "domains"],
    ["search_domains_enabled: only a group with domains can add them as search domains", "searchDomains"],
    ["groups: group \"x\" does not exist", "groups"],
    ["something else", "form"],
  ])("%s -> %s", (msg, field) => expect(nameserverErrorField(refusal(msg))).toBe(field));
  it("keeps other failures for the form", () => {
    expect(nameserverErrorField(refusal("nameservers[1].ip: x", 500))).toBe("form");
    expect(nameserverErrorField(new Error("network down"))).toBe("form");
  });
});

describe("zones", () => {
  const zone = (o: Partial<ZoneForm> = {}): ZoneForm => ({ ...newZone(), name: "Lab", domain: "lab.example.com", groups: ["g1"], ...o });
  it("accepts a valid zone and normalizes its domain", () => {
    expect(validateZone(zone())).toEqual({});
    expect(zoneRequest(zone({ domain: " Lab.Example.COM. " })).domain).toBe("lab.example.com");
  });
  it.each([
    [{ name: "" }, "name", "A zone needs a name"],
    [{ name: "x".repeat(256) }, "name", "At most 255"],
    [{ domain: "" }, "domain", "Give the zone's domain"],
    [{ domain: "*.lab.example.com" }, "domain", "wildcard"],
    [{ domain: "lab example.com" }, "domain", "has a space"],
    [{ domain: "-lab.example.com" }, "domain", "bad label"],
    [{ groups: [] }, "groups", "distribution groups"],
  ] as [Partial<ZoneForm>, ZoneField, string][])("refuses %j", (o, field, msg) => expect(validateZone(zone(o))[field]).toContain(msg));
  it("round-trips a zone and maps refusals", () => {
    const z: Zone = { id: "z1", name: "Lab", domain: "lab.example.com", enable_search_domain: true, distribution_groups: ["g1"], enabled: false, records: [] };
    expect(zoneRequest(fromZone(z))).toEqual({ name: "Lab", domain: "lab.example.com", enable_search_domain: true, distribution_groups: ["g1"], enabled: false });
    expect(zoneErrorField(refusal("domain: lab.wm.internal conflicts with the peers' DNS domain wm.internal"))).toBe("domain");
    expect(zoneErrorField(refusal("distribution_groups: at least one group is required"))).toBe("groups");
    // A conflict names the domain: it belongs beside the domain.
    expect(zoneErrorField(refusal("zone with domain lab.example.com already exists", 409))).toBe("domain");
    expect(zoneErrorField(refusal("the account already has 1024 zones, the most it may have"))).toBe("form");
  });
});

describe("records", () => {
  const zone = "lab.example.com";
  const rec = (o: Partial<RecordForm> = {}): RecordForm => ({ ...newRecord(), name: "www", content: "10.0.0.10", ...o });
  it.each([
    ["www", "www.lab.example.com"],
    ["WWW.lab.example.com", "www.lab.example.com"],
    ["@", "lab.example.com"],
    ["lab.example.com", "lab.example.com"],
    ["*.dev", "*.dev.lab.example.com"],
    ["other.example.org.", "other.example.org"],
  ])("the full name of %j is %s", (n, want) => expect(recordFQDN(n, zone)).toBe(want));
  it("accepts A, AAAA and CNAME records", () => {
    expect(validateRecord(rec(), zone)).toEqual({});
    expect(validateRecord(rec({ type: "AAAA", content: "fd00::10" }), zone)).toEqual({});
    expect(validateRecord(rec({ type: "CNAME", content: "www.example.org." }), zone)).toEqual({});
    expect(validateRecord(rec({ name: "*.dev", ttl: 0 }), zone)).toEqual({});
  });
  it.each([
    [{ name: "" }, "name", "Give the name"],
    [{ name: "other.example.org." }, "name", "is not in the zone lab.example.com"],
    [{ name: "bad_name" }, "name", "bad label"],
    [{ content: "fd00::1" }, "content", "is IPv6 (use AAAA)"],
    [{ content: "10.0.0" }, "content", "is not an IPv4 address"],
    [{ type: "AAAA", content: "10.0.0.1" }, "content", "is IPv4 (use A)"],
    [{ type: "AAAA", content: "fe80::1%eth0" }, "content", "is not an IPv6 address"],
    [{ type: "CNAME", content: "not a domain" }, "content", "has a space"],
    [{ type: "CNAME", content: "www.lab.example.com" }, "content", "cannot point at its own name"],
    [{ content: "" }, "content", "Give the IPv4 address"],
    [{ ttl: -1 }, "ttl", "outside 0-604800"],
    [{ ttl: 604801 }, "ttl", "outside 0-604800"],
    [{ ttl: "" }, "ttl", "whole number"],
    [{ ttl: 1.5 }, "ttl", "whole number"],
  ] as const)("refuses %j", (o, field, msg) => expect(validateRecord(rec(o), zone)[field]).toContain(msg));
  it("sends the full name and a normalized CNAME target", () => {
    expect(recordRequest(rec({ name: "api", type: "CNAME", content: "Www.Lab.Example.com.", ttl: "60" }), zone)).toEqual({
      name: "api.lab.example.com",
      type: "CNAME",
      content: "www.lab.example.com",
      ttl: 60,
    });
  });
  it("maps refusals to their control", () => {
    expect(recordErrorField(refusal("content: www.lab.example.com -> api.lab.example.com makes a CNAME loop back to www.lab.example.com"))).toBe("content");
    expect(recordErrorField(refusal("name: www.lab.example.com already has a CNAME record; a name with a CNAME record can have no other record"))).toBe("name");
    expect(recordErrorField(refusal("ttl: 9999999 is outside 0-604800 seconds"))).toBe("ttl");
    expect(recordErrorField(refusal("an identical A record for www.lab.example.com already exists", 409))).toBe("form");
  });
});
