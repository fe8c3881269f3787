/**
 * Address syntax the routing forms check before sending, by the server's
 * own rules (management/routing/validate.go): an IP, a CIDR prefix
 * without host bits, a domain name (wildcards allowed). Checking here
 * lets a form point at the mistake, and suggest the fix, before a round
 * trip; the server still decides.
 */

/** The four bytes of a dotted IPv4 address, or null. */
export function parseIPv4(s: string): number[] | null {
  const parts = s.split(".");
  if (parts.length !== 4) return null;
  const out: number[] = [];
  for (const p of parts) {
    // No leading zeros: Go's netip refuses them (they read as octal elsewhere).
    if (!/^(0|[1-9]\d{0,2})$/.test(p)) return null;
    const n = Number(p);
    if (n > 255) return null;
    out.push(n);
  }
  return out;
}

/** The 16 bytes of an IPv6 address (with :: and a dotted IPv4 tail), or null. */
export function parseIPv6(s: string): number[] | null {
  if (s.includes("%")) return null; // a zone: not routable
  const halves = s.split("::");
  if (halves.length > 2) return null;
  const groups = (h: string): number[] | null => {
    if (h === "") return [];
    const out: number[] = [];
    const parts = h.split(":");
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i] ?? "";
      if (i === parts.length - 1 && p.includes(".")) {
        const v4 = parseIPv4(p);
        if (!v4) return null;
        out.push(((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0));
        continue;
      }
      if (!/^[0-9a-fA-F]{1,4}$/.test(p)) return null;
      out.push(parseInt(p, 16));
    }
    return out;
  };
  const head = groups(halves[0] ?? "");
  const tail = halves.length === 2 ? groups(halves[1] ?? "") : [];
  if (!head || !tail) return null;
  let all: number[];
  if (halves.length === 2) {
    const missing = 8 - head.length - tail.length;
    if (missing < 1) return null;
    all = [...head, ...new Array<number>(missing).fill(0), ...tail];
  } else {
    all = head;
  }
  if (all.length !== 8) return null;
  return all.flatMap((g) => [g >> 8, g & 0xff]);
}

/** An IP address's bytes (4 or 16), or null when s is not one. */
export function parseIP(s: string): number[] | null {
  return s.includes(":") ? parseIPv6(s) : parseIPv4(s);
}

/** The text of an address's bytes: dotted IPv4, or RFC 5952 IPv6. */
export function formatIP(b: number[]): string {
  if (b.length === 4) return b.join(".");
  const g: number[] = [];
  for (let i = 0; i < 16; i += 2) g.push(((b[i] ?? 0) << 8) | (b[i + 1] ?? 0));
  // The longest run (of at least two) of zero groups becomes "::".
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (xs: number[]) => xs.map((x) => x.toString(16)).join(":");
  if (best < 0) return hex(g);
  return `${hex(g.slice(0, best))}::${hex(g.slice(best + bestLen))}`;
}

export interface Prefix {
  bytes: number[];
  bits: number;
  v6: boolean;
}

/** Reads "10.0.0.0/24" or "fd00::/64": the prefix, or an error message. */
export function parsePrefix(text: string): Prefix | string {
  const s = text.trim();
  const m = /^([^/]+)\/(\d{1,3})$/.exec(s);
  const b = m ? parseIP(m[1] ?? "") : null;
  if (!m || !b) return `"${s}" is not a CIDR prefix (like 10.0.0.0/24)`;
  const bits = Number(m[2]);
  if (bits > b.length * 8) return `"${s}": a /${bits} prefix is longer than the address`;
  const masked = b.map((x, i) => {
    const keep = Math.max(0, Math.min(8, bits - i * 8));
    return x & ((0xff << (8 - keep)) & 0xff);
  });
  if (masked.some((x, i) => x !== b[i])) return `${s} has host bits set; did you mean ${formatIP(masked)}/${bits}?`;
  return { bytes: b, bits, v6: b.length === 16 };
}

/** Whether the prefix is 0.0.0.0/0 or ::/0: a route through it is an exit node. */
export function isDefaultRoute(network: string | undefined): boolean {
  const p = network ? parsePrefix(network) : "";
  return typeof p !== "string" && p.bits === 0;
}

/**
 * Checks a domain name as the server does (labels of letters, digits and
 * hyphens, at most 63 each, 253 in all, optionally "*." in front). Names
 * with non-ASCII letters are left to the server, which converts them to
 * punycode. Returns an error message, or "".
 */
export function domainError(text: string): string {
  const d = text.trim().replace(/\.$/, "");
  const name = d.startsWith("*.") ? d.slice(2) : d;
  if (!name) return `"${text}" is not a domain name`;
  if (/\s/.test(name)) return `"${text}" is not a domain name: it has a space`;
  // eslint-disable-next-line no-control-regex
  if (/[^\x00-\x7f]/.test(name)) return "";
  if (name.length > 253) return `"${text}" is longer than 253 characters`;
  for (const l of name.toLowerCase().split(".")) {
    if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(l)) return `"${text}" is not a valid domain name: bad label "${l}"`;
  }
  return "";
}

export type ResourceType = "host" | "subnet" | "domain";

/**
 * What a network resource's address is, as the server will classify it
 * (a bare IP or a full-length prefix is a host, a shorter prefix a
 * subnet, anything else a domain), or an error message.
 */
export function resourceType(address: string): { type: ResourceType } | { error: string } {
  const a = address.trim();
  if (!a) return { error: "Give a host IP, a subnet or a domain" };
  if (a.includes("%")) return { error: `"${a}": an address with a zone cannot be routed` };
  if (parseIP(a)) return { type: "host" };
  if (a.includes("/")) {
    const p = parsePrefix(a);
    if (typeof p === "string") return { error: p };
    return { type: p.bits === p.bytes.length * 8 ? "host" : "subnet" };
  }
  const e = domainError(a);
  if (e) return { error: `"${a}" is not a host IP, subnet or domain` };
  return { type: "domain" };
}
