import { describe, expect, it } from "vitest";
import type { Peer } from "../api/client";
import { defaultQuery, filterPeers, ipKey, lastSeenText, osFamilies, queryPeers, sortPeers } from "./filter";

let n = 0;
function peer(p: Partial<Peer>): Peer {
  n++;
  return {
    id: `id${n}`,
    name: `peer${n}`,
    created_at: "2026-01-01T00:00:00Z",
    ip: `100.64.0.${n}`,
    connection_ip: "",
    connected: false,
    last_seen: "2026-01-01T00:00:00Z",
    os: "linux Debian 12",
    kernel_version: "",
    geoname_id: 0,
    version: "0.77.1",
    ui_version: "",
    groups: [{ id: "all", name: "All", peers_count: 0, resources_count: 0 }],
    ssh_enabled: false,
    user_id: "",
    hostname: "",
    dns_label: "",
    login_expiration_enabled: false,
    login_expired: false,
    last_login: "",
    inactivity_expiration_enabled: false,
    approval_required: false,
    country_code: "",
    city_name: "",
    serial_number: "",
    extra_dns_labels: [],
    ephemeral: false,
    local_flags: {},
    accessible_peers_count: 0,
    ...p,
  };
}

const names = (ps: Peer[]) => ps.map((p) => p.name);

const web = peer({ name: "web-1", ip: "100.64.0.10", connected: true, os: "linux Ubuntu 24.04", hostname: "web1.internal",
  groups: [{ id: "g-web", name: "Web servers", peers_count: 1, resources_count: 0 }] });
const laptop = peer({ name: "alice-laptop", ip: "100.64.0.9", os: "darwin 15.1", version: "0.76.0", last_seen: "2026-03-01T10:00:00Z" });
const db = peer({ name: "db-2", ip: "100.64.1.2", os: "windows 11", approval_required: true, last_seen: "2026-02-01T10:00:00Z" });
const old = peer({ name: "Db-10", ip: "100.64.0.200", login_expired: true, last_seen: "2025-12-01T10:00:00Z" });
const all = [web, laptop, db, old];

describe("filterPeers", () => {
  const q = { search: "", status: "all" as const, group: "", os: "" };
  it("matches every word anywhere, case-insensitively", () => {
    expect(names(filterPeers(all, { ...q, search: "DB" }))).toEqual(["db-2", "Db-10"]);
    expect(names(filterPeers(all, { ...q, search: "web servers" }))).toEqual(["web-1"]);
    expect(names(filterPeers(all, { ...q, search: "100.64.0.9" }))).toEqual(["alice-laptop"]);
    expect(names(filterPeers(all, { ...q, search: "web1.internal" }))).toEqual(["web-1"]);
    expect(names(filterPeers(all, { ...q, search: "db windows" }))).toEqual(["db-2"]);
    expect(filterPeers(all, { ...q, search: "nothing-like-this" })).toEqual([]);
  });
  it("filters by status, group and OS family", () => {
    expect(names(filterPeers(all, { ...q, status: "online" }))).toEqual(["web-1"]);
    expect(names(filterPeers(all, { ...q, status: "offline" }))).toEqual(["alice-laptop", "db-2", "Db-10"]);
    expect(names(filterPeers(all, { ...q, status: "pending" }))).toEqual(["db-2"]);
    expect(names(filterPeers(all, { ...q, status: "expired" }))).toEqual(["Db-10"]);
    expect(names(filterPeers(all, { ...q, group: "g-web" }))).toEqual(["web-1"]);
    expect(names(filterPeers(all, { ...q, os: "linux" }))).toEqual(["web-1", "Db-10"]);
    expect(names(filterPeers(all, { ...q, os: "linux", status: "online", search: "web" }))).toEqual(["web-1"]);
  });
  it("lists OS families", () => {
    expect(osFamilies(all)).toEqual(["darwin", "linux", "windows"]);
  });
});

describe("sortPeers", () => {
  it("sorts names naturally and both ways", () => {
    expect(names(sortPeers(all, "name", "asc"))).toEqual(["alice-laptop", "db-2", "Db-10", "web-1"]);
    expect(names(sortPeers(all, "name", "desc"))).toEqual(["web-1", "Db-10", "db-2", "alice-laptop"]);
  });
  it("sorts addresses numerically", () => {
    expect(names(sortPeers(all, "ip", "asc"))).toEqual(["alice-laptop", "web-1", "Db-10", "db-2"]);
    expect(ipKey("100.64.0.9")).toBeLessThan(ipKey("100.64.0.10"));
    expect(ipKey("fd00::1")).toBe(Number.MAX_SAFE_INTEGER);
  });
  it("puts online peers first, then the most recently seen", () => {
    expect(names(sortPeers(all, "connected", "asc"))).toEqual(["web-1", "alice-laptop", "db-2", "Db-10"]);
    expect(names(sortPeers(all, "last_seen", "desc"))).toEqual(["web-1", "alice-laptop", "db-2", "Db-10"]);
  });
  it("breaks ties by name, then ID, and does not change its input", () => {
    const a = peer({ name: "same", os: "x" });
    const b = peer({ name: "same", os: "x" });
    const input = [b, a];
    expect(sortPeers(input, "os", "asc")).toEqual([a, b]);
    expect(input).toEqual([b, a]);
  });
});

describe("queryPeers on 5,000 peers", () => {
  it("filters and sorts well within 100 ms", () => {
    const many: Peer[] = [];
    for (let i = 0; i < 5000; i++) {
      many.push(peer({ name: `host-${i}`, ip: `100.64.${Math.floor(i / 250)}.${i % 250}`, connected: i % 3 === 0, os: i % 2 ? "linux" : "windows 11" }));
    }
    // Warm the search cache as the first render does.
    queryPeers(many, defaultQuery);
    const t0 = performance.now();
    const out = queryPeers(many, { ...defaultQuery, search: "host-4", status: "online", os: "linux", sort: "ip", dir: "desc" });
    const ms = performance.now() - t0;
    expect(out.length).toBeGreaterThan(0);
    expect(out.every((p) => p.name.includes("host-4") && p.connected && p.os === "linux")).toBe(true);
    expect(ms).toBeLessThan(100);
  });
});

describe("lastSeenText", () => {
  const now = Date.parse("2026-03-01T12:00:00Z");
  it("describes the time since the peer was seen", () => {
    expect(lastSeenText({ connected: true, last_seen: "" }, now)).toBe("online");
    expect(lastSeenText({ connected: false, last_seen: "2026-03-01T11:59:59Z" }, now)).toBe("1 second ago");
    expect(lastSeenText({ connected: false, last_seen: "2026-03-01T11:58:00Z" }, now)).toBe("2 minutes ago");
    expect(lastSeenText({ connected: false, last_seen: "2026-02-27T12:00:00Z" }, now)).toBe("2 days ago");
    expect(lastSeenText({ connected: false, last_seen: "0001-01-01T00:00:00Z" }, now)).toBe("never");
  });
});
