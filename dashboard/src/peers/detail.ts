/**
 * The peer detail page's requests: PUT /api/peers/{id} takes the name,
 * SSH and login expiration every time (PeerRequest), and approval_required
 * false approves a pending peer.
 */
import type { Schemas } from "../api/client";

export type PeerRequest = Schemas["PeerRequest"];
type Peer = Schemas["Peer"];
type Current = Pick<Peer, "name" | "ssh_enabled" | "login_expiration_enabled">;

/** The request that changes only what change names. */
export function peerRequest(p: Current, change: Partial<PeerRequest>): PeerRequest {
  return { name: p.name, ssh_enabled: p.ssh_enabled, login_expiration_enabled: p.login_expiration_enabled, ...change };
}

/** The check of a new name before sending ("" when fine). */
export function validatePeerName(name: string): string {
  const n = name.trim();
  if (!n) return "A peer needs a name";
  if (n.length > 255) return "A name has at most 255 characters";
  return "";
}

/**
 * The settings the server answered differently from the request: the
 * ones it did not apply (this server keeps ssh_enabled off, say).
 */
export function notApplied(req: PeerRequest, got: Peer): string[] {
  const out: string[] = [];
  if (req.ssh_enabled !== got.ssh_enabled) out.push("SSH");
  if (req.login_expiration_enabled !== got.login_expiration_enabled) out.push("login expiration");
  if (req.approval_required === false && got.approval_required) out.push("approval");
  return out;
}
