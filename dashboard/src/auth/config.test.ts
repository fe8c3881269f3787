import { describe, expect, it } from "vitest";
import { parseConfig } from "./config";

describe("parseConfig", () => {
  it("accepts the server's file and defaults the audience to the client ID", () => {
    expect(parseConfig({ issuer: "https://vpn.example.com/oauth2", client_id: "netbird-dashboard" })).toEqual({
      issuer: "https://vpn.example.com/oauth2",
      client_id: "netbird-dashboard",
      audience: "netbird-dashboard",
    });
    expect(parseConfig({ issuer: "http://127.0.0.1:1/oauth2", client_id: "c", audience: "api", api_url: "http://127.0.0.1:2/" })).toEqual({
      issuer: "http://127.0.0.1:1/oauth2",
      client_id: "c",
      audience: "api",
      api_url: "http://127.0.0.1:2",
    });
  });
  it("names the bad field", () => {
    expect(() => parseConfig(null)).toThrow("not a JSON object");
    expect(() => parseConfig({ client_id: "c" })).toThrow("issuer is missing");
    expect(() => parseConfig({ issuer: "vpn.example.com", client_id: "c" })).toThrow("is not an http(s) URL");
    expect(() => parseConfig({ issuer: "https://x", client_id: 7 })).toThrow("client_id must be a string");
  });
});
