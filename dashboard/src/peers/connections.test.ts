import { describe, expect, it } from "vitest";
import { connectionsText, connectionTypeLabel } from "./connections";

describe("connectionsText", () => {
  it("shows nothing without a report", () => {
    expect(connectionsText({})).toBe("—");
  });
  it("counts by type, leaving out empty ones", () => {
    expect(connectionsText({ connections: { p2p: 3, relayed: 1, connecting: 0 } })).toBe("3 P2P · 1 relayed");
    expect(connectionsText({ connections: { p2p: 0, relayed: 2, connecting: 1 } })).toBe("2 relayed · 1 connecting");
    expect(connectionsText({ connections: { p2p: 0, relayed: 0, connecting: 0 } })).toBe("0 P2P");
  });
  it("labels types", () => {
    expect(connectionTypeLabel("p2p")).toBe("P2P");
    expect(connectionTypeLabel("relayed")).toBe("relayed");
  });
});
