/**
 * How a peer's connections go (P2P or relayed), as its wiremesh agent
 * reports them (the `connections` extension of GET /api/peers; absent
 * for official clients and offline peers).
 */
import type { Peer } from "../api/client";

/** The peers-page summary: "3 P2P · 1 relayed", "—" without a report. */
export function connectionsText(p: Pick<Peer, "connections">): string {
  const c = p.connections;
  if (!c) return "—";
  const parts: string[] = [];
  if (c.p2p > 0 || (c.relayed === 0 && c.connecting === 0)) parts.push(`${c.p2p} P2P`);
  if (c.relayed > 0) parts.push(`${c.relayed} relayed`);
  if (c.connecting > 0) parts.push(`${c.connecting} connecting`);
  return parts.join(" · ");
}

/** The label of one connection type. */
export function connectionTypeLabel(t: "p2p" | "relayed" | "connecting"): string {
  return t === "p2p" ? "P2P" : t;
}
