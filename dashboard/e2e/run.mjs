// End-to-end run of the dashboard in headless Chromium (Debian's chromium,
// driven by playwright-core) against a running server.
//
// Env:
//   WIREMESH_URL          the dashboard's URL (the all-in-one server serves it at /)   [required]
//   WIREMESH_SCREENSHOTS  directory for the screenshots (default: e2e-screenshots)
//   WIREMESH_EMAIL, WIREMESH_PASSWORD
//                         the owner to log in as; on a fresh install (first-run page)
//                         the owner is created with them (defaults: admin@example.com
//                         and a random password, printed as OWNER_PASSWORD=...)
//   WIREMESH_JOIN_TIMEOUT seconds to wait for the JOINED line (default 180)
//   WIREMESH_SKIP_JOIN=1  do not wait for a peer to join (UI checks only)
//   CHROMIUM              browser binary (default /usr/bin/chromium)
//
// Protocol on stdout/stdin, for the Go test that drives a real agent:
//   prints   SETUP_KEY=<key>       once the key is created in the UI
//   reads    JOINED <peer name>    once the agent with that key is up
//   then checks that the peer shows online on the open Peers page within 5 s
//   (live refresh, no reload). Ends with "e2e: N passed, 0 failed" and exit 0,
//   or prints "FAIL: ..." and exits 1.
import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const base = (process.env.WIREMESH_URL ?? "").replace(/\/+$/, "");
if (!base) {
  console.error("set WIREMESH_URL to the dashboard's URL, e.g. http://127.0.0.1:33073");
  process.exit(2);
}
const shots = process.env.WIREMESH_SCREENSHOTS || "e2e-screenshots";
mkdirSync(shots, { recursive: true });
const email = process.env.WIREMESH_EMAIL || "admin@example.com";
const password = process.env.WIREMESH_PASSWORD || `E2e-${randomBytes(9).toString("base64url")}!7`;
const joinTimeout = Number(process.env.WIREMESH_JOIN_TIMEOUT || 180) * 1000;

let passed = 0;
function ok(what) {
  passed++;
  console.log(`ok ${passed} - ${what}`);
}
function fail(what) {
  throw new Error(what);
}

// Lines from stdin, consumed by waitLine.
const lines = [];
let waiters = [];
let stdinClosed = false;
const rl = createInterface({ input: process.stdin });
rl.on("line", (l) => {
  lines.push(l.trim());
  for (const w of waiters) w();
});
rl.on("close", () => {
  stdinClosed = true;
  for (const w of waiters) w();
});
async function waitLine(prefix, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const i = lines.findIndex((l) => l.startsWith(prefix));
    if (i >= 0) return lines.splice(i, 1)[0];
    if (stdinClosed) fail(`stdin closed before a "${prefix}" line`);
    const left = deadline - Date.now();
    if (left <= 0) fail(`no "${prefix}" line on stdin within ${ms / 1000} s`);
    await new Promise((r) => {
      const t = setTimeout(r, left);
      waiters.push(() => {
        clearTimeout(t);
        r();
      });
    });
    waiters = [];
  }
}

/** Screenshots the page in light and dark (the theme attribute Mantine's CSS keys on), then restores it. */
async function snap(page, name) {
  const was = await page.evaluate(() => document.documentElement.getAttribute("data-mantine-color-scheme"));
  for (const theme of ["light", "dark"]) {
    await page.evaluate((t) => document.documentElement.setAttribute("data-mantine-color-scheme", t), theme);
    await page.waitForTimeout(150);
    await page.screenshot({ path: join(shots, `${name}-${theme}.png`) });
  }
  await page.evaluate((t) => document.documentElement.setAttribute("data-mantine-color-scheme", t ?? "light"), was);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"],
});
let code = 0;
try {
  const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 }, colorScheme: "light" });
  const page = await ctx.newPage();
  const consoleErrors = [];
  page.on("pageerror", (e) => consoleErrors.push(String(e)));

  await page.goto(base + "/");
  const setupHeading = page.getByRole("heading", { name: "Set up wiremesh" });
  const loginHeading = page.getByRole("heading", { name: "Log in to wiremesh" });
  await setupHeading.or(loginHeading).waitFor({ timeout: 15000 });

  if (await setupHeading.isVisible()) {
    ok("first-run page shown on an install without an owner");
    await snap(page, "setup");
    // The form checks before sending.
    await page.getByLabel("E-mail").fill(email);
    await page.getByLabel(/^Password/).fill("short");
    await page.getByLabel("Repeat the password").fill("short");
    await page.getByRole("button", { name: "Create the owner" }).click();
    await page.getByText("at least 8 characters with an upper-case letter, a digit and a symbol").first().waitFor();
    ok("setup form validates before sending");
    await page.getByLabel(/^Password/).fill(password);
    await page.getByLabel("Repeat the password").fill(password);
    await page.getByRole("button", { name: "Create the owner" }).click();
    await page.getByRole("heading", { name: "Owner created" }).waitFor();
    console.log(`OWNER_EMAIL=${email}`);
    console.log(`OWNER_PASSWORD=${password}`);
    ok("owner created through the first-run page");
    await page.getByRole("button", { name: "Log in" }).click();
  } else {
    if (!process.env.WIREMESH_PASSWORD) fail("the install has an owner: set WIREMESH_EMAIL and WIREMESH_PASSWORD");
    await snap(page, "login");
    await page.getByRole("button", { name: "Log in" }).click();
  }

  // The built-in identity provider's login page.
  await page.waitForURL((u) => u.pathname.includes("/oauth2/"), { timeout: 15000 });
  await page.locator("#email").fill(email);
  await page.locator("#password").fill(password);
  await page.screenshot({ path: join(shots, "idp-login.png") });
  await page.locator("button[type=submit]").click();
  await page.getByRole("heading", { name: "Peers", level: 2 }).waitFor({ timeout: 15000 });
  if (!page.url().startsWith(base + "/peers")) fail(`after login the page is ${page.url()}, want ${base}/peers`);
  ok("logged in through the identity provider (code + PKCE), back on /peers");

  const stored = await page.evaluate(() => ({ local: Object.keys(localStorage), session: Object.keys(sessionStorage) }));
  if (stored.local.some((k) => k.startsWith("oidc."))) fail(`login state in localStorage: ${stored.local.join(", ")}`);
  if (!stored.session.some((k) => k.startsWith("oidc.user:"))) fail(`no session in sessionStorage: ${stored.session.join(", ")}`);
  ok("tokens kept in sessionStorage, none in localStorage");

  // An expired access token is renewed with the refresh token, without a login.
  const before = await page.evaluate(() => {
    const k = Object.keys(sessionStorage).find((x) => x.startsWith("oidc.user:"));
    const u = JSON.parse(sessionStorage.getItem(k));
    u.expires_at = Math.floor(Date.now() / 1000) - 10;
    sessionStorage.setItem(k, JSON.stringify(u));
    return { token: u.access_token, refresh: Boolean(u.refresh_token) };
  });
  if (!before.refresh) fail("the login brought no refresh token (offline_access)");
  await page.reload();
  await page.getByRole("heading", { name: "Peers", level: 2 }).waitFor({ timeout: 15000 });
  const renewed = await page.evaluate(() => {
    const k = Object.keys(sessionStorage).find((x) => x.startsWith("oidc.user:"));
    const u = JSON.parse(sessionStorage.getItem(k));
    return { token: u.access_token, expiresAt: u.expires_at };
  });
  if (renewed.token === before.token || renewed.expiresAt * 1000 <= Date.now()) fail("the expired access token was not renewed");
  ok("expired access token renewed with the refresh token, no login page");

  await snap(page, "peers-empty");

  // The theme toggle switches and remembers the theme.
  const scheme = () => page.evaluate(() => document.documentElement.getAttribute("data-mantine-color-scheme"));
  await page.getByRole("button", { name: "Switch to dark theme" }).click();
  if ((await scheme()) !== "dark") fail("the theme toggle did not switch to dark");
  await page.reload();
  await page.getByRole("heading", { name: "Peers", level: 2 }).waitFor();
  if ((await scheme()) !== "dark") fail("the dark theme was not kept across a reload");
  ok("theme toggle switches to dark and keeps it across a reload (session restored from sessionStorage)");
  await page.getByRole("button", { name: "Switch to light theme" }).click();

  // Setup keys: create one with the UI.
  await page.getByRole("link", { name: "Setup keys" }).click();
  await page.getByRole("heading", { name: "Setup keys", level: 2 }).waitFor();
  await page.getByRole("button", { name: "Create setup key" }).click();
  const dialog = page.getByRole("dialog");
  await dialog.getByRole("button", { name: "Create key" }).click();
  await dialog.getByText("a name is required").waitFor();
  ok("setup-key form validates before sending");
  const keyName = `e2e-${Date.now()}`;
  await dialog.getByRole("textbox", { name: /^Name/ }).fill(keyName);
  await dialog.getByLabel("Expires in (days)").fill("7");
  await snap(page, "setup-key-create");
  await dialog.getByRole("button", { name: "Create key" }).click();
  const keyEl = dialog.getByTestId("new-setup-key");
  await keyEl.waitFor();
  const key = (await keyEl.innerText()).trim();
  if (!/^[A-Za-z0-9-]{16,}$/.test(key)) fail(`setup key ${JSON.stringify(key)} does not look like one`);
  const cmd = (await dialog.getByTestId("up-command").innerText()).trim();
  const wantCmd = `netbird up --management-url ${base} --setup-key ${key}`;
  if (cmd !== wantCmd) fail(`command ${JSON.stringify(cmd)}, want ${JSON.stringify(wantCmd)}`);
  ok("setup key created; the copied command is ready to run");
  await snap(page, "setup-key-created");
  await dialog.getByRole("button", { name: "Done" }).click();
  await page.locator(`tr[data-key-name="${keyName}"]`).getByText("valid", { exact: true }).waitFor();
  await snap(page, "setup-keys");

  // Peers page open while the agent joins: the list must refresh by itself.
  await page.getByRole("link", { name: "Peers" }).click();
  await page.getByRole("heading", { name: "Peers", level: 2 }).waitFor();
  console.log(`SETUP_KEY=${key}`);
  if (process.env.WIREMESH_SKIP_JOIN === "1") {
    console.log("skip - peer join (WIREMESH_SKIP_JOIN=1)");
  } else {
    const line = await waitLine("JOINED ", joinTimeout);
    const peerName = line.slice("JOINED ".length).trim();
    const t0 = Date.now();
    const row = page.locator(`[role=row][data-peer-name="${peerName}"]`);
    try {
      await row.getByText("online", { exact: true }).waitFor({ timeout: 5000 });
    } catch {
      const names = await page.locator("[role=row][data-peer-name]").evaluateAll((rs) => rs.map((r) => r.getAttribute("data-peer-name")));
      fail(`peer ${peerName} not shown online within 5 s without a reload (rows: ${names.join(", ") || "none"})`);
    }
    ok(`peer ${peerName} shown online ${Date.now() - t0} ms after JOINED, without a reload`);
    await page.getByLabel("Search peers").fill(peerName);
    await row.waitFor();
    await page.getByLabel("Search peers").fill("");
    ok("peer found by search");
  }
  await snap(page, "peers");

  // Revoke, then delete, the key: both confirmed.
  await page.getByRole("link", { name: "Setup keys" }).click();
  const keyRow = page.locator(`tr[data-key-name="${keyName}"]`);
  await keyRow.getByRole("button", { name: `Revoke ${keyName}` }).click();
  await snap(page, "setup-key-revoke-confirm");
  await page.getByRole("dialog").getByRole("button", { name: "Revoke" }).click();
  await keyRow.getByText("revoked", { exact: true }).waitFor();
  ok("setup key revoked after confirmation");
  await keyRow.getByRole("button", { name: `Delete ${keyName}` }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
  await keyRow.waitFor({ state: "detached" });
  ok("setup key deleted after confirmation");

  // Coming pages are listed, disabled.
  const coming = page.locator("nav[aria-label=Main] [data-disabled], nav[aria-label=Main] [aria-disabled=true]");
  if ((await coming.count()) < 5) fail("the navigation does not list the coming pages");

  // Logout ends the session at the identity provider too.
  await page.getByRole("button", { name: /^User menu/ }).click();
  await page.getByRole("menuitem", { name: "Log out" }).click();
  await loginHeading.waitFor({ timeout: 15000 });
  const after = await page.evaluate(() => Object.keys(sessionStorage).filter((k) => k.startsWith("oidc.user:")));
  if (after.length) fail(`session still stored after logout: ${after.join(", ")}`);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.waitForURL((u) => u.pathname.includes("/oauth2/"), { timeout: 15000 });
  if (!(await page.locator("#password").isVisible())) fail("after logout the identity provider did not ask for the password again");
  ok("logout ended the session here and at the identity provider");

  if (consoleErrors.length) fail(`page errors: ${consoleErrors.join("; ")}`);
  console.log(`screenshots in ${shots}`);
  console.log(`e2e: ${passed} passed, 0 failed`);
} catch (e) {
  console.log(`FAIL: ${e instanceof Error ? e.message : String(e)}`);
  console.log(`e2e: ${passed} passed, 1 failed`);
  code = 1;
} finally {
  await browser.close();
  rl.close();
}
process.exit(code);
