import { describe, expect, it } from "vitest";
import { validateSetup } from "./setupForm";

describe("validateSetup", () => {
  const good = { email: "owner@example.com", name: "", password: "Str0ng-pass", confirm: "Str0ng-pass" };
  it("accepts what the server accepts", () => {
    expect(validateSetup(good)).toEqual({});
  });
  it("applies the server's password rules before sending", () => {
    for (const pw of ["Sh0rt!", "nouppercase1!", "NoDigits!!", "NoSymbol123", "Ünïcode1!x"]) {
      const e = validateSetup({ ...good, password: pw, confirm: pw });
      expect(e.password === undefined, pw).toBe(pw === "Ünïcode1!x");
    }
    expect(validateSetup({ ...good, password: "A1!" + "x".repeat(70), confirm: "A1!" + "x".repeat(70) }).password).toMatch(/72 bytes/);
  });
  it("checks the address and the repeated password", () => {
    expect(validateSetup({ ...good, email: "Owner <o@example.com>", confirm: "other" })).toEqual({
      email: "enter an e-mail address such as admin@example.com",
      confirm: "the passwords differ",
    });
  });
});
