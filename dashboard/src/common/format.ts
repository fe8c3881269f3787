/** Shared display helpers. */

/** A timestamp for people; the zero time (and anything before 2000) is "never". */
export function when(s: string | undefined): string {
  if (!s) return "never";
  const t = Date.parse(s);
  if (Number.isNaN(t) || new Date(t).getUTCFullYear() < 2000) return "never";
  return new Date(t).toLocaleString();
}
