import { describe, expect, it } from "vitest";
import { checkQuestion, portOf, type Question } from "./question";

const q = (o: Partial<Question>): Question => ({ from: "a", to: "b", protocol: "tcp", port: "22", ...o });

describe("checkQuestion", () => {
  const cases: [string, Question, object][] = [
    ["fine", q({}), {}],
    ["icmp needs no port", q({ protocol: "icmp", port: "" }), {}],
    ["no peers", q({ from: "", to: "" }), { from: "Pick the peer that connects", to: "Pick the peer it connects to" }],
    ["same peer", q({ to: "a" }), { to: "Pick a different peer" }],
    ["no port", q({ port: " " }), { port: "A TCP or UDP question needs a port" }],
    ["port 0", q({ protocol: "udp", port: "0" }), { port: "A port is a number from 1 to 65535" }],
    ["port 65536", q({ port: "65536" }), { port: "A port is a number from 1 to 65535" }],
    ["not a number", q({ port: "ssh" }), { port: "A port is a number from 1 to 65535" }],
  ];
  for (const [name, question, want] of cases) it(name, () => expect(checkQuestion(question)).toEqual(want));
  it("portOf", () => {
    expect(portOf(q({ port: " 443 " }))).toBe(443);
    expect(portOf(q({ protocol: "icmp" }))).toBeUndefined();
  });
});
