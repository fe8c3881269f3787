/**
 * The posture check form: the checks this server evaluates (agent version,
 * OS and kernel versions, peer network ranges, running processes), checked
 * as the server's posture.Validate does before sending. Geolocation checks
 * need a GeoIP database this server does not have, so the server refuses
 * them and the form does not offer them.
 */
import type { Schemas } from "../api/client";

export type PostureCheck = Schemas["PostureCheck"];
export type PostureCheckUpdate = Schemas["PostureCheckUpdate"];
export type Checks = Schemas["Checks"];

export const OSES = ["android", "darwin", "ios", "linux", "windows"] as const;
export type OS = (typeof OSES)[number];
export const osLabel: Record<OS, string> = { android: "Android", darwin: "macOS", ios: "iOS", linux: "Linux (kernel)", windows: "Windows (kernel)" };

export interface ProcessRow {
  linux: string;
  mac: string;
  windows: string;
}

export interface PostureForm {
  name: string;
  description: string;
  nbEnabled: boolean;
  nbMin: string;
  osEnabled: boolean;
  os: Record<OS, string>;
  rangeEnabled: boolean;
  rangeAction: "allow" | "deny";
  /** One CIDR per line. */
  ranges: string;
  processEnabled: boolean;
  processes: ProcessRow[];
}

export type PostureErrors = Partial<Record<"name" | "checks" | "nbMin" | OS | "os" | "ranges" | "processes" | "form", string>>;

export const blankForm: PostureForm = {
  name: "",
  description: "",
  nbEnabled: false,
  nbMin: "",
  osEnabled: false,
  os: { android: "", darwin: "", ios: "", linux: "", windows: "" },
  rangeEnabled: false,
  rangeAction: "allow",
  ranges: "",
  processEnabled: false,
  processes: [{ linux: "", mac: "", windows: "" }],
};

export function fromCheck(c: PostureCheck): PostureForm {
  const k = c.checks;
  const o = k.os_version_check;
  const procs = (k.process_check?.processes ?? []).map((p) => ({ linux: p.linux_path ?? "", mac: p.mac_path ?? "", windows: p.windows_path ?? "" }));
  return {
    name: c.name,
    description: c.description,
    nbEnabled: !!k.nb_version_check,
    nbMin: k.nb_version_check?.min_version ?? "",
    osEnabled: !!o,
    os: {
      android: o?.android?.min_version ?? "",
      darwin: o?.darwin?.min_version ?? "",
      ios: o?.ios?.min_version ?? "",
      linux: o?.linux?.min_kernel_version ?? "",
      windows: o?.windows?.min_kernel_version ?? "",
    },
    rangeEnabled: !!k.peer_network_range_check,
    rangeAction: k.peer_network_range_check?.action ?? "allow",
    ranges: (k.peer_network_range_check?.ranges ?? []).join("\n"),
    processEnabled: !!k.process_check,
    processes: procs.length ? procs : [{ linux: "", mac: "", windows: "" }],
  };
}

/** A version as the server reads one: leading numbers, e.g. 0.28.0, v0.77.1-rc1, 6.1.0-18-amd64. */
export function isVersion(s: string): boolean {
  return /^v?\d/.test(s.trim());
}

function isIPv4(s: string): boolean {
  const parts = s.split(".");
  return parts.length === 4 && parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255 && (p.length === 1 || !p.startsWith("0")));
}

function isIPv6(s: string): boolean {
  if (!s.includes(":") || s.includes("%")) return false;
  try {
    return new URL(`http://[${s}]/`).hostname.length > 2;
  } catch {
    return false;
  }
}

/** A CIDR prefix as Go's netip.ParsePrefix accepts it (IPv4 or IPv6). */
export function isCIDR(s: string): boolean {
  const m = /^([^/]+)\/(\d{1,3})$/.exec(s.trim());
  if (!m) return false;
  const bits = Number(m[2]);
  if (m[2] !== String(bits)) return false;
  const addr = m[1] as string;
  if (isIPv4(addr)) return bits <= 32;
  if (isIPv6(addr)) return bits <= 128;
  return false;
}

export function rangeList(s: string): string[] {
  return s
    .split(/[\n,]/)
    .map((r) => r.trim())
    .filter(Boolean);
}

export function validatePosture(f: PostureForm): PostureErrors {
  const e: PostureErrors = {};
  if (!f.name.trim()) e.name = "A posture check needs a name";
  if (!f.nbEnabled && !f.osEnabled && !f.rangeEnabled && !f.processEnabled) e.checks = "Turn on at least one check";
  if (f.nbEnabled && !isVersion(f.nbMin)) e.nbMin = "A version, e.g. 0.28.0";
  if (f.osEnabled) {
    for (const os of OSES) if (f.os[os].trim() && !isVersion(f.os[os])) e[os] = "A version, e.g. 14.0 or 6.1.0";
    if (OSES.every((os) => !f.os[os].trim())) e.os = "Allow at least one OS: peers of an OS left empty are refused";
  }
  if (f.rangeEnabled) {
    const rs = rangeList(f.ranges);
    const bad = rs.find((r) => !isCIDR(r));
    if (rs.length === 0) e.ranges = "At least one range, e.g. 192.168.0.0/16";
    else if (bad) e.ranges = `${bad} is not a CIDR range`;
  }
  if (f.processEnabled) {
    const ps = f.processes.filter((p) => p.linux.trim() || p.mac.trim() || p.windows.trim());
    if (ps.length === 0) e.processes = "At least one process, with a path for at least one OS";
  }
  return e;
}

export function toRequest(f: PostureForm): PostureCheckUpdate {
  const checks: Checks = {};
  if (f.nbEnabled) checks.nb_version_check = { min_version: f.nbMin.trim() };
  if (f.osEnabled) {
    const o: NonNullable<Checks["os_version_check"]> = {};
    for (const os of ["android", "darwin", "ios"] as const) if (f.os[os].trim()) o[os] = { min_version: f.os[os].trim() };
    for (const os of ["linux", "windows"] as const) if (f.os[os].trim()) o[os] = { min_kernel_version: f.os[os].trim() };
    checks.os_version_check = o;
  }
  if (f.rangeEnabled) checks.peer_network_range_check = { action: f.rangeAction, ranges: rangeList(f.ranges) };
  if (f.processEnabled) {
    checks.process_check = {
      processes: f.processes
        .filter((p) => p.linux.trim() || p.mac.trim() || p.windows.trim())
        .map((p) => {
          const out: { linux_path?: string; mac_path?: string; windows_path?: string } = {};
          if (p.linux.trim()) out.linux_path = p.linux.trim();
          if (p.mac.trim()) out.mac_path = p.mac.trim();
          if (p.windows.trim()) out.windows_path = p.windows.trim();
          return out;
        }),
    };
  }
  return { name: f.name.trim(), description: f.description.trim(), checks };
}

/** One line per check, for the list. */
export function summarize(c: Checks): string[] {
  const out: string[] = [];
  if (c.nb_version_check) out.push(`Agent ≥ ${c.nb_version_check.min_version}`);
  if (c.os_version_check) {
    const o = c.os_version_check;
    const parts: string[] = [];
    for (const os of ["android", "darwin", "ios"] as const) if (o[os]) parts.push(`${osLabel[os]} ≥ ${o[os]?.min_version}`);
    for (const os of ["linux", "windows"] as const) if (o[os]) parts.push(`${osLabel[os]} ≥ ${o[os]?.min_kernel_version}`);
    out.push(`OS: ${parts.join(", ") || "none allowed"}`);
  }
  if (c.geo_location_check) out.push(`Location (${c.geo_location_check.action}): ${c.geo_location_check.locations.map((l) => l.city_name ? `${l.city_name}, ${l.country_code}` : l.country_code).join("; ")}`);
  if (c.peer_network_range_check) out.push(`Network ${c.peer_network_range_check.action}: ${c.peer_network_range_check.ranges.join(", ")}`);
  if (c.process_check) out.push(`Processes: ${c.process_check.processes.map((p) => p.linux_path || p.mac_path || p.windows_path).join(", ")}`);
  return out;
}
