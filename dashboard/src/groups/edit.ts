/**
 * Group edits as the API takes them: PUT /api/groups/{id} replaces the
 * group's name and its whole peer list, so adding or removing one peer
 * sends the list as the server last showed it, changed by that peer.
 */
import type { Schemas } from "../api/client";
import { ALL_GROUP } from "../access/evaluate";

export type GroupRequest = Schemas["GroupRequest"];

/** The request that keeps the group as it is. */
export function groupRequest(g: Pick<Schemas["Group"], "name" | "peers">): GroupRequest {
  return { name: g.name, peers: g.peers.map((p) => p.id) };
}

/** The request that adds (or removes) one peer, leaving the others. */
export function withPeer(g: Pick<Schemas["Group"], "name" | "peers">, peer: string, member: boolean): GroupRequest {
  const ids = g.peers.map((p) => p.id).filter((id) => id !== peer);
  if (member) ids.push(peer);
  return { name: g.name, peers: ids };
}

/** The group's check of a name before sending ("" when fine). */
export function validateGroupName(name: string, others: readonly { id: string; name: string }[], self = ""): string {
  const n = name.trim();
  if (!n) return "A group needs a name";
  if (n.length > 255) return "A name has at most 255 characters";
  if (n === ALL_GROUP) return "All is the built-in group's name";
  if (others.some((g) => g.id !== self && g.name === n)) return `A group named "${n}" exists`;
  return "";
}

/** The built-in group of every peer cannot be renamed, edited or deleted. */
export function isBuiltIn(g: { name: string }): boolean {
  return g.name === ALL_GROUP;
}
