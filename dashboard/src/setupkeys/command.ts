/**
 * The setup-key form's pure parts: the ready `netbird up` command an admin
 * copies, and the form's validation and request building (checked before
 * anything is sent).
 */
import type { CreateSetupKeyRequest } from "../api/client";

/** Quotes s for a POSIX shell when it holds anything but safe characters. */
export function shellQuote(s: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s)) return s;
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * The command that joins a machine with key. managementURL is the URL the
 * agent reaches management at: the dashboard's origin on an all-in-one
 * server.
 */
export function upCommand(managementURL: string, key: string): string {
  const url = managementURL.replace(/\/+$/, "");
  return `netbird up --management-url ${shellQuote(url)} --setup-key ${shellQuote(key)}`;
}

export interface SetupKeyForm {
  name: string;
  type: "reusable" | "one-off";
  /** Days until the key expires; 0: never. */
  expiresDays: number;
  /** Peers that may join with a reusable key; 0: unlimited. */
  usageLimit: number;
  autoGroups: string[];
  ephemeral: boolean;
  allowExtraDnsLabels: boolean;
}

export const defaultForm: SetupKeyForm = {
  name: "",
  type: "reusable",
  expiresDays: 30,
  usageLimit: 0,
  autoGroups: [],
  ephemeral: false,
  allowExtraDnsLabels: false,
};

/** The longest expiry the form offers: 365 days (the API's limit for the reference). */
export const MAX_EXPIRY_DAYS = 365;

export type FormErrors = Partial<Record<keyof SetupKeyForm, string>>;

/** Errors per field; empty when the form may be sent. */
export function validateForm(f: SetupKeyForm): FormErrors {
  const e: FormErrors = {};
  if (!f.name.trim()) e.name = "a name is required";
  else if (f.name.length > 255) e.name = "the name must be at most 255 characters";
  if (!Number.isInteger(f.expiresDays) || f.expiresDays < 0 || f.expiresDays > MAX_EXPIRY_DAYS) {
    e.expiresDays = `expiry must be 0 (never) to ${MAX_EXPIRY_DAYS} days`;
  }
  if (!Number.isInteger(f.usageLimit) || f.usageLimit < 0) e.usageLimit = "the usage limit must be 0 (unlimited) or more";
  return e;
}

/** The API request for a valid form. A one-off key is used once, whatever the limit says. */
export function toRequest(f: SetupKeyForm): CreateSetupKeyRequest {
  return {
    name: f.name.trim(),
    type: f.type,
    expires_in: f.expiresDays * 86400,
    auto_groups: [...f.autoGroups],
    usage_limit: f.type === "one-off" ? 1 : f.usageLimit,
    ephemeral: f.ephemeral,
    allow_extra_dns_labels: f.allowExtraDnsLabels,
  };
}
