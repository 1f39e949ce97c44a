// One colour per lane, distinct for any number of agents: Tableau 10 for the first ten (distinct
// on white, readable as fills at low opacity and as strokes), then hues a golden angle apart, so
// lanes next to each other never look alike and no two lanes share a colour.

const TABLEAU_10 = [
  "#4e79a7",
  "#f28e2b",
  "#59a14f",
  "#e15759",
  "#76b7b2",
  "#edc948",
  "#b07aa1",
  "#ff9da7",
  "#9c755f",
  "#bab0ac",
];
const GOLDEN_ANGLE = 137.50776405003785;
/** Lightness and saturation steps (cycled at coprime periods), so nearby hues differ in tone too. */
const LIGHTNESS = [0.42, 0.55, 0.34, 0.49];
const SATURATION = [0.62, 0.45, 0.75];

function hex(value: number): string {
  return Math.round(value * 255)
    .toString(16)
    .padStart(2, "0");
}

function hsl(hue: number, saturation: number, lightness: number): string {
  const a = saturation * Math.min(lightness, 1 - lightness);
  const channel = (n: number) => {
    const k = (n + hue / 30) % 12;
    return lightness - a * Math.max(-1, Math.min(k - 3, 9 - k, 1));
  };
  return `#${hex(channel(0))}${hex(channel(8))}${hex(channel(4))}`;
}

/** Colours handed out so far, in lane order, and the set of them (no two lanes share one). */
const made: string[] = [...TABLEAU_10];
const used = new Set(made);

/** The colour of lane `index` (0-based), as #rrggbb: the same for the same index, never another lane's. */
export function laneColour(index: number): string {
  while (made.length <= index) {
    const n = made.length - TABLEAU_10.length;
    const hue = (n * GOLDEN_ANGLE + 15) % 360;
    let colour = hsl(hue, SATURATION[n % SATURATION.length], LIGHTNESS[n % LIGHTNESS.length]);
    // Thousands of lanes meet in 8-bit RGB now and then: step the lightness until the colour is new.
    for (let step = 1; used.has(colour) && step < 1000; step++)
      colour = hsl(
        hue,
        SATURATION[n % SATURATION.length],
        0.3 + ((LIGHTNESS[n % LIGHTNESS.length] - 0.3 + step * 0.007) % 0.3),
      );
    made.push(colour);
    used.add(colour);
  }
  return made[index];
}
