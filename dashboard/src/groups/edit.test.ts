import { describe, expect, it } from "vitest";
import { groupRequest, isBuiltIn, validateGroupName, withPeer } from "./edit";

const g = { name: "devs", peers: [{ id: "a", name: "A" }, { id: "b", name: "B" }] };

describe("group edits", () => {
  it("keeps the list", () => expect(groupRequest(g)).toEqual({ name: "devs", peers: ["a", "b"] }));
  it("adds a peer once", () => {
    expect(withPeer(g, "c", true)).toEqual({ name: "devs", peers: ["a", "b", "c"] });
    expect(withPeer(g, "a", true)).toEqual({ name: "devs", peers: ["b", "a"] });
  });
  it("removes a peer", () => expect(withPeer(g, "a", false)).toEqual({ name: "devs", peers: ["b"] }));
  it("removing an absent peer changes nothing", () => expect(withPeer(g, "z", false)).toEqual({ name: "devs", peers: ["a", "b"] }));
});

describe("validateGroupName", () => {
  const others = [
    { id: "1", name: "devs" },
    { id: "2", name: "All" },
  ];
  const cases: [string, string, string][] = [
    ["ops", "", ""],
    ["  ", "", "A group needs a name"],
    ["x".repeat(256), "", "A name has at most 255 characters"],
    ["All", "", "All is the built-in group's name"],
    ["devs", "", 'A group named "devs" exists'],
    ["devs", "1", ""], // renaming itself to its own name
    [" devs ", "3", 'A group named "devs" exists'],
  ];
  for (const [name, self, want] of cases) it(`${name.slice(0, 10)}/${self}`, () => expect(validateGroupName(name, others, self)).toBe(want));
  it("isBuiltIn", () => {
    expect(isBuiltIn({ name: "All" })).toBe(true);
    expect(isBuiltIn({ name: "all" })).toBe(false);
  });
});
