/**
 * usePoll loads data with the API client and reloads it when the live
 * event stream (live.ts) names one of its kinds (any kind when none are
 * given), so changes by other admins and peers going on/offline show
 * without a reload. While the stream is down (or there is none) it
 * reloads every interval instead. Either way only while the page is
 * visible. A failed reload keeps the last data and reports the error
 * beside it.
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
  const ctrl = useRef<AbortController | null>(null);

  const reload = useCallback(async () => {
    ctrl.current?.abort();
    const c = new AbortController();
    ctrl.current = c;
    try {
      const v = await loadRef.current(c.signal);
      if (c.signal.aborted) return;
      setData(v);
      setError(null);
    } catch (e) {
      if (c.signal.aborted) return;
      setError(e);
    } finally {
      if (!c.signal.aborted) setLoading(false);
    }
  }, []);

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
    void reload();
    const onVisible = () => {
      if (document.visibilityState === "visible") void reload();
    };
    document.addEventListener("visibilitychange", onVisible);
    return () => {
      document.removeEventListener("visibilitychange", onVisible);
      ctrl.current?.abort();
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
