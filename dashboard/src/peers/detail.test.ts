import { describe, expect, it } from "vitest";
import type { Peer } from "../api/client";
import { notApplied, peerRequest, validatePeerName } from "./detail";

const cur = { name: "web", ssh_enabled: false, login_expiration_enabled: true };

describe("peerRequest", () => {
  it("keeps what does not change", () => {
    expect(peerRequest(cur, { name: "web2" })).toEqual({ name: "web2", ssh_enabled: false, login_expiration_enabled: true });
  });
  it("approves", () => {
    expect(peerRequest(cur, { approval_required: false })).toEqual({ ...cur, approval_required: false });
  });
});

describe("validatePeerName", () => {
  it("checks", () => {
    expect(validatePeerName(" ")).toBe("A peer needs a name");
    expect(validatePeerName("a".repeat(256))).toBe("A name has at most 255 characters");
    expect(validatePeerName("ok")).toBe("");
  });
});

describe("notApplied", () => {
  it("names what the server ignored", () => {
    const got = { ...cur, approval_required: true } as Peer;
    expect(notApplied({ ...cur, ssh_enabled: true, approval_required: false }, got)).toEqual(["SSH", "approval"]);
    expect(notApplied(cur, got)).toEqual([]);
  });
});
