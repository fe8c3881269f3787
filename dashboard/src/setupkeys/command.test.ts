import { describe, expect, it } from "vitest";
import { defaultForm, shellQuote, toRequest, upCommand, validateForm } from "./command";

describe("upCommand", () => {
  it("builds the join command", () => {
    expect(upCommand("https://vpn.example.com", "A1B2C3D4-E5F6-4789-ABCD-0123456789AB")).toBe(
      "netbird up --management-url https://vpn.example.com --setup-key A1B2C3D4-E5F6-4789-ABCD-0123456789AB",
    );
  });
  it("drops trailing slashes and keeps the port", () => {
    expect(upCommand("http://127.0.0.1:33073//", "k")).toBe("netbird up --management-url http://127.0.0.1:33073 --setup-key k");
  });
  it("quotes what a shell would split or expand", () => {
    expect(shellQuote("a b")).toBe("'a b'");
    expect(shellQuote("it's")).toBe(`'it'\\''s'`);
    expect(shellQuote("$(rm -rf /)")).toBe("'$(rm -rf /)'");
    expect(upCommand("https://h", "x;y")).toBe("netbird up --management-url https://h --setup-key 'x;y'");
  });
});

describe("validateForm", () => {
  it("accepts the defaults with a name", () => {
    expect(validateForm({ ...defaultForm, name: "servers" })).toEqual({});
  });
  it("names each bad field", () => {
    expect(validateForm({ ...defaultForm, name: "  ", expiresDays: 366, usageLimit: -1 })).toEqual({
      name: "a name is required",
      expiresDays: "expiry must be 0 (never) to 365 days",
      usageLimit: "the usage limit must be 0 (unlimited) or more",
    });
    expect(validateForm({ ...defaultForm, name: "x", expiresDays: 1.5 }).expiresDays).toBeDefined();
  });
});

describe("toRequest", () => {
  it("maps every option", () => {
    expect(
      toRequest({ name: " ci ", type: "reusable", expiresDays: 7, usageLimit: 5, autoGroups: ["g1"], ephemeral: true, allowExtraDnsLabels: true }),
    ).toEqual({ name: "ci", type: "reusable", expires_in: 7 * 86400, auto_groups: ["g1"], usage_limit: 5, ephemeral: true, allow_extra_dns_labels: true });
  });
  it("never expiring, one-off", () => {
    const r = toRequest({ ...defaultForm, name: "once", type: "one-off", expiresDays: 0, usageLimit: 9 });
    expect([r.expires_in, r.usage_limit, r.type]).toEqual([0, 1, "one-off"]);
  });
});
