/**
 * What the signed-in user may do, from GET /api/users/current: the server
 * reports each module's operations as the caller may use them. Pages hide
 * or disable what is not allowed and say why; the server still decides
 * (a control left enabled by stale permissions shows the server's 403).
 */
import type { User } from "../api/client";

export type Operation = "read" | "create" | "update" | "delete";

/** Whether the user may do op on module; unknown (not loaded yet) is false. */
export function can(user: User | undefined, module: string, op: Operation): boolean {
  return user?.permissions?.modules?.[module]?.[op] === true;
}

/** Why a control is disabled, or "" when the user may use it. */
export function deniedReason(user: User | undefined, module: string, op: Operation): string {
  if (!user) return "Loading your permissions…";
  if (can(user, module, op)) return "";
  const what: Record<Operation, string> = { read: "view", create: "create", update: "change", delete: "delete" };
  return `Your role (${user.role}) may not ${what[op]} ${module.replace(/_/g, " ")}`;
}
