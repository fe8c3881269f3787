import { describe, expect, it } from "vitest";
import { ApiError } from "./client";
import { fieldOf } from "./fielderror";

const e = (status: number, message: string) => new ApiError(status, message, status, "POST", "/api/x");
const fields = { name: "name", expires_in: "expiresDays", usage_limit: "usageLimit", email: "email", password: "password" } as const;

describe("fieldOf", () => {
  it("finds the field the server names", () => {
    expect(fieldOf(e(422, "expires_in must be 0 (never) to 31536000 seconds"), fields)).toBe("expiresDays");
    expect(fieldOf(e(400, "invalid request: a valid e-mail address is required"), fields)).toBeUndefined();
    expect(fieldOf(e(422, "invalid: the password needs at least 8 characters"), fields)).toBe("password");
    expect(fieldOf(e(409, "a setup key with this name exists"), fields)).toBe("name");
  });
  it("matches whole words only", () => {
    expect(fieldOf(e(422, "username taken"), { name: "name" })).toBeUndefined();
    expect(fieldOf(e(422, "usage_limits unknown"), { usage_limit: "usageLimit" })).toBeUndefined();
  });
  it("leaves other statuses and errors to the form", () => {
    expect(fieldOf(e(500, "name broke"), fields)).toBeUndefined();
    expect(fieldOf(new Error("name"), fields)).toBeUndefined();
  });
});
