import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError, Client } from "./client";

let server: Server;
let base = "";
let handler: (req: IncomingMessage, res: ServerResponse) => void = (_q, res) => res.end();

beforeAll(async () => {
  server = createServer((req, res) => handler(req, res));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

describe("Client.openStream", () => {
  it("sends the bearer token and hands the open body over", async () => {
    let seen: { auth?: string; accept?: string; url?: string } = {};
    handler = (req, res) => {
      seen = { auth: req.headers.authorization, accept: req.headers.accept, url: req.url };
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write("event: ready\ndata: {}\n\n");
    };
    const c = new Client({ baseURL: base, token: () => "tok-1" });
    const ctrl = new AbortController();
    const res = await c.openStream("/api/events/stream", ctrl.signal);
    const { value } = await res.body!.getReader().read();
    expect(new TextDecoder().decode(value)).toBe("event: ready\ndata: {}\n\n");
    expect(seen).toEqual({ auth: "Bearer tok-1", accept: "text/event-stream", url: "/api/events/stream" });
    ctrl.abort();
  });

  it("throws the server's error, and tells a 401", async () => {
    handler = (_q, res) => {
      res.writeHead(429, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ message: "too many live event streams: this user has 16 open", code: 429 }));
    };
    let told = 0;
    const c = new Client({ baseURL: base, token: () => "tok-1", onUnauthenticated: () => told++ });
    const err = await c.openStream("/api/events/stream", new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(429);
    expect((err as ApiError).message).toContain("this user has 16 open");
    handler = (_q, res) => {
      res.writeHead(401, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ message: "token expired", code: 401 }));
    };
    await c.openStream("/api/events/stream", new AbortController().signal).catch(() => undefined);
    expect(told).toBe(1);
  });

  it("does not call the server while logged out", async () => {
    let calls = 0;
    handler = (_q, res) => {
      calls++;
      res.end();
    };
    const c = new Client({ baseURL: base, token: () => null });
    await expect(c.openStream("/api/events/stream", new AbortController().signal)).rejects.toBeInstanceOf(ApiError);
    expect(calls).toBe(0);
  });

  it("refuses an answer that is not an event stream", async () => {
    handler = (_q, res) => {
      res.writeHead(200, { "Content-Type": "text/html" });
      res.end("<html>the dashboard</html>");
    };
    const c = new Client({ baseURL: base, token: () => "tok-1" });
    const err = await c.openStream("/api/events/stream", new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).message).toContain("text/html, not text/event-stream");
  });
});
