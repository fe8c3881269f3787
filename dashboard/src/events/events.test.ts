import { describe, expect, it } from "vitest";
import { areaOf, describeCode, knownCodes } from "./codes";
import { dayStart, filterEvents, initiatorsOf, rangeError, type Event } from "./filter";

describe("describeCode", () => {
  it("describes known codes", () => {
    expect(describeCode("peer.user.add")).toBe("Peer added by a user login");
    expect(describeCode("user.approve")).toBe("User approved");
    expect(describeCode("account.setting.peer.approval.enable")).toBe("Peer approval turned on");
    expect(describeCode("posture.check.delete")).toBe("Posture check deleted");
  });
  it("falls back to the code itself", () => {
    expect(describeCode("something.new.happened")).toBe("something.new.happened");
    expect(describeCode("toString")).toBe("toString");
    expect(describeCode("")).toBe("");
  });
  it("describes every code the server records", () => {
    // The server's list (management/account/activity.go), as of this writing.
    for (const c of ["peer.job.create", "user.invite.link.accept", "account.setting.local.mfa.enable", "account.domain.claim", "account.settings.update"]) {
      expect(describeCode(c)).not.toBe(c);
    }
    expect(new Set(knownCodes()).size).toBe(knownCodes().length);
  });
  it("groups codes by area", () => {
    expect(areaOf("user.peer.delete")).toBe("Peers");
    expect(areaOf("service.user.create")).toBe("Users");
    expect(areaOf("service.create")).toBe("Integrations");
    expect(areaOf("personal.access.token.create")).toBe("Tokens");
    expect(areaOf("weird")).toBe("Other");
  });
});

const ev = (o: Partial<Event>): Event => ({
  id: "1",
  timestamp: "2026-03-10T12:00:00Z",
  activity: "",
  activity_code: "peer.rename",
  initiator_id: "u1",
  initiator_name: "Alice",
  initiator_email: "alice@example.com",
  target_id: "p1",
  meta: {},
  ...o,
});

describe("filterEvents", () => {
  const events = [
    ev({ id: "1", activity_code: "peer.rename", meta: { name: "web-1" } }),
    ev({ id: "2", activity_code: "user.block", initiator_id: "u2", initiator_name: "Bob", initiator_email: "bob@example.com", target_id: "u9", meta: { email: "eve@example.com" } }),
    ev({ id: "3", activity_code: "setupkey.add", timestamp: new Date(2026, 2, 12, 23, 30).toISOString(), target_id: "k1" }),
    ev({ id: "4", activity_code: "policy.add", timestamp: new Date(2026, 2, 13, 0, 10).toISOString() }),
  ];
  const ids = (q: Partial<Parameters<typeof filterEvents>[1]>) =>
    filterEvents(events, { codes: [], initiator: "", target: "", text: "", from: "", to: "", ...q }).map((e) => e.id);

  it("keeps everything without filters", () => expect(ids({})).toEqual(["1", "2", "3", "4"]));
  it("filters by codes", () => expect(ids({ codes: ["user.block", "policy.add"] })).toEqual(["2", "4"]));
  it("filters by initiator", () => expect(ids({ initiator: "u2" })).toEqual(["2"]));
  it("filters by target id or meta", () => {
    expect(ids({ target: "K1" })).toEqual(["3"]);
    expect(ids({ target: "eve@" })).toEqual(["2"]);
  });
  it("searches descriptions, people and meta", () => {
    expect(ids({ text: "blocked" })).toEqual(["2"]);
    expect(ids({ text: "web-1" })).toEqual(["1"]);
    expect(ids({ text: "bob@example" })).toEqual(["2"]);
    expect(ids({ text: "setupkey" })).toEqual(["3"]);
  });
  it("filters by local days, both ends included", () => {
    expect(ids({ from: "2026-03-12", to: "2026-03-12" })).toEqual(["3"]);
    expect(ids({ from: "2026-03-13" })).toEqual(["4"]);
    expect(ids({ to: "2026-03-11" })).toEqual(["1", "2"]);
  });
  it("checks the range", () => {
    expect(rangeError({ from: "2026-03-13", to: "2026-03-12" })).toBe("The start is after the end");
    expect(rangeError({ from: "13/03/2026", to: "" })).toBe("The start is not a date");
    expect(rangeError({ from: "2026-03-12", to: "2026-03-12" })).toBe("");
    expect(Number.isNaN(dayStart("2026-3-1"))).toBe(true);
  });
  it("lists initiators once, by name", () => {
    expect(initiatorsOf(events)).toEqual([
      { value: "u1", label: "Alice" },
      { value: "u2", label: "Bob" },
    ]);
  });
});
