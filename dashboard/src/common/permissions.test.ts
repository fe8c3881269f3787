import { describe, expect, it } from "vitest";
import type { User } from "../api/client";
import { can, deniedReason } from "./permissions";

const user = (role: string, modules: Record<string, Record<string, boolean>>): User => ({
  id: "u1",
  email: "a@b.c",
  name: "A",
  role,
  status: "active",
  auto_groups: [],
  is_blocked: false,
  is_current: true,
  is_service_user: false,
  last_login: "",
  issued: "api",
  permissions: { is_restricted: false, modules },
});

describe("can", () => {
  it("reads the module's operation", () => {
    const u = user("auditor", { users: { read: true, create: false }, setup_keys: { read: true } });
    expect(can(u, "users", "read")).toBe(true);
    expect(can(u, "users", "create")).toBe(false);
    expect(can(u, "users", "delete")).toBe(false);
    expect(can(u, "posture_checks", "read")).toBe(false);
    expect(can(undefined, "users", "read")).toBe(false);
  });
  it("says why not", () => {
    const u = user("auditor", { users: { read: true } });
    expect(deniedReason(u, "users", "read")).toBe("");
    expect(deniedReason(u, "setup_keys", "delete")).toBe("Your role (auditor) may not delete setup keys");
    expect(deniedReason(undefined, "users", "read")).toMatch(/Loading/);
  });
});
