// Dashboard benchmark: prints figures beside the limits of issue 19; it is
// not a timed test (it fails only when it cannot measure).
//
//   1. the production bundle of the first page (index.html's script, the
//      modules it preloads and its CSS), gzipped: limit 350 KB;
//   2. a cold load (fresh browser context: empty cache, no service worker)
//      to a usable Peers page holding 1,000 peers, on loopback: limit 1 s,
//      from navigation start to the first peer row in the DOM;
//   3. filtering a list of 5,000 peers by typing in its search box: limit
//      100 ms, performance.now() from the input event to the start of the
//      frame that shows the filtered list.
//
// It runs netbird-server (built with the embedded dashboard) on a fresh
// data directory, once to create the owner, then seeds the peers into its
// store with the Go seeder of bench/restapi (go test -run TestSeedPeers,
// seed-only mode) and starts it again. Run from dashboard/:
//
//   npm run bench          (builds the app and the server first)
//
// Env: NETBIRD_SERVER     a netbird-server built with -tags dashboard
//                         (default: built into a temporary directory)
//      BENCH_RUNS         cold loads per size (default 5)
//      CHROMIUM           browser binary (default /usr/bin/chromium)
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const dash = resolve(here, "..");
const repo = resolve(dash, "..");
const runs = Number(process.env.BENCH_RUNS || 5);
const LIMITS = { bundleKB: 350, coldMs: 1000, filterMs: 100 };

const rows = [];
function report(what, value, unit, limit) {
  rows.push({ what, value, unit, limit, ok: value <= limit });
  console.log(`  ${what}: ${value.toFixed(unit === "KB" ? 1 : 0)} ${unit} (limit ${limit} ${unit})`);
}

// 1. The first page's bundle.
function bundle() {
  const dist = join(dash, "dist");
  const html = readFileSync(join(dist, "index.html"), "utf8");
  const files = new Set();
  for (const m of html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="\/?(assets\/[^"]+\.(?:js|css))"/g)) files.add(m[1]);
  if (![...files].some((f) => f.endsWith(".js"))) throw new Error("no script in dist/index.html: run npm run build");
  let raw = 0;
  let gz = Buffer.byteLength(gzipSync(html, { level: 9 }));
  for (const f of files) {
    const b = readFileSync(join(dist, f));
    raw += b.length;
    gz += gzipSync(b, { level: 9 }).length;
  }
  console.log(`first page: index.html + ${[...files].join(", ")} (${(raw / 1024).toFixed(0)} KB before gzip)`);
  report("first-page bundle, gzipped", gz / 1024, "KB", LIMITS.bundleKB);
}

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
    s.on("error", rej);
  });
}

/** Starts netbird-server; resolves with the process and its stderr so far once it serves. */
function startServer(bin, datadir, port) {
  const args = ["--datadir", datadir, "--listen", `127.0.0.1:${port}`, "--public-address", "127.0.0.1", "--stun-port", String(port + 1), "--disable-relay", "--owner-email", "bench@example.com"];
  const p = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  return new Promise((res, rej) => {
    const t = setTimeout(() => (p.kill("SIGKILL"), rej(new Error(`netbird-server did not start within 30 s:\n${log}`))), 30000);
    const on = (d) => {
      log += d;
      if (/setup-keys create/.test(log)) {
        clearTimeout(t);
        res({ p, log: () => log });
      }
    };
    p.stdout.on("data", on);
    p.stderr.on("data", on);
    p.on("exit", (c) => (clearTimeout(t), rej(new Error(`netbird-server exited (${c}):\n${log}`))));
  });
}

async function stopServer(s) {
  s.p.removeAllListeners("exit");
  const done = new Promise((r) => s.p.once("exit", r));
  s.p.kill("SIGTERM");
  await done;
}

/** A server holding n peers; returns its URL, owner password and a stop function. */
async function seededServer(bin, n) {
  const datadir = mkdtempSync(join(tmpdir(), "wm-dash-bench-"));
  const port = await freePort();
  const first = await startServer(bin, datadir, port);
  const m = first.log().match(/Owner created:\s+(\S+), initial password (\S+)/);
  await stopServer(first);
  if (!m) throw new Error(`no owner password in the server's output:\n${first.log()}`);
  const t0 = Date.now();
  execFileSync("go", ["test", "-count=1", "-run", "^TestSeedPeers$", "./bench/restapi/"], {
    cwd: repo,
    env: { ...process.env, WIREMESH_BENCH_SEED_DATADIR: datadir, WIREMESH_BENCH_SEED_PEERS: String(n) },
    stdio: ["ignore", "ignore", "inherit"],
  });
  console.log(`seeded ${n} peers in ${((Date.now() - t0) / 1000).toFixed(1)} s (go test -run TestSeedPeers ./bench/restapi/)`);
  const s = await startServer(bin, datadir, port);
  return {
    url: `http://127.0.0.1:${port}`,
    email: m[1],
    password: m[2],
    stop: async () => {
      await stopServer(s);
      rmSync(datadir, { recursive: true, force: true });
    },
  };
}

/** Logs in once through the built-in provider; returns the tab's session entries. */
async function login(browser, srv) {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  await page.goto(srv.url + "/");
  await page.getByRole("button", { name: "Log in" }).click();
  await page.waitForURL((u) => u.pathname.includes("/oauth2/"));
  await page.locator("#email").fill(srv.email);
  await page.locator("#password").fill(srv.password);
  await page.locator("button[type=submit]").click();
  await page.getByRole("heading", { name: "Peers", level: 2 }).waitFor({ timeout: 30000 });
  const session = await page.evaluate(() => Object.fromEntries(Object.keys(sessionStorage).filter((k) => k.startsWith("oidc.")).map((k) => [k, sessionStorage.getItem(k)])));
  await ctx.close();
  return session;
}

/** A fresh context (empty cache) with the session in its tab, which records when the first peer row appears. */
async function freshPage(browser, srv, session) {
  const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  await ctx.addInitScript(
    ({ origin, session }) => {
      if (location.origin !== origin) return;
      for (const [k, v] of Object.entries(session)) sessionStorage.setItem(k, v);
      new MutationObserver((_, obs) => {
        if (document.querySelector("[role=row][data-peer-name]")) {
          window.__usableAt = performance.now();
          obs.disconnect();
        }
      }).observe(document, { childList: true, subtree: true });
    },
    { origin: srv.url, session },
  );
  return { ctx, page: await ctx.newPage() };
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

// 2. Cold loads to a usable Peers page.
async function coldLoad(browser, srv, session, n) {
  const times = [];
  for (let i = 0; i < runs; i++) {
    const { ctx, page } = await freshPage(browser, srv, session);
    await page.goto(srv.url + "/peers");
    await page.waitForFunction(() => window.__usableAt !== undefined, null, { timeout: 30000 });
    const text = await page.getByText(/shown of \d+/).innerText();
    if (!text.includes(`of ${n}`)) throw new Error(`the Peers page says "${text}", want ${n} peers`);
    times.push(await page.evaluate(() => window.__usableAt));
    await ctx.close();
  }
  console.log(`cold loads, ${n} peers: ${times.map((t) => t.toFixed(0)).join(", ")} ms`);
  report(`cold load to a usable Peers page, ${n} peers (median of ${runs})`, median(times), "ms", LIMITS.coldMs);
}

// 3. Filtering the list by its search box.
async function filter(browser, srv, session, n) {
  const { ctx, page } = await freshPage(browser, srv, session);
  await page.goto(srv.url + "/peers");
  await page.waitForFunction(() => window.__usableAt !== undefined, null, { timeout: 30000 });
  const input = page.getByLabel("Search peers");
  const queries = ["host-01", "host-0499", "macos", "198.51.100.7", "group-0042", "zz-no-such-peer", "host-04", ""];
  const times = [];
  for (let round = 0; round < 2; round++) {
    for (const q of queries) {
      await input.focus();
      const ms = await page.evaluate(async (q) => {
        const el = document.querySelector('input[aria-label="Search peers"], input[type=search]');
        const status = [...document.querySelectorAll("[aria-live=polite]")].find((e) => /shown of/.test(e.textContent ?? ""));
        if (!el || !status) throw new Error("no search box or count on the Peers page");
        const before = status.textContent;
        const set = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set;
        const t0 = performance.now();
        set.call(el, q);
        el.dispatchEvent(new Event("input", { bubbles: true }));
        // Done at the first frame whose content shows the new count (the
        // paint follows that frame's callbacks); a query leaving the count
        // as it was is not timed.
        const at = await new Promise((res) => {
          const check = () => {
            const now = performance.now();
            if (status.textContent !== before) res(now);
            else if (now - t0 > 1000) res(-1);
            else requestAnimationFrame(check);
          };
          requestAnimationFrame(check);
        });
        return { ms: at - t0, same: at < 0 };
      }, q);
      if (!ms.same) times.push(ms.ms);
    }
  }
  await ctx.close();
  if (!times.length) throw new Error("no search changed the list");
  console.log(`filter ${n} peers: ${times.map((t) => t.toFixed(0)).join(", ")} ms`);
  report(`filter the list of ${n} peers (median of ${times.length} searches)`, median(times), "ms", LIMITS.filterMs);
  report(`filter the list of ${n} peers (slowest)`, Math.max(...times), "ms", LIMITS.filterMs);
}

let bin = process.env.NETBIRD_SERVER;
let binDir = "";
if (!bin) {
  binDir = mkdtempSync(join(tmpdir(), "wm-dash-bench-bin-"));
  bin = join(binDir, "netbird-server");
  console.log("building netbird-server with the embedded dashboard…");
  execFileSync("go", ["build", "-tags", "dashboard", "-o", bin, "./cmd/netbird-server"], { cwd: repo, stdio: "inherit" });
}
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"],
});
let code = 0;
try {
  bundle();
  for (const [n, what] of [
    [1000, coldLoad],
    [5000, filter],
  ]) {
    const srv = await seededServer(bin, n);
    try {
      const session = await login(browser, srv);
      await what(browser, srv, session, n);
    } finally {
      await srv.stop();
    }
  }
  console.log("\ndashboard benchmark                                              measured      limit");
  for (const r of rows) {
    const v = `${r.value.toFixed(r.unit === "KB" ? 1 : 0)} ${r.unit}`;
    console.log(`${r.what.padEnd(64)} ${v.padStart(9)}  ${`${r.limit} ${r.unit}`.padStart(9)}  ${r.ok ? "ok" : "OVER"}`);
  }
} catch (e) {
  console.error(`bench: ${e instanceof Error ? e.message : String(e)}`);
  code = 1;
} finally {
  await browser.close();
  if (binDir) rmSync(binDir, { recursive: true, force: true });
}
process.exit(code);
