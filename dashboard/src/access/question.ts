/** The "test access" question as typed, and its check before answering. */
import type { Protocol } from "./evaluate";

export interface Question {
  from: string;
  to: string;
  protocol: Protocol;
  /** The destination port as typed (tcp and udp only). */
  port: string;
}

export type QuestionErrors = Partial<Record<keyof Question, string>>;

export function checkQuestion(q: Question): QuestionErrors {
  const e: QuestionErrors = {};
  if (!q.from) e.from = "Pick the peer that connects";
  if (!q.to) e.to = "Pick the peer it connects to";
  else if (q.to === q.from) e.to = "Pick a different peer";
  if (q.protocol !== "icmp") {
    const p = q.port.trim();
    if (!p) e.port = "A TCP or UDP question needs a port";
    else if (!/^\d+$/.test(p) || Number(p) < 1 || Number(p) > 65535) e.port = "A port is a number from 1 to 65535";
  }
  return e;
}

/** The port to ask about, or undefined for ICMP. */
export function portOf(q: Question): number | undefined {
  return q.protocol === "icmp" ? undefined : Number(q.port.trim());
}
