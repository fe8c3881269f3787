/**
 * The activity log's filters. GET /api/events/audit takes no query
 * parameters and answers every event of the account, newest first, so the
 * page filters here: by activity codes, initiator, target, free text and a
 * date range (local days, both ends included).
 */
import type { Schemas } from "../api/client";
import { describeCode } from "./codes";

export type Event = Schemas["Event"];

export interface EventQuery {
  codes: string[];
  /** An initiator_id, or "" for anyone. */
  initiator: string;
  /** Matches the target's ID or the event's meta values (a name, an e-mail...). */
  target: string;
  /** Matches the description, code, initiator and meta. */
  text: string;
  /** YYYY-MM-DD, local day; "" for no bound. */
  from: string;
  to: string;
}

export const emptyQuery: EventQuery = { codes: [], initiator: "", target: "", text: "", from: "", to: "" };

/** The local midnight starting a YYYY-MM-DD day, or NaN. */
export function dayStart(day: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day);
  if (!m) return Number.NaN;
  return new Date(Number(m[1]), Number(m[2]) - 1, Number(m[3])).getTime();
}

/** The local midnight ending a YYYY-MM-DD day (daylight saving included), or NaN. */
export function nextDayStart(day: string): number {
  const t = dayStart(day);
  if (Number.isNaN(t)) return t;
  const d = new Date(t);
  return new Date(d.getFullYear(), d.getMonth(), d.getDate() + 1).getTime();
}

/** A message when the range is unusable, else "". */
export function rangeError(q: Pick<EventQuery, "from" | "to">): string {
  if (q.from && Number.isNaN(dayStart(q.from))) return "The start is not a date";
  if (q.to && Number.isNaN(dayStart(q.to))) return "The end is not a date";
  if (q.from && q.to && dayStart(q.from) > dayStart(q.to)) return "The start is after the end";
  return "";
}

function includes(hay: string | undefined, needle: string): boolean {
  return (hay ?? "").toLowerCase().includes(needle);
}

export function filterEvents(events: readonly Event[], q: EventQuery): Event[] {
  const codes = new Set(q.codes);
  const target = q.target.trim().toLowerCase();
  const text = q.text.trim().toLowerCase();
  const from = q.from ? dayStart(q.from) : Number.NaN;
  // The end day is included: events before the next local midnight.
  const toEnd = q.to ? nextDayStart(q.to) : Number.NaN;
  return events.filter((e) => {
    if (codes.size && !codes.has(e.activity_code)) return false;
    if (q.initiator && e.initiator_id !== q.initiator) return false;
    const metaValues = Object.values(e.meta ?? {});
    if (target && !includes(e.target_id, target) && !metaValues.some((v) => includes(v, target))) return false;
    if (text) {
      const hit =
        includes(describeCode(e.activity_code), text) ||
        includes(e.activity, text) ||
        includes(e.activity_code, text) ||
        includes(e.initiator_name, text) ||
        includes(e.initiator_email, text) ||
        includes(e.target_id, text) ||
        Object.entries(e.meta ?? {}).some(([k, v]) => includes(k, text) || includes(v, text));
      if (!hit) return false;
    }
    if (!Number.isNaN(from) || !Number.isNaN(toEnd)) {
      const t = Date.parse(e.timestamp);
      if (Number.isNaN(t)) return false;
      if (!Number.isNaN(from) && t < from) return false;
      if (!Number.isNaN(toEnd) && t >= toEnd) return false;
    }
    return true;
  });
}

/** The initiators present in the events, for the filter's choices. */
export function initiatorsOf(events: readonly Event[]): { value: string; label: string }[] {
  const seen = new Map<string, string>();
  for (const e of events) {
    if (!e.initiator_id || seen.has(e.initiator_id)) continue;
    seen.set(e.initiator_id, e.initiator_name || e.initiator_email || e.initiator_id);
  }
  return [...seen].map(([value, label]) => ({ value, label })).sort((a, b) => a.label.localeCompare(b.label));
}
