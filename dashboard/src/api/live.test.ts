import { describe, expect, it } from "vitest";
import { ALL, type Clock, LiveStream, MAX_EVENT_BYTES, SSEParser, type SSEEvent, type Visibility } from "./live";

describe("SSEParser", () => {
  const whole =
    "retry: 2000\nevent: ready\ndata: {\"serial\":1}\n\n: ping\n\nevent: peers\r\ndata: a\r\ndata:b\r\n\r\ndata: unnamed\r\r" +
    "event: no-data\n\nevent: groups\ndata: {}\n\n";
  const want: SSEEvent[] = [
    { event: "ready", data: '{"serial":1}' },
    { event: "peers", data: "a\nb" },
    { event: "message", data: "unnamed" },
    { event: "groups", data: "{}" },
  ];

  it("reads events, comments, CRLF and CR line ends", () => {
    expect(new SSEParser().push(whole)).toEqual(want);
  });

  it("gives the same events whatever the chunks", () => {
    for (let size = 1; size <= 7; size++) {
      const p = new SSEParser();
      const got: SSEEvent[] = [];
      for (let i = 0; i < whole.length; i += size) got.push(...p.push(whole.slice(i, i + size)));
      expect(got, `chunks of ${size}`).toEqual(want);
    }
  });

  it("refuses an event longer than 64 KiB", () => {
    const p = new SSEParser();
    expect(p.push("event: peers\ndata: " + "x".repeat(1000) + "\n\n")).toHaveLength(1);
    expect(() => p.push("x".repeat(MAX_EVENT_BYTES + 1))).toThrow(/longer than/);
    const q = new SSEParser();
    // Many short data lines of one event count too.
    expect(() => {
      for (let i = 0; i < 200; i++) q.push("data: " + "y".repeat(1000) + "\n");
    }).toThrow(/longer than/);
  });

  it("keeps an unfinished event until its blank line", () => {
    const p = new SSEParser();
    expect(p.push("event: peers\ndata: x\n")).toEqual([]);
    expect(p.push("\n")).toEqual([{ event: "peers", data: "x" }]);
  });
});

/** A clock whose time moves only when the test says. */
class FakeClock implements Clock {
  now = 0;
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private next = 1;
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.timers.push({ at: this.now + ms, fn, id });
    return id;
  }
  clearTimeout(h: unknown) {
    this.timers = this.timers.filter((t) => t.id !== h);
  }
  /** Pending timers' delays from now. */
  pending(): number[] {
    return this.timers.map((t) => t.at - this.now).sort((a, b) => a - b);
  }
  async advance(ms: number) {
    const end = this.now + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.now = due.at;
      due.fn();
      await flush();
    }
    this.now = end;
    await flush();
  }
}

async function flush() {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

/** One opened stream the test writes to and ends. */
interface FakeConn {
  signal: AbortSignal;
  send(text: string): void;
  close(): void;
}

/** A page whose visibility the test sets. */
class FakeVisibility implements Visibility {
  isHidden = false;
  private fns = new Set<() => void>();
  hidden() {
    return this.isHidden;
  }
  onChange(fn: () => void) {
    this.fns.add(fn);
    return () => void this.fns.delete(fn);
  }
  set(hidden: boolean) {
    this.isHidden = hidden;
    for (const fn of [...this.fns]) fn();
  }
  get listeners() {
    return this.fns.size;
  }
}

function rig(opts: { failFirst?: number; failWith?: unknown; contentType?: string } = {}) {
  const clock = new FakeClock();
  const visibility = new FakeVisibility();
  const conns: FakeConn[] = [];
  let fails = opts.failFirst ?? 0;
  let opened = 0;
  const open = (signal: AbortSignal): Promise<Response> => {
    opened++;
    if (fails > 0) {
      fails--;
      return Promise.reject(opts.failWith ?? new Error("refused"));
    }
    let ctl!: ReadableStreamDefaultController<Uint8Array>;
    const body = new ReadableStream<Uint8Array>({ start: (c) => void (ctl = c) });
    const enc = new TextEncoder();
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      ctl.close();
    };
    signal.addEventListener("abort", () => {
      if (!closed) {
        closed = true;
        ctl.error(new DOMException("aborted", "AbortError"));
      }
    });
    conns.push({ signal, send: (t) => ctl.enqueue(enc.encode(t)), close });
    return Promise.resolve(new Response(body, { headers: { "Content-Type": "text/event-stream" } }));
  };
  const live = new LiveStream({ open, clock, visibility, random: () => 0.998, minBackoffMs: 1000, maxBackoffMs: 8000, idleMs: 45_000, lingerMs: 10_000 });
  const kinds: string[] = [];
  const states: string[] = [];
  live.onState((s) => states.push(s));
  return { clock, conns, live, kinds, states, visibility, opened: () => opened, listen: () => live.subscribe((k) => kinds.push(k)) };
}

describe("LiveStream", () => {
  it("tells kinds once live, asks for everything on ready", async () => {
    const r = rig();
    const off = r.listen();
    await flush();
    expect(r.conns).toHaveLength(1);
    expect(r.live.state).toBe("connecting");
    r.conns[0]!.send('event: ready\ndata: {"serial":1}\n\n');
    await flush();
    expect(r.live.state).toBe("live");
    r.conns[0]!.send("event: peers\ndata: {}\n\n: ping\n\nevent: groups\ndata: {}\n\n");
    await flush();
    expect(r.kinds).toEqual([ALL, "peers", "groups"]);
    off();
    await r.clock.advance(10_000);
    expect(r.live.state).toBe("down");
    expect(r.conns[0]!.signal.aborted).toBe(true);
  });

  it("reconnects with doubling backoff, then refetches everything", async () => {
    const r = rig({ failFirst: 4 });
    r.listen();
    await flush();
    // Four refusals: waits of about 1, 2, 4 and 8 s (capped), then a stream.
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      const p = r.clock.pending().filter((d) => d <= 8000);
      waits.push(p[0]!);
      await r.clock.advance(p[0]!);
    }
    expect(waits).toEqual([999, 1998, 3996, 7992]);
    expect(r.conns).toHaveLength(1);
    r.conns[0]!.send("event: ready\ndata: {}\n\n");
    await flush();
    expect(r.kinds).toEqual([ALL]);
    // The server ends the stream at once: the backoff goes on growing
    // (a stream reset it only after 30 s up).
    r.conns[0]!.close();
    await flush();
    expect(r.live.state).toBe("down");
    expect(r.clock.pending()[0]).toBe(7992);
    await r.clock.advance(7992);
    expect(r.conns).toHaveLength(2);
    r.conns[1]!.send("event: ready\ndata: {}\n\nevent: users\ndata: {}\n\n");
    await flush();
    expect(r.kinds).toEqual([ALL, ALL, "users"]);
    expect(r.states).toEqual(["connecting", "down", "connecting", "down", "connecting", "down", "connecting", "down", "connecting", "live", "down", "connecting", "live"]);
    r.live.stop();
  });

  it("takes a silent stream for dead", async () => {
    const r = rig();
    r.listen();
    await flush();
    r.conns[0]!.send("event: ready\ndata: {}\n\n");
    await flush();
    await r.clock.advance(44_000);
    r.conns[0]!.send(": ping\n\n");
    await flush();
    await r.clock.advance(44_000);
    expect(r.conns[0]!.signal.aborted).toBe(false);
    await r.clock.advance(1000);
    expect(r.conns[0]!.signal.aborted).toBe(true);
    expect(r.live.state).toBe("down");
    await r.clock.advance(1000);
    expect(r.conns).toHaveLength(2);
    r.live.stop();
  });

  it("stays open while pages change", async () => {
    const r = rig();
    const off = r.listen();
    await flush();
    off();
    await r.clock.advance(5000);
    const off2 = r.listen();
    await r.clock.advance(20_000);
    expect(r.conns).toHaveLength(1);
    expect(r.conns[0]!.signal.aborted).toBe(false);
    off2();
    await r.clock.advance(10_000);
    expect(r.conns[0]!.signal.aborted).toBe(true);
    expect(r.clock.pending()).toEqual([]);
  });

  it("resets the backoff only after 30 s up", async () => {
    const r = rig({ failFirst: 3 });
    r.listen();
    await flush();
    for (let i = 0; i < 3; i++) await r.clock.advance(r.clock.pending()[0]!);
    r.conns[0]!.send("event: ready\ndata: {}\n\n");
    await flush();
    await r.clock.advance(30_000);
    r.conns[0]!.send(": ping\n\n");
    await flush();
    r.conns[0]!.close();
    await flush();
    expect(r.clock.pending()[0]).toBe(999);
    r.live.stop();
  });

  it("stops on 404 and polls instead", async () => {
    const r = rig({ failFirst: 1, failWith: { status: 404, message: "live event streams are not enabled" } });
    r.listen();
    await flush();
    expect(r.live.state).toBe("down");
    await r.clock.advance(120_000);
    expect(r.opened()).toBe(1);
    expect(r.clock.pending()).toEqual([]);
    r.live.stop();
  });

  it("lets go of the stream while hidden, reopens when shown", async () => {
    const r = rig();
    r.listen();
    await flush();
    r.conns[0]!.send("event: ready\ndata: {}\n\n");
    await flush();
    // A glance at another tab keeps the stream.
    r.visibility.set(true);
    await r.clock.advance(5000);
    r.visibility.set(false);
    await r.clock.advance(20_000);
    expect(r.conns[0]!.signal.aborted).toBe(false);
    // Hidden for the linger: the connection goes, nothing reconnects.
    r.visibility.set(true);
    await r.clock.advance(10_000);
    expect(r.conns[0]!.signal.aborted).toBe(true);
    expect(r.live.state).toBe("down");
    await r.clock.advance(600_000);
    expect(r.conns).toHaveLength(1);
    // Shown: at once a new stream, everything refetched once ready.
    r.visibility.set(false);
    await flush();
    expect(r.conns).toHaveLength(2);
    r.conns[1]!.send("event: ready\ndata: {}\n\nevent: peers\ndata: {}\n\n");
    await flush();
    expect(r.kinds).toEqual([ALL, ALL, "peers"]);
    r.live.stop();
    expect(r.visibility.listeners).toBe(0);
    expect(r.clock.pending()).toEqual([]);
  });

  it("does not open while the page starts hidden past the linger", async () => {
    const r = rig();
    r.visibility.isHidden = true;
    r.listen();
    await flush();
    await r.clock.advance(10_000);
    expect(r.conns[0]!.signal.aborted).toBe(true);
    await r.clock.advance(120_000);
    expect(r.opened()).toBe(1);
    r.live.stop();
  });
});
