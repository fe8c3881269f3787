/**
 * fieldOf places a server error beside the control that caused it: the
 * server names the offending field in its message ("expires_in must
 * be ...", "name: ..."); a form maps each request field to its control.
 */
import { ApiError } from "./client";

/**
 * The form field whose request name the error message names, or undefined
 * (the error then belongs beside the form's submit button). fields maps
 * request field names (as the API spells them) to form field names.
 */
export function fieldOf<F extends string>(err: unknown, fields: Record<string, F>): F | undefined {
  if (!(err instanceof ApiError)) return undefined;
  if (err.status !== 400 && err.status !== 422 && err.status !== 409) return undefined;
  const msg = err.message.toLowerCase();
  // The longest request name first, so "pat_expire_in" wins over "expire".
  const names = Object.keys(fields).sort((a, b) => b.length - a.length);
  for (const n of names) {
    const re = new RegExp(`(^|[^a-z_])${n.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}([^a-z_]|$)`);
    if (re.test(msg)) return fields[n];
  }
  return undefined;
}
