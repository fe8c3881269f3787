/**
 * usePoll loads data with the API client and reloads it when the live
 * event stream (live.ts) names one of its kinds (any kind when none are
 * given), so changes by other admins and peers going on/offline show
 * without a reload. While the stream is down (or there is none) it
 * reloads every interval instead. Either way only while the page is
 * visible. A failed reload keeps the last data and reports the error
 * beside it. A reload asked for while one runs does not abort it (in a
 * busy account events come several times a second, and a list slower
 * than that would never finish): one more load follows the running one.
 */
import { useCallback, useContext, useEffect, useRef, useState } from "react";
import { ALL, LiveContext, type LiveKind } from "./live";

export interface Polled<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  /** Loads now (after a change this page made). */
  reload: () => Promise<void>;
}

export function usePoll<T>(
  load: (signal: AbortSignal) => Promise<T>,
  intervalMs: number,
  deps: readonly unknown[] = [],
  kinds?: readonly LiveKind[],
): Polled<T> {
  const live = useContext(LiveContext);
  const [liveUp, setLiveUp] = useState(live?.state === "live");
  const kindsKey = kinds?.join(",") ?? "";
  const [data, setData] = useState<T>();
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const loadRef = useRef(load);
  loadRef.current = load;
  const loader = useRef<Reloader<T> | null>(null);
  loader.current ??= new Reloader<T>((signal) => loadRef.current(signal), (r) => {
    if ("value" in r) {
      setData(r.value);
      setError(null);
    } else setError(r.error);
    setLoading(false);
  });

  const reload = useCallback(() => loader.current!.reload(), []);

  useEffect(() => {
    if (!live) return;
    setLiveUp(live.state === "live");
    const offState = live.onState((st) => setLiveUp(st === "live"));
    const wanted = kindsKey ? kindsKey.split(",") : null;
    const off = live.subscribe((kind) => {
      if (document.visibilityState !== "visible") return;
      if (kind === ALL || !wanted || wanted.includes(kind)) void reload();
    });
    return () => {
      off();
      offState();
    };
  }, [live, kindsKey, reload]);

  // The fallback: poll every interval while no stream tells of changes;
  // while one does, a slow safety net for what no event names (a peer
  // going offline on another management instance).
  useEffect(() => {
    const every = liveUp ? Math.max(intervalMs, LIVE_SAFETY_MS) : intervalMs;
    const t = window.setInterval(() => {
      if (document.visibilityState === "visible") void reload();
    }, every);
    return () => window.clearInterval(t);
  }, [liveUp, intervalMs, reload]);

  useEffect(() => {
    setLoading(true);
    // New deps: what runs loads the old ones; abort it.
    void loader.current!.restart();
    const onVisible = () => {
      if (document.visibilityState === "visible") void reload();
    };
    document.addEventListener("visibilitychange", onVisible);
    return () => {
      document.removeEventListener("visibilitychange", onVisible);
      loader.current!.cancel();
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [intervalMs, reload, ...deps]);

  return { data, error, loading, reload };
}

/**
 * How often lists refresh while the live event stream is down: the issue
 * asks for changes within 2 s.
 */
export const LIVE_INTERVAL_MS = 2000;

/** How often lists refresh anyway while the live event stream is up. */
export const LIVE_SAFETY_MS = 60_000;

/** A load's outcome. */
export type LoadResult<T> = { value: T } | { error: unknown };

/**
 * Reloader runs one load at a time. reload during a load marks it dirty:
 * one more load runs when it ends, however many reloads were asked (each
 * one's promise settles then). restart aborts the running load (its
 * result is dropped) and starts anew; cancel aborts it for good (until
 * the next reload).
 */
export class Reloader<T> {
  private ctrl: AbortController | null = null;
  private dirty = false;
  /** The running chain of loads; null: idle. */
  private running: Promise<void> | null = null;
  /** Bumped by restart and cancel: a chain of an older one stops. */
  private gen = 0;

  constructor(
    private readonly load: (signal: AbortSignal) => Promise<T>,
    private readonly done: (r: LoadResult<T>) => void,
  ) {}

  /** Loads now, or once more after the running load. */
  reload(): Promise<void> {
    if (this.running) {
      this.dirty = true;
      return this.running;
    }
    return this.chain();
  }

  /** Aborts what runs and loads anew. */
  restart(): Promise<void> {
    this.cancel();
    return this.chain();
  }

  /** Aborts what runs; its result is dropped. */
  cancel() {
    this.gen++;
    this.ctrl?.abort();
    this.ctrl = null;
    this.running = null;
    this.dirty = false;
  }

  private chain(): Promise<void> {
    const gen = this.gen;
    const p = (async () => {
      do {
        this.dirty = false;
        const c = new AbortController();
        this.ctrl = c;
        let r: LoadResult<T>;
        try {
          r = { value: await this.load(c.signal) };
        } catch (error) {
          r = { error };
        }
        if (gen !== this.gen) return; // restarted or cancelled meanwhile
        this.done(r);
      } while (this.dirty);
      this.ctrl = null;
      this.running = null;
    })();
    this.running = p;
    return p;
  }
}
