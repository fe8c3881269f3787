/**
 * Live updates: one subscription to GET /api/events/stream (a wiremesh
 * extension, Server-Sent Events), read with fetch and a ReadableStream
 * because EventSource cannot send the Authorization header. Events name
 * what changed in the account ("peers", "groups", ...); pages refetch the
 * lists they show through the normal API (usePoll). While the stream is
 * down, usePoll falls back to polling; the stream reconnects with backoff
 * and, once back, asks every page to refetch ("*"), since changes made
 * meanwhile were not told.
 *
 * A hidden tab lets go of its stream after the linger and opens it again
 * when shown: browsers allow six HTTP/1.1 connections per host, shared by
 * all tabs, and six tabs each holding a stream would leave none for the
 * API calls themselves.
 *
 * It does not fetch any data itself.
 */
import { createContext } from "react";

/** The kinds the server names; "*" asks for everything visible. */
export type LiveKind =
  | "peers"
  | "groups"
  | "policies"
  | "setup-keys"
  | "users"
  | "routes"
  | "networks"
  | "dns"
  | "events"
  | "account";

export const ALL = "*";

export interface SSEEvent {
  event: string;
  data: string;
}

/**
 * SSEParser turns the bytes of a text/event-stream, in chunks cut
 * anywhere, into events, as the HTML standard's parsing rules say: lines
 * end with CRLF, LF or CR; a blank line dispatches; ":" starts a comment;
 * "field: value" loses one leading space; data lines join with "\n"; an
 * event without a name is "message"; one without data is dropped.
 */
/** The longest event (or unfinished line) a parser keeps: 64 KiB. */
export const MAX_EVENT_BYTES = 64 * 1024;

export class SSEParser {
  private buf = "";
  /** The characters of the event being read (its data lines). */
  private size = 0;
  private name = "";
  private data: string[] = [];
  private sawData = false;
  /** A CR ended the last chunk: a following LF belongs to it. */
  private pendingCR = false;

  push(chunk: string): SSEEvent[] {
    const out: SSEEvent[] = [];
    let s = chunk;
    if (this.pendingCR && s.startsWith("\n")) s = s.slice(1);
    this.pendingCR = false;
    this.buf += s;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf);
      if (!m) break;
      if (m[0] === "\r" && m.index === this.buf.length - 1) {
        // Maybe the first half of a CRLF cut between chunks.
        this.pendingCR = true;
      }
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      const ev = this.line(line);
      if (ev) out.push(ev);
    }
    // Ours are some tens of bytes: a server (or something in between)
    // that sends more is not the live event stream.
    if (this.buf.length + this.size > MAX_EVENT_BYTES) {
      throw new Error(`an event of the live event stream is longer than ${MAX_EVENT_BYTES} bytes`);
    }
    return out;
  }

  private line(line: string): SSEEvent | null {
    if (line === "") {
      const ev = this.sawData ? { event: this.name || "message", data: this.data.join("\n") } : null;
      this.name = "";
      this.data = [];
      this.sawData = false;
      this.size = 0;
      return ev;
    }
    if (line.startsWith(":")) return null;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.name = value;
    else if (field === "data") {
      this.data.push(value);
      this.size += value.length + 1;
      this.sawData = true;
    }
    return null;
  }
}

export type LiveState = "connecting" | "live" | "down";

/** Timers, injectable so tests drive time. */
export interface Clock {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realClock: Clock = {
  setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
  clearTimeout: (h) => globalThis.clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** Whether the page is shown, injectable so tests drive it. */
export interface Visibility {
  hidden(): boolean;
  /** Calls fn on every change; returns the unsubscribe. */
  onChange(fn: () => void): () => void;
}

/** The document's visibility (always visible where there is no document). */
const documentVisibility: Visibility = {
  hidden: () => typeof document !== "undefined" && document.visibilityState === "hidden",
  onChange: (fn) => {
    if (typeof document === "undefined") return () => undefined;
    document.addEventListener("visibilitychange", fn);
    return () => document.removeEventListener("visibilitychange", fn);
  },
};

/** An error that retrying cannot cure: the server has no such route. */
function permanent(e: unknown): boolean {
  return typeof e === "object" && e !== null && (e as { status?: unknown }).status === 404;
}

export interface LiveOptions {
  /** Opens the stream (Client.openStream); rejects when it answers an error. */
  open: (signal: AbortSignal) => Promise<Response>;
  clock?: Clock;
  /** Jitter source in [0, 1) (Math.random). */
  random?: () => number;
  /** First reconnect wait (1 s); it doubles up to maxBackoffMs (30 s). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /**
   * A stream silent for this long is taken for dead and reopened (45 s:
   * the server sends a comment every 20 s).
   */
  idleMs?: number;
  /**
   * How long the stream stays open after its last subscriber left (10 s),
   * so that moving between pages does not reconnect.
   */
  lingerMs?: number;
  /** The page's visibility (the document's). */
  visibility?: Visibility;
  /**
   * How long a stream must have been up before a drop counts as a first
   * failure again (30 s): a server that accepts and ends at once is
   * retried with growing waits, not every second.
   */
  stableMs?: number;
}

/**
 * LiveStream keeps the subscription open while anybody listens: the
 * first subscriber starts it, the last one's leaving stops it.
 */
export class LiveStream {
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly minBackoff: number;
  private readonly maxBackoff: number;
  private readonly idle: number;
  private readonly linger: number;
  private lingerTimer: unknown = null;
  private listeners = new Set<(kind: string) => void>();
  private stateListeners = new Set<(s: LiveState) => void>();
  private st: LiveState = "down";
  private ctrl: AbortController | null = null;
  private retry: unknown = null;
  private idleTimer: unknown = null;
  private failures = 0;
  private running = false;
  private readonly visibility: Visibility;
  private readonly stable: number;
  private stableTimer: unknown = null;
  private hiddenTimer: unknown = null;
  /** Let go while the page is hidden; reopened when it is shown. */
  private paused = false;
  /** The server has no stream (404): polling only, until stop. */
  private unavailable = false;
  private offVisibility: (() => void) | null = null;

  constructor(private readonly o: LiveOptions) {
    this.clock = o.clock ?? realClock;
    this.random = o.random ?? Math.random;
    this.minBackoff = o.minBackoffMs ?? 1000;
    this.maxBackoff = o.maxBackoffMs ?? 30_000;
    this.idle = o.idleMs ?? 45_000;
    this.linger = o.lingerMs ?? 10_000;
    this.visibility = o.visibility ?? documentVisibility;
    this.stable = o.stableMs ?? 30_000;
  }

  get state(): LiveState {
    return this.st;
  }

  /** Calls fn with each changed kind (or "*"); returns the unsubscribe. */
  subscribe(fn: (kind: string) => void): () => void {
    this.listeners.add(fn);
    if (this.lingerTimer !== null) this.clock.clearTimeout(this.lingerTimer);
    this.lingerTimer = null;
    if (!this.running) this.start();
    return () => {
      if (!this.listeners.delete(fn) || this.listeners.size > 0) return;
      this.lingerTimer = this.clock.setTimeout(() => {
        this.lingerTimer = null;
        if (this.listeners.size === 0) this.stop();
      }, this.linger);
    };
  }

  /** Calls fn on every state change; returns the unsubscribe. */
  onState(fn: (s: LiveState) => void): () => void {
    this.stateListeners.add(fn);
    return () => this.stateListeners.delete(fn);
  }

  /** The wait before reconnect attempt n (1-based): doubling, jittered to 50-100 %. */
  backoff(n: number): number {
    const full = Math.min(this.maxBackoff, this.minBackoff * 2 ** Math.max(0, n - 1));
    return Math.round(full * (0.5 + this.random() / 2));
  }

  private start() {
    this.running = true;
    this.failures = 0;
    this.unavailable = false;
    this.offVisibility = this.visibility.onChange(() => this.onVisibility());
    this.paused = false;
    if (this.visibility.hidden()) this.onVisibility();
    void this.connect();
  }

  /** Ends the stream and any pending reconnect. */
  stop() {
    this.running = false;
    this.offVisibility?.();
    this.offVisibility = null;
    if (this.lingerTimer !== null) this.clock.clearTimeout(this.lingerTimer);
    this.lingerTimer = null;
    if (this.hiddenTimer !== null) this.clock.clearTimeout(this.hiddenTimer);
    this.hiddenTimer = null;
    this.paused = false;
    this.disconnect();
  }

  /** Closes the connection and any pending reconnect; state down. */
  private disconnect() {
    this.ctrl?.abort();
    this.ctrl = null;
    if (this.retry !== null) this.clock.clearTimeout(this.retry);
    this.retry = null;
    this.clearStable();
    this.clearIdle();
    this.set("down");
  }

  /**
   * Hidden for the linger: let go of the connection (a quick look at
   * another tab keeps it). Shown again: reconnect at once; ready then
   * asks every page to refetch.
   */
  private onVisibility() {
    if (!this.running) return;
    if (this.visibility.hidden()) {
      if (this.hiddenTimer !== null || this.paused) return;
      this.hiddenTimer = this.clock.setTimeout(() => {
        this.hiddenTimer = null;
        if (!this.running || !this.visibility.hidden()) return;
        this.paused = true;
        this.disconnect();
      }, this.linger);
      return;
    }
    if (this.hiddenTimer !== null) this.clock.clearTimeout(this.hiddenTimer);
    this.hiddenTimer = null;
    if (!this.paused) return;
    this.paused = false;
    this.failures = 0;
    if (!this.unavailable) void this.connect();
  }

  private clearStable() {
    if (this.stableTimer !== null) this.clock.clearTimeout(this.stableTimer);
    this.stableTimer = null;
  }

  private set(s: LiveState) {
    if (s === this.st) return;
    this.st = s;
    for (const fn of [...this.stateListeners]) fn(s);
  }

  private emit(kind: string) {
    for (const fn of [...this.listeners]) fn(kind);
  }

  private clearIdle() {
    if (this.idleTimer !== null) this.clock.clearTimeout(this.idleTimer);
    this.idleTimer = null;
  }

  private armIdle(c: AbortController) {
    this.clearIdle();
    this.idleTimer = this.clock.setTimeout(() => c.abort(), this.idle);
  }

  private async connect() {
    this.retry = null;
    const c = new AbortController();
    this.ctrl = c;
    this.set("connecting");
    try {
      const res = await this.o.open(c.signal);
      if (!res.body) throw new Error("the stream has no body");
      this.armIdle(c);
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      const parser = new SSEParser();
      for (;;) {
        const { done, value } = await reader.read();
        if (done || c.signal.aborted) break;
        this.armIdle(c);
        for (const ev of parser.push(dec.decode(value, { stream: true }))) this.onEvent(ev);
      }
    } catch (e) {
      // Refused, unreachable, cut or taken for dead: try again below;
      // a server without the stream (404): poll instead, for good.
      if (permanent(e)) this.unavailable = true;
    }
    if (this.ctrl !== c || !this.running) return; // stopped or paused meanwhile
    this.clearIdle();
    this.clearStable();
    this.ctrl = null;
    this.set("down");
    if (this.unavailable) return;
    this.failures++;
    this.retry = this.clock.setTimeout(() => void this.connect(), this.backoff(this.failures));
  }

  private onEvent(ev: SSEEvent) {
    switch (ev.event) {
      case "ready":
        // Only a stream that stays up a while resets the backoff.
        this.clearStable();
        this.stableTimer = this.clock.setTimeout(() => {
          this.stableTimer = null;
          this.failures = 0;
        }, this.stable);
        this.set("live");
        // Changes before the stream was live (while it was down, or
        // between a page's first load and now) were not told: look again.
        this.emit(ALL);
        return;
      case "end":
        return; // the server closes next; the reconnect learns why
      default:
        this.emit(ev.event);
    }
  }
}

/** The app's live stream; null: none (polling only). */
export const LiveContext = createContext<LiveStream | null>(null);
