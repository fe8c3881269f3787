// A stand-in for netbird-server's own serving of the dashboard, for
// development and for running e2e/run.mjs before the server embeds the
// build: serves dist/ (index.html for every unknown path), the settings
// file /dashboard-config.json, and passes /api/ and /oauth2/ through to the
// server, so the page, the API and the identity provider share one origin
// as they do when the server serves the dashboard.
//
//   node e2e/serve.mjs --listen 127.0.0.1:8090 --backend http://127.0.0.1:33073 \
//     --issuer http://127.0.0.1:8090/oauth2 [--client-id netbird-dashboard] [--dist dist]
//
// Run the server with --idp-issuer <issuer> and --dashboard-redirect
// http://127.0.0.1:8090/nb-auth so its login pages and callbacks use this origin.
import { createReadStream, existsSync, statSync } from "node:fs";
import { request, createServer } from "node:http";
import { extname, join, normalize, resolve } from "node:path";
import { parseArgs } from "node:util";

const { values: a } = parseArgs({
  options: {
    listen: { type: "string", default: "127.0.0.1:8090" },
    backend: { type: "string", default: "http://127.0.0.1:33073" },
    issuer: { type: "string" },
    "client-id": { type: "string", default: "netbird-dashboard" },
    dist: { type: "string", default: "dist" },
  },
});
const [host, port] = [a.listen.slice(0, a.listen.lastIndexOf(":")), Number(a.listen.slice(a.listen.lastIndexOf(":") + 1))];
const issuer = a.issuer ?? `http://${a.listen}/oauth2`;
const dist = resolve(a.dist);
const backend = new URL(a.backend);
const config = JSON.stringify({ issuer, client_id: a["client-id"], audience: a["client-id"] });
const types = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".png": "image/png", ".json": "application/json" };

function proxy(req, res) {
  const up = request(
    { host: backend.hostname, port: backend.port, method: req.method, path: req.url, headers: { ...req.headers, host: backend.host } },
    (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    },
  );
  up.on("error", (e) => {
    res.writeHead(502, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ message: `backend unreachable: ${e.message}`, code: 502 }));
  });
  req.pipe(up);
}

const server = createServer((req, res) => {
  const path = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
  if (path.startsWith("/api/") || path.startsWith("/oauth2/") || path === "/oauth2") return proxy(req, res);
  if (path === "/dashboard-config.json") {
    res.writeHead(200, { "Content-Type": "application/json", "Cache-Control": "no-store" });
    return res.end(config);
  }
  let file = normalize(join(dist, path));
  if (!file.startsWith(dist) || !existsSync(file) || statSync(file).isDirectory()) file = join(dist, "index.html");
  const immutable = file.includes(`${join(dist, "assets")}`);
  res.writeHead(200, {
    "Content-Type": types[extname(file)] ?? "application/octet-stream",
    "Cache-Control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
  });
  createReadStream(file).pipe(res);
});
server.listen(port, host, () => console.log(`dashboard on http://${a.listen} (API and IdP from ${a.backend}, issuer ${issuer})`));
for (const s of ["SIGINT", "SIGTERM"]) process.on(s, () => server.close(() => process.exit(0)));
