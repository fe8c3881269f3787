import { describe, expect, it } from "vitest";
import type { User } from "../api/client";
import { assignableRoles, inviteLink, statusOf, tokenAccess, validatePerson, validateServiceUser, validateToken } from "./users";

const u = (o: Partial<User>): User => ({
  id: "u",
  email: "u@example.com",
  name: "U",
  role: "user",
  status: "active",
  auto_groups: [],
  is_blocked: false,
  is_current: false,
  is_service_user: false,
  last_login: "",
  issued: "api",
  ...o,
});

describe("statusOf", () => {
  it("tells pending approval apart from blocked", () => {
    expect(statusOf(u({}))).toBe("active");
    expect(statusOf(u({ status: "invited" }))).toBe("invited");
    expect(statusOf(u({ status: "blocked", is_blocked: true }))).toBe("blocked");
    expect(statusOf(u({ status: "blocked", is_blocked: true, pending_approval: true }))).toBe("pending approval");
  });
});

describe("roles", () => {
  it("offers every role but owner", () => {
    expect(assignableRoles().map((r) => r.value)).toEqual(["admin", "user", "billing_admin", "auditor", "network_admin"]);
  });
});

describe("validation", () => {
  it("needs an e-mail and a role for a person", () => {
    expect(validatePerson({ email: "x", name: "", role: "user", autoGroups: [] })).toEqual({ email: "Enter an e-mail address" });
    expect(validatePerson({ email: " a@b.io ", name: "", role: "owner", autoGroups: [] })).toEqual({ role: "Pick a role" });
    expect(validatePerson({ email: "a@b.io", name: "", role: "auditor", autoGroups: [] })).toEqual({});
    expect(validatePerson({ email: "a@b.io", name: " ", role: "auditor", autoGroups: [] }, "link")).toEqual({ name: "An invitation needs a name" });
    expect(validatePerson({ email: "a@b.io", name: "A", role: "auditor", autoGroups: [] }, "link")).toEqual({});
  });
  it("needs a name for a service user", () => {
    expect(validateServiceUser({ name: "  ", role: "admin", autoGroups: [] })).toEqual({ name: "A service user needs a name" });
    expect(validateServiceUser({ name: "ci", role: "admin", autoGroups: [] })).toEqual({});
  });
  it("bounds a token's life to 1-365 days", () => {
    expect(validateToken({ name: "t", expiresDays: 0 })).toHaveProperty("expiresDays");
    expect(validateToken({ name: "t", expiresDays: 366 })).toHaveProperty("expiresDays");
    expect(validateToken({ name: "t", expiresDays: 1.5 })).toHaveProperty("expiresDays");
    expect(validateToken({ name: "t", expiresDays: Number.NaN })).toHaveProperty("expiresDays");
    expect(validateToken({ name: "", expiresDays: 30 })).toEqual({ name: "A token needs a name" });
    expect(validateToken({ name: "t", expiresDays: 365 })).toEqual({});
  });
});

describe("tokenAccess", () => {
  const admin = u({ id: "a", role: "admin" });
  it("lets everyone manage their own tokens", () => {
    expect(tokenAccess(u({ id: "x", role: "user" }), u({ id: "x" }))).toBe("");
  });
  it("lets admins manage service users' tokens, nobody another person's", () => {
    expect(tokenAccess(admin, u({ id: "s", is_service_user: true }))).toBe("");
    expect(tokenAccess(admin, u({ id: "p" }))).toMatch(/belong to their user/);
    expect(tokenAccess(u({ id: "n", role: "network_admin" }), u({ id: "s", is_service_user: true }))).toMatch(/owners and admins/);
    expect(tokenAccess(undefined, u({}))).toMatch(/Loading/);
  });
});

describe("inviteLink", () => {
  it("escapes the token", () => {
    expect(inviteLink("https://d.example/", "nbi_a+b")).toBe("https://d.example/invite?token=nbi_a%2Bb");
  });
});
