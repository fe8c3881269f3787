/**
 * usePoll loads data with the API client and reloads it every interval
 * while the page is visible, so changes by other admins and peers going
 * on/offline show without a reload. A failed reload keeps the last data and
 * reports the error beside it.
 */
import { useCallback, useEffect, useRef, useState } from "react";

export interface Polled<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  /** Loads now (after a change this page made). */
  reload: () => Promise<void>;
}

export function usePoll<T>(load: (signal: AbortSignal) => Promise<T>, intervalMs: number, deps: readonly unknown[] = []): Polled<T> {
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
    setLoading(true);
    void reload();
    const t = window.setInterval(() => {
      if (document.visibilityState === "visible") void reload();
    }, intervalMs);
    const onVisible = () => {
      if (document.visibilityState === "visible") void reload();
    };
    document.addEventListener("visibilitychange", onVisible);
    return () => {
      window.clearInterval(t);
      document.removeEventListener("visibilitychange", onVisible);
      ctrl.current?.abort();
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [intervalMs, reload, ...deps]);

  return { data, error, loading, reload };
}

/** How often lists refresh: the issue asks for changes within 2 s. */
export const LIVE_INTERVAL_MS = 2000;
