import { DEFAULT_THEME, mergeMantineTheme } from "@mantine/core";
import { describe, expect, it } from "vitest";
import { MIN_CONTRAST, contrast, cssVariablesResolver, readable, theme } from "./theme";

const full = mergeMantineTheme(DEFAULT_THEME, theme);
const vars = cssVariablesResolver(full);
const c = full.colors;

describe("contrast", () => {
  it("matches the WCAG figures", () => {
    expect(contrast("#ffffff", "#000000")).toBeCloseTo(21, 5);
    expect(contrast("#868e96", "#ffffff")).toBeCloseTo(3.32, 2); // Mantine's dimmed, too light
    expect(contrast("#4c6ef5", "#ffffff")).toBeCloseTo(4.32, 2);
  });
  it("readable keeps a passing colour and fixes a failing one on either side", () => {
    expect(readable("#000000", ["#ffffff"])).toBe("#000000");
    expect(contrast(readable("#868e96", ["#ffffff"]), "#ffffff")).toBeGreaterThanOrEqual(MIN_CONTRAST);
    expect(contrast(readable("#e03131", ["#242424"]), "#242424")).toBeGreaterThanOrEqual(MIN_CONTRAST);
  });
});

describe("theme variables", () => {
  const pairs: [string, string, string][] = [
    ["light dimmed on white", vars.light["--mantine-color-dimmed"]!, "#ffffff"],
    ["dark dimmed on body", vars.dark["--mantine-color-dimmed"]!, c.dark[7]],
    ["dark dimmed on surface", vars.dark["--mantine-color-dimmed"]!, c.dark[6]],
    ["light error", vars.light["--mantine-color-error"]!, "#ffffff"],
    ["dark error", vars.dark["--mantine-color-error"]!, c.dark[7]],
    ["light anchor", vars.light["--mantine-color-anchor"]!, "#ffffff"],
    ["dark anchor", vars.dark["--mantine-color-anchor"]!, c.dark[7]],
  ];
  for (const name of ["indigo", "red", "green", "yellow", "orange", "gray", "blue", "teal"]) {
    pairs.push([`${name} filled (white text)`, vars.light[`--mantine-color-${name}-filled`]!, "#ffffff"]);
    pairs.push([`${name} light badge`, vars.light[`--mantine-color-${name}-light-color`]!, c[name]![1]]);
    pairs.push([`${name} text on white`, vars.light[`--mantine-color-${name}-text`]!, "#ffffff"]);
    pairs.push([`${name} text on dark`, vars.dark[`--mantine-color-${name}-text`]!, c.dark[7]]);
  }
  for (const [what, fg, bg] of pairs) {
    it(`${what}: ${fg} on ${bg} >= ${MIN_CONTRAST}:1`, () => {
      expect(contrast(fg, bg)).toBeGreaterThanOrEqual(MIN_CONTRAST);
    });
  }
});
