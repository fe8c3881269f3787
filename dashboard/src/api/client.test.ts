import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError, Client, fillPath } from "./client";

// A real HTTP server on loopback: each test sets the handler.
let server: Server;
let base = "";
let handler: (req: IncomingMessage, body: string, res: ServerResponse) => void = (_q, _b, res) => res.end();

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => handler(req, body, res));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
});

function json(res: ServerResponse, status: number, v: unknown) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(v));
}

describe("Client", () => {
  it("sends the bearer token and reads JSON", async () => {
    let seen: { auth?: string; url?: string; method?: string; accept?: string } = {};
    handler = (req, _b, res) => {
      seen = { auth: req.headers.authorization, url: req.url, method: req.method, accept: req.headers.accept };
      json(res, 200, [{ id: "p1", name: "alpha" }]);
    };
    const c = new Client({ baseURL: base, token: () => "tok-123" });
    const peers = await c.get("/api/peers", { query: { name: "alpha" } });
    expect(peers).toEqual([{ id: "p1", name: "alpha" }]);
    expect(seen).toEqual({ auth: "Bearer tok-123", url: "/api/peers?name=alpha", method: "GET", accept: "application/json" });
  });

  it("sends no Authorization header without a token", async () => {
    let auth: string | undefined = "unset";
    handler = (req, _b, res) => {
      auth = req.headers.authorization;
      json(res, 200, { setup_required: true });
    };
    const c = new Client({ baseURL: base, token: () => null });
    expect(await c.get("/api/instance")).toEqual({ setup_required: true });
    expect(auth).toBeUndefined();
  });

  it("sends a JSON body and fills path parameters, escaped", async () => {
    let seen: { url?: string; ct?: string; body?: unknown; method?: string } = {};
    handler = (req, body, res) => {
      seen = { url: req.url, ct: req.headers["content-type"], body: JSON.parse(body), method: req.method };
      json(res, 200, { id: "k/1", revoked: true });
    };
    const c = new Client({ baseURL: base });
    const out = await c.put("/api/setup-keys/{keyId}", { path: { keyId: "k/1" }, body: { revoked: true, auto_groups: [] } });
    expect(out).toMatchObject({ id: "k/1", revoked: true });
    expect(seen).toEqual({ url: "/api/setup-keys/k%2F1", ct: "application/json", body: { revoked: true, auto_groups: [] }, method: "PUT" });
  });

  it("maps the server's {message, code} body to an ApiError", async () => {
    handler = (_q, _b, res) => json(res, 422, { message: "name: a name is required", code: 422 });
    const c = new Client({ baseURL: base });
    const err = await c
      .post("/api/setup-keys", { body: { name: "", type: "reusable", expires_in: 0, auto_groups: [] } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    const e = err as ApiError;
    expect([e.status, e.code, e.message, e.method]).toEqual([422, 422, "name: a name is required", "POST"]);
    expect(e.url).toBe(`${base}/api/setup-keys`);
  });

  it("reports 401 to onUnauthenticated", async () => {
    handler = (_q, _b, res) => json(res, 401, { message: "token expired", code: 401 });
    const seen: ApiError[] = [];
    const c = new Client({ baseURL: base, token: () => "old", onUnauthenticated: (e) => seen.push(e) });
    await expect(c.get("/api/peers")).rejects.toThrow("token expired");
    expect(seen.map((e) => [e.status, e.unauthenticated])).toEqual([[401, true]]);
  });

  it("describes an error body that is not JSON", async () => {
    handler = (_q, _b, res) => {
      res.writeHead(502, { "Content-Type": "text/html" });
      res.end("Bad Gateway from the proxy\n<html>...");
    };
    const c = new Client({ baseURL: base });
    const e = (await c.get("/api/peers").catch((x: unknown) => x)) as ApiError;
    expect([e.status, e.code, e.message]).toEqual([502, 502, "Bad Gateway from the proxy"]);
  });

  it("describes an empty error body by its status", async () => {
    handler = (_q, _b, res) => {
      res.writeHead(403);
      res.end();
    };
    const e = (await new Client({ baseURL: base }).get("/api/peers").catch((x: unknown) => x)) as ApiError;
    expect([e.status, e.message]).toEqual([403, "403 Forbidden"]);
  });

  it("rejects a 200 whose body is not JSON", async () => {
    handler = (_q, _b, res) => {
      res.writeHead(200, { "Content-Type": "text/html" });
      res.end("<html>the dashboard</html>");
    };
    const e = (await new Client({ baseURL: base }).get("/api/peers").catch((x: unknown) => x)) as ApiError;
    expect(e).toBeInstanceOf(ApiError);
    expect(e.message).toMatch(/not JSON/);
  });

  it("returns undefined for an empty 200 body", async () => {
    handler = (_q, _b, res) => {
      res.writeHead(200);
      res.end();
    };
    expect(await new Client({ baseURL: base }).delete("/api/setup-keys/{keyId}", { path: { keyId: "x" } })).toBeUndefined();
  });

  it("reports a server that cannot be reached as status 0", async () => {
    const dead = createServer();
    await new Promise<void>((r) => dead.listen(0, "127.0.0.1", r));
    const port = (dead.address() as AddressInfo).port;
    await new Promise<void>((r) => dead.close(() => r()));
    const e = (await new Client({ baseURL: `http://127.0.0.1:${port}` }).get("/api/peers").catch((x: unknown) => x)) as ApiError;
    expect(e).toBeInstanceOf(ApiError);
    expect(e.status).toBe(0);
    expect(e.message).toMatch(/could not be reached/);
  });
});

describe("fillPath", () => {
  it("refuses a missing parameter", () => {
    expect(() => fillPath("/api/peers/{peerId}", {})).toThrow("missing path parameter peerId");
  });
});
