/**
 * Users page logic kept out of React so that it is unit-tested: the roles,
 * a user's status as people read it, and the forms' validation (the
 * server's bounds: e-mail required for people, a name for service users,
 * tokens of 1 to 365 days, invite links of at most the server's maximum).
 */
import type { User } from "../api/client";

export const ROLES = ["owner", "admin", "user", "billing_admin", "auditor", "network_admin"] as const;
export type Role = (typeof ROLES)[number];

export const roleLabel: Record<string, string> = {
  owner: "Owner",
  admin: "Admin",
  user: "User",
  billing_admin: "Billing admin",
  auditor: "Auditor",
  network_admin: "Network admin",
};

export const roleHelp: Record<string, string> = {
  owner: "Manages everything, the account included; one per account",
  admin: "Manages everything but the account itself",
  user: "Sees and manages only its own peers and tokens",
  billing_admin: "Here the same as a user (there is no billing)",
  auditor: "Reads everything, changes nothing",
  network_admin: "Manages groups, policies and posture checks; reads the rest",
};

/** The roles a new user or a role change may pick: there is one owner, made at setup. */
export function assignableRoles(): { value: string; label: string }[] {
  return ROLES.filter((r) => r !== "owner").map((r) => ({ value: r, label: roleLabel[r] ?? r }));
}

export type Status = "active" | "invited" | "blocked" | "pending approval";

/** A user's status: pending approval is its own state (the API also reports it as blocked). */
export function statusOf(u: Pick<User, "status" | "is_blocked" | "pending_approval">): Status {
  if (u.pending_approval) return "pending approval";
  if (u.is_blocked || u.status === "blocked") return "blocked";
  if (u.status === "invited") return "invited";
  return "active";
}

export const statusColor: Record<Status, string> = { active: "green", invited: "blue", blocked: "red", "pending approval": "orange" };

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export interface PersonForm {
  email: string;
  name: string;
  role: string;
  autoGroups: string[];
}
export type PersonErrors = Partial<Record<keyof PersonForm | "expiresDays", string>>;

/** mode "link": an invite link, for which the server needs a name; "password": the name defaults to the e-mail. */
export function validatePerson(f: PersonForm, mode: "link" | "password" = "password"): PersonErrors {
  const e: PersonErrors = {};
  if (!EMAIL.test(f.email.trim())) e.email = "Enter an e-mail address";
  if (mode === "link" && !f.name.trim()) e.name = "An invitation needs a name";
  if (!f.role || f.role === "owner") e.role = "Pick a role";
  return e;
}

export interface ServiceUserForm {
  name: string;
  role: string;
  autoGroups: string[];
}
export function validateServiceUser(f: ServiceUserForm): Partial<Record<keyof ServiceUserForm, string>> {
  const e: Partial<Record<keyof ServiceUserForm, string>> = {};
  if (!f.name.trim()) e.name = "A service user needs a name";
  if (!f.role || f.role === "owner") e.role = "Pick a role";
  return e;
}

/** Personal access tokens live 1 to 365 days (the server's MaxTokenDays). */
export const MAX_TOKEN_DAYS = 365;
/** Invite links live at most 30 days (the server's MaxInviteTTL). */
export const MAX_INVITE_DAYS = 30;

export interface TokenForm {
  name: string;
  expiresDays: number;
}
export function validateToken(f: TokenForm): Partial<Record<keyof TokenForm, string>> {
  const e: Partial<Record<keyof TokenForm, string>> = {};
  if (!f.name.trim()) e.name = "A token needs a name";
  if (!Number.isInteger(f.expiresDays) || f.expiresDays < 1 || f.expiresDays > MAX_TOKEN_DAYS) {
    e.expiresDays = `Expires in 1 to ${MAX_TOKEN_DAYS} days`;
  }
  return e;
}

/**
 * Who may manage whose tokens, as the server decides: everyone their own;
 * owners and admins those of service users; nobody another person's.
 * Returns "" when allowed, else the reason.
 */
export function tokenAccess(me: User | undefined, target: User): string {
  if (!me) return "Loading your permissions…";
  if (me.id === target.id) return "";
  if (target.is_service_user && (me.role === "owner" || me.role === "admin")) return "";
  if (target.is_service_user) return "Only owners and admins manage service users' tokens";
  return "Personal access tokens belong to their user";
}

/** The link an invitee opens to choose a password. */
export function inviteLink(origin: string, token: string): string {
  return `${origin.replace(/\/$/, "")}/invite?token=${encodeURIComponent(token)}`;
}
