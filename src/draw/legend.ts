// The key to the picture's marks: which items it has, how wide each is, and how they flow into
// lines when the picture is narrower than one line of them (a fitted picture).
import { CHAR, MARGIN } from "./metrics.js";

export type LegendMark = "root" | "leaf" | "link" | "cut" | "trained" | "context" | "unlinked" | "media-cut" | "near";

export interface LegendItem {
  mark: LegendMark;
  label: string;
  /** Width of the mark before its label. */
  markW: number;
}

const ITEMS: LegendItem[] = [
  { mark: "root", label: "root", markW: 10 },
  { mark: "leaf", label: "leaf (ends a row)", markW: 5 },
  { mark: "link", label: "continues (points to parent)", markW: 24 },
  { mark: "cut", label: "context cut (compaction)", markW: 8 },
  { mark: "trained", label: "trained", markW: 18 },
  { mark: "context", label: "context only", markW: 18 },
  { mark: "unlinked", label: "not kept / empty", markW: 18 },
];
/** Last, so a picture without one draws the legend it always did. */
const MEDIA_CUT: LegendItem = { mark: "media-cut", label: "media cut", markW: 8 };
/** After it, only in a picture with a prefix break (SPEC's prefix_break). */
const NEAR: LegendItem = { mark: "near", label: "near parent (prefix break)", markW: 24 };

/** Room of one item: its mark, 6 px, its label, 18 px to the next. */
export function itemWidth(item: LegendItem): number {
  return item.markW + 6 + Array.from(item.label).length * CHAR + 18;
}

export interface PlacedItem extends LegendItem {
  x: number;
  line: number;
}

/** What the "near parent" item takes, drawn only in a picture with a prefix break. */
export const NEAR_LEGEND_W = itemWidth(NEAR);

/** The items in order, placed on lines no wider than `width` (the picture's) less its margins. */
export function legendItems(mediaCuts: boolean, width: number, nearParents = false): PlacedItem[] {
  const items = [...ITEMS, ...(mediaCuts ? [MEDIA_CUT] : []), ...(nearParents ? [NEAR] : [])];
  const out: PlacedItem[] = [];
  let x = MARGIN;
  let line = 0;
  for (const item of items) {
    const w = itemWidth(item);
    // the last 18 px are spacing, not ink: an item may end there
    if (x > MARGIN && x + w - 18 > width - MARGIN) {
      line++;
      x = MARGIN;
    }
    out.push({ ...item, x, line });
    x += w;
  }
  return out;
}

/** Lines the legend takes at `width`. */
export function legendLines(mediaCuts: boolean, width: number, nearParents = false): number {
  const items = legendItems(mediaCuts, width, nearParents);
  return items[items.length - 1].line + 1;
}
