import { describe, expect, it } from "vitest";
import { blankForm, fromCheck, isCIDR, isVersion, summarize, toRequest, validatePosture, type PostureCheck } from "./form";

describe("isVersion", () => {
  it("reads versions as the server does", () => {
    for (const v of ["0.28.0", "v0.77.1-rc1", "6.1.0-18-amd64", "14", " 10.0.19045 "]) expect(isVersion(v)).toBe(true);
    for (const v of ["", "latest", "vv1", ".1", "x1.2"]) expect(isVersion(v)).toBe(false);
  });
});

describe("isCIDR", () => {
  it("accepts what netip.ParsePrefix accepts", () => {
    for (const r of ["192.168.0.0/16", "10.0.0.1/32", "0.0.0.0/0", "fd00::/8", "2001:db8::1/128"]) expect(isCIDR(r)).toBe(true);
    for (const r of ["192.168.0.0", "192.168.0.0/33", "192.168.01.0/24", "fd00::/129", "fe80::1%eth0/64", "example.com/24", "1.2.3.4/016"]) expect(isCIDR(r)).toBe(false);
  });
});

describe("validatePosture", () => {
  it("needs a name and a check", () => {
    expect(validatePosture(blankForm)).toEqual({ name: "A posture check needs a name", checks: "Turn on at least one check" });
  });
  it("checks each enabled check", () => {
    const f = { ...blankForm, name: "x" };
    expect(validatePosture({ ...f, nbEnabled: true, nbMin: "new" })).toEqual({ nbMin: "A version, e.g. 0.28.0" });
    expect(validatePosture({ ...f, osEnabled: true })).toHaveProperty("os");
    expect(validatePosture({ ...f, osEnabled: true, os: { ...f.os, linux: "six" } })).toHaveProperty("linux");
    expect(validatePosture({ ...f, osEnabled: true, os: { ...f.os, linux: "6.1" } })).toEqual({});
    expect(validatePosture({ ...f, rangeEnabled: true, ranges: "" })).toHaveProperty("ranges");
    expect(validatePosture({ ...f, rangeEnabled: true, ranges: "10.0.0.0/8\nnope" })).toEqual({ ranges: "nope is not a CIDR range" });
    expect(validatePosture({ ...f, processEnabled: true })).toHaveProperty("processes");
    expect(validatePosture({ ...f, processEnabled: true, processes: [{ linux: "/usr/bin/x", mac: "", windows: "" }] })).toEqual({});
  });
});

describe("toRequest and fromCheck", () => {
  it("sends only the enabled checks, trimmed", () => {
    const req = toRequest({
      ...blankForm,
      name: " edr ",
      nbEnabled: true,
      nbMin: "0.28.0",
      osEnabled: true,
      os: { android: "", darwin: "14.0", ios: "", linux: "6.1", windows: "" },
      rangeEnabled: true,
      rangeAction: "deny",
      ranges: "10.0.0.0/8, 192.168.0.0/16\n",
      processEnabled: false,
    });
    expect(req).toEqual({
      name: "edr",
      description: "",
      checks: {
        nb_version_check: { min_version: "0.28.0" },
        os_version_check: { darwin: { min_version: "14.0" }, linux: { min_kernel_version: "6.1" } },
        peer_network_range_check: { action: "deny", ranges: ["10.0.0.0/8", "192.168.0.0/16"] },
      },
    });
  });
  it("round-trips a stored check", () => {
    const c: PostureCheck = {
      id: "pc1",
      name: "edr",
      description: "d",
      checks: { process_check: { processes: [{ linux_path: "/opt/edr", windows_path: "C:\\edr.exe" }] }, nb_version_check: { min_version: "0.30.0" } },
    };
    const f = fromCheck(c);
    expect(f.processEnabled && f.nbEnabled && !f.osEnabled).toBe(true);
    expect(toRequest(f)).toEqual({ name: "edr", description: "d", checks: c.checks });
    expect(summarize(c.checks)).toEqual(["Agent ≥ 0.30.0", "Processes: /opt/edr"]);
  });
});
