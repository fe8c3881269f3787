import { describe, expect, it } from "vitest";
import { changedFields, checkDNSDomain, checkNetworkRange, fromAccount, splitDuration, toRequest, validateSettings, type Account } from "./form";

const account = (): Account => ({
  id: "acc1",
  domain: "netbird.selfhosted",
  domain_category: "private",
  created_at: "2026-01-01T00:00:00Z",
  created_by: "owner",
  claimed_domain: "",
  onboarding: { signup_form_pending: false, onboarding_flow_pending: false },
  settings: {
    peer_login_expiration_enabled: true,
    peer_login_expiration: 86400,
    peer_inactivity_expiration_enabled: false,
    peer_inactivity_expiration: 0,
    regular_users_view_blocked: false,
    peer_expose_enabled: false,
    peer_expose_groups: [],
    groups_propagation_enabled: true,
    jwt_groups_enabled: false,
    jwt_groups_claim_name: "",
    jwt_allow_groups: [],
    routing_peer_dns_resolution_enabled: false,
    dns_domain: "netbird.selfhosted",
    network_range: "100.64.0.0/10",
    ipv6_enabled_groups: [],
    extra: { peer_approval_enabled: false, user_approval_required: false, network_traffic_logs_enabled: false, network_traffic_logs_groups: [], network_traffic_packet_counter_enabled: false },
    lazy_connection_enabled: false,
    auto_update_version: "disabled",
    auto_update_always: false,
    metrics_push_enabled: false,
    agent_network_only: false,
    dashboard_features: {},
    embedded_idp_enabled: true,
    local_auth_disabled: false,
    local_mfa_enabled: false,
  },
});

describe("durations", () => {
  it("picks the largest exact unit", () => {
    expect(splitDuration(86400)).toEqual({ value: 1, unit: "days" });
    expect(splitDuration(7200)).toEqual({ value: 2, unit: "hours" });
    expect(splitDuration(600)).toEqual({ value: 10, unit: "minutes" });
    expect(splitDuration(90)).toEqual({ value: 2, unit: "minutes" });
  });
});

describe("validateSettings", () => {
  it("accepts the server's defaults", () => {
    expect(validateSettings(fromAccount(account()))).toEqual({});
  });
  it("bounds login expiration to 1 s .. 365 days when on", () => {
    const f = fromAccount(account());
    expect(validateSettings({ ...f, loginExpiration: 366, loginExpirationUnit: "days" })).toHaveProperty("loginExpiration");
    expect(validateSettings({ ...f, loginExpiration: 365, loginExpirationUnit: "days" })).toEqual({});
    expect(validateSettings({ ...f, loginExpiration: 0 })).toHaveProperty("loginExpiration");
    expect(validateSettings({ ...f, loginExpiration: 1.5 })).toHaveProperty("loginExpiration");
    expect(validateSettings({ ...f, loginExpirationEnabled: false, loginExpiration: 0 })).toEqual({});
  });
  it("bounds inactivity expiration to 60 s .. 365 days when on", () => {
    const f = { ...fromAccount(account()), inactivityExpirationEnabled: true };
    expect(validateSettings({ ...f, inactivityExpiration: 1, inactivityExpirationUnit: "minutes" as const })).toEqual({});
    expect(validateSettings({ ...f, inactivityExpiration: 0, inactivityExpirationUnit: "minutes" as const })).toHaveProperty("inactivityExpiration");
    expect(validateSettings({ ...f, inactivityExpiration: 8761, inactivityExpirationUnit: "hours" as const })).toHaveProperty("inactivityExpiration");
  });
  it("checks the DNS domain as the server does", () => {
    expect(checkDNSDomain("")).toBe("");
    expect(checkDNSDomain("mesh.internal.")).toBe("");
    expect(checkDNSDomain("Mesh.Example.COM")).toBe("");
    expect(checkDNSDomain("mesh")).toMatch(/two labels/);
    expect(checkDNSDomain("-a.internal")).not.toBe("");
    expect(checkDNSDomain("a_b.internal")).not.toBe("");
    expect(checkDNSDomain(`${"a".repeat(64)}.internal`)).not.toBe("");
    expect(checkDNSDomain("a..b")).not.toBe("");
  });
  it("checks the network range as the server does", () => {
    expect(checkNetworkRange("100.64.0.0/10")).toBe("");
    expect(checkNetworkRange("10.20.0.0/16")).toBe("");
    expect(checkNetworkRange("172.16.5.0/24")).toBe("");
    expect(checkNetworkRange("192.168.1.7/28")).toBe("");
    expect(checkNetworkRange("192.168.1.0/29")).toBe("A /8 to /28");
    expect(checkNetworkRange("10.0.0.0/7")).toBe("A /8 to /28");
    expect(checkNetworkRange("8.8.8.0/24")).toMatch(/Inside/);
    expect(checkNetworkRange("172.32.0.0/16")).toMatch(/Inside/);
    expect(checkNetworkRange("100.0.0.0/9")).toMatch(/Inside/);
    expect(checkNetworkRange("fd00::/64")).toMatch(/IPv4/);
    expect(checkNetworkRange("10.0.0.0")).toMatch(/CIDR/);
    expect(checkNetworkRange("10.0.0.256/16")).toMatch(/IPv4/);
  });
  it("checks the JWT settings", () => {
    const f = fromAccount(account());
    expect(validateSettings({ ...f, jwtGroupsClaimName: "a\nb" })).toHaveProperty("jwtGroupsClaimName");
    expect(validateSettings({ ...f, jwtAllowGroups: [" "] })).toHaveProperty("jwtAllowGroups");
    expect(validateSettings({ ...f, jwtAllowGroups: Array.from({ length: 101 }, (_, i) => `g${i}`) })).toHaveProperty("jwtAllowGroups");
    expect(validateSettings({ ...f, jwtAllowGroups: ["devs"] })).toEqual({});
  });
});

describe("toRequest", () => {
  it("sends the whole settings object, leaving out an unchanged domain and range", () => {
    const a = account();
    const f = { ...fromAccount(a), peerApproval: true, loginExpiration: 12, loginExpirationUnit: "hours" as const };
    const req = toRequest(a, f);
    expect(req.settings.peer_login_expiration).toBe(43200);
    expect(req.settings.extra?.peer_approval_enabled).toBe(true);
    expect(req.settings.extra?.user_approval_required).toBe(false);
    expect(req.settings.groups_propagation_enabled).toBe(true);
    expect(req.settings.auto_update_version).toBe("disabled");
    expect("dns_domain" in req.settings).toBe(false);
    expect("network_range" in req.settings).toBe(false);
    expect("embedded_idp_enabled" in req.settings).toBe(false);
    expect("claimed_domain" in req).toBe(false);
    expect(changedFields(a, f).sort()).toEqual(["extra.peer_approval_enabled", "peer_login_expiration"]);
  });
  it("sends a changed domain, range and claimed domain", () => {
    const a = account();
    const f = { ...fromAccount(a), dnsDomain: "Mesh.Internal.", networkRange: "10.9.0.0/16", claimedDomain: "example.com" };
    const req = toRequest(a, f);
    expect(req.settings.dns_domain).toBe("mesh.internal");
    expect(req.settings.network_range).toBe("10.9.0.0/16");
    expect(req.claimed_domain).toBe("example.com");
    expect(changedFields(a, f).sort()).toEqual(["claimed_domain", "dns_domain", "network_range"]);
  });
  it("keeps the stored period of a switched-off expiration", () => {
    const a = account();
    const f = { ...fromAccount(a), loginExpirationEnabled: false, loginExpiration: Number.NaN };
    expect(toRequest(a, f).settings.peer_login_expiration).toBe(86400);
    expect(changedFields(a, f)).toEqual(["peer_login_expiration_enabled"]);
  });
  it("reports nothing to save for an untouched form", () => {
    expect(changedFields(account(), fromAccount(account()))).toEqual([]);
  });
});
