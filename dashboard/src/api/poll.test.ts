import { describe, expect, it } from "vitest";
import { type LoadResult, Reloader } from "./poll";

/** A load the test finishes by hand. */
function rig() {
  const calls: { signal: AbortSignal; resolve: (v: number) => void }[] = [];
  const results: LoadResult<number>[] = [];
  const r = new Reloader<number>(
    (signal) => new Promise<number>((resolve) => calls.push({ signal, resolve })),
    (res) => results.push(res),
  );
  return { r, calls, results };
}

async function flush() {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

describe("Reloader", () => {
  it("does not abort a running load: many reloads are one more load after it", async () => {
    const { r, calls, results } = rig();
    void r.reload();
    await flush();
    for (let i = 0; i < 10; i++) void r.reload();
    await flush();
    expect(calls).toHaveLength(1);
    expect(calls[0]!.signal.aborted).toBe(false);
    calls[0]!.resolve(1);
    await flush();
    expect(results).toEqual([{ value: 1 }]);
    expect(calls).toHaveLength(2);
    calls[1]!.resolve(2);
    await flush();
    expect(results).toEqual([{ value: 1 }, { value: 2 }]);
    expect(calls).toHaveLength(2);
  });

  it("settles a reload's promise after the load that covers it", async () => {
    const { r, calls } = rig();
    void r.reload();
    await flush();
    let done = false;
    void r.reload().then(() => void (done = true));
    calls[0]!.resolve(1);
    await flush();
    expect(done).toBe(false);
    calls[1]!.resolve(2);
    await flush();
    expect(done).toBe(true);
  });

  it("restart aborts the running load and drops its result", async () => {
    const { r, calls, results } = rig();
    void r.reload();
    await flush();
    void r.reload(); // dirty: dropped with the restart
    void r.restart();
    await flush();
    expect(calls[0]!.signal.aborted).toBe(true);
    expect(calls).toHaveLength(2);
    calls[0]!.resolve(1);
    calls[1]!.resolve(2);
    await flush();
    expect(results).toEqual([{ value: 2 }]);
    expect(calls).toHaveLength(2);
  });

  it("cancel aborts for good; errors are results", async () => {
    const { r, calls, results } = rig();
    void r.reload();
    await flush();
    r.cancel();
    calls[0]!.resolve(1);
    await flush();
    expect(results).toEqual([]);
    const failing = new Reloader<number>(
      () => Promise.reject(new Error("boom")),
      (res) => results.push(res),
    );
    await failing.reload();
    expect(results).toHaveLength(1);
    expect("error" in results[0]!).toBe(true);
  });
});
