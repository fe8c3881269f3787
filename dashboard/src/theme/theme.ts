/**
 * The dashboard's Mantine theme, with colours that pass WCAG AA (4.5:1
 * for text) in both schemes. Mantine's defaults do not: dimmed text
 * (#868e96 on white, #828282 on #242424), white on a shade-6 filled button,
 * the "light" variant's text on its tinted background, and the error red
 * in the dark scheme. The shades below are derived from the palette and
 * darkened (or lightened) only as far as the contrast needs, so that every
 * colour name the pages use (and any added later) stays readable.
 */
import { Anchor, DEFAULT_THEME, Modal, createTheme, type CSSVariablesResolver, type MantineColorsTuple } from "@mantine/core";

/** WCAG AA for normal-size text. */
export const MIN_CONTRAST = 4.5;

const WHITE = "#ffffff";
/** Mantine's dark-scheme body background (dark-7) and its raised surfaces (dark-6). */
const DARK_BODY = DEFAULT_THEME.colors.dark[7];
const DARK_SURFACE = DEFAULT_THEME.colors.dark[6];
const LIGHT_SURFACE = DEFAULT_THEME.colors.gray[1];

function rgb(hex: string): [number, number, number] {
  const h = hex.replace("#", "");
  const full = h.length === 3 ? [...h].map((c) => c + c).join("") : h;
  return [0, 2, 4].map((i) => parseInt(full.slice(i, i + 2), 16)) as [number, number, number];
}

function toHex([r, g, b]: [number, number, number]): string {
  return "#" + [r, g, b].map((v) => Math.round(Math.min(255, Math.max(0, v))).toString(16).padStart(2, "0")).join("");
}

function luminance(hex: string): number {
  const lin = (v: number) => {
    const c = v / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  const [r, g, b] = rgb(hex);
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

/** The WCAG contrast ratio of two #rrggbb colours (1 to 21). */
export function contrast(a: string, b: string): number {
  const x = luminance(a);
  const y = luminance(b);
  return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
}

/** Mixes a colour towards black (toward < 0) or white (toward > 0) by |toward|. */
function mix(hex: string, toward: number): string {
  const c = rgb(hex);
  const target = toward < 0 ? 0 : 255;
  const t = Math.abs(toward);
  return toHex(c.map((v) => v + (target - v) * t) as [number, number, number]);
}

/**
 * The colour closest to `color` (darker or lighter, whichever side is away
 * from the backgrounds) with at least MIN_CONTRAST against every background.
 */
export function readable(color: string, backgrounds: string[]): string {
  const ok = (c: string) => backgrounds.every((b) => contrast(c, b) >= MIN_CONTRAST);
  if (ok(color)) return color;
  const dark = backgrounds.reduce((s, b) => s + luminance(b), 0) / backgrounds.length < 0.2;
  for (let t = 0.04; t <= 1; t += 0.04) {
    const c = mix(color, dark ? t : -t);
    if (ok(c)) return c;
  }
  return dark ? WHITE : "#000000";
}

/** The CSS variables of one palette colour, per scheme. */
export function colorVariables(name: string, shades: MantineColorsTuple): { light: Record<string, string>; dark: Record<string, string> } {
  const lightTint = shades[1];
  // Filled (buttons, badges, switches) carries white text in both schemes.
  const filled = readable(shades[8], [WHITE]);
  const lightText = readable(shades[8], [WHITE, LIGHT_SURFACE, lightTint]);
  return {
    light: {
      [`--mantine-color-${name}-filled`]: filled,
      [`--mantine-color-${name}-filled-hover`]: mix(filled, -0.12),
      [`--mantine-color-${name}-text`]: lightText,
      [`--mantine-color-${name}-light-color`]: readable(shades[9], [lightTint, shades[2]]),
      [`--mantine-color-${name}-outline`]: lightText,
    },
    dark: {
      [`--mantine-color-${name}-filled`]: filled,
      [`--mantine-color-${name}-filled-hover`]: mix(filled, -0.12),
      [`--mantine-color-${name}-text`]: readable(shades[4], [DARK_BODY, DARK_SURFACE]),
      [`--mantine-color-${name}-outline`]: readable(shades[4], [DARK_BODY, DARK_SURFACE]),
    },
  };
}

export const theme = createTheme({
  primaryColor: "indigo",
  primaryShade: { light: 8, dark: 8 },
  defaultRadius: "md",
  fontFamily: "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif",
  components: {
    // Every dialog's close button has a name for screen readers.
    Modal: Modal.extend({ defaultProps: { closeButtonProps: { "aria-label": "Close" } } }),
    // Links in running text are told apart by more than their colour (a
    // link standing alone, such as a name in a table cell, may say otherwise).
    Anchor: Anchor.extend({ defaultProps: { underline: "always" } }),
  },
});

/** Readable dimmed, error, anchor and per-colour variables (see the file comment). */
export const cssVariablesResolver: CSSVariablesResolver = (t) => {
  const primary = t.colors[t.primaryColor] ?? DEFAULT_THEME.colors.indigo;
  const light: Record<string, string> = {
    "--mantine-color-dimmed": readable(t.colors.gray[6], [WHITE, LIGHT_SURFACE]),
    "--mantine-color-error": readable(t.colors.red[8], [WHITE, t.colors.red[0]]),
    "--mantine-color-anchor": readable(primary[8], [WHITE, LIGHT_SURFACE]),
    "--mantine-color-placeholder": readable(t.colors.gray[6], [WHITE]),
  };
  const dark: Record<string, string> = {
    "--mantine-color-dimmed": readable(t.colors.dark[2], [DARK_BODY, DARK_SURFACE]),
    "--mantine-color-error": readable(t.colors.red[5], [DARK_BODY, DARK_SURFACE]),
    "--mantine-color-anchor": readable(primary[4], [DARK_BODY, DARK_SURFACE]),
    "--mantine-color-placeholder": readable(t.colors.dark[2], [DARK_BODY, DARK_SURFACE]),
  };
  for (const [name, shades] of Object.entries(t.colors)) {
    if (name === "dark" || !shades) continue;
    const v = colorVariables(name, shades);
    Object.assign(light, v.light);
    Object.assign(dark, v.dark);
  }
  return { variables: {}, light, dark };
};
