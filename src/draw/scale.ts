// How big one column, lane and row are drawn. The detail scale is the picture `draw` always made
// (boxes with ids and rows, 11px text); below it the picture zooms out to a compact scale where
// calls are small marks without text, so a rollout of thousands of calls fits a screen's width
// and its trees and rows still read. Font size never changes: only the geometry does.

export interface Scale {
  /** Column step in px; may be fractional when zoomed out (positions are rounded to integers). */
  col: number;
  /** Width of a call's box or mark, an integer ≥ 1. */
  boxW: number;
  laneH: number;
  /** Offset of a call's box below its lane's top. */
  boxTop: number;
  boxH: number;
  rowH: number;
  rowBoxH: number;
  /** Ids and row numbers inside the boxes; repeated lane labels. False: marks only. */
  labels: boolean;
  /** Height of a collapsed lane. */
  collapsedH: number;
}

/** The detail scale's column step and box width (what the picture had before zoom existed). */
export const COL = 88;
export const BOX_W = 72;

export const DETAIL: Scale = {
  col: COL,
  boxW: BOX_W,
  laneH: 64,
  boxTop: 20,
  boxH: 32,
  rowH: 22,
  rowBoxH: 14,
  labels: true,
  collapsedH: 22,
};

/** Below this column step the boxes are too narrow for an id: the compact scale takes over. */
export const LABELS_MIN_COL = 48;
/** The widest zoom: long ids get room. */
export const MAX_COL = 320;
/** The narrowest zoom: a column of a tenth of a pixel (10,000 calls in 1,000 px). */
export const MIN_COL = 0.1;

/** Lane and row heights of the compact scale; lanes may be lower still when fitted to a height. */
const COMPACT = { laneH: 28, boxTop: 7, boxH: 14, rowH: 14, rowBoxH: 8, collapsedH: 14 };

/** The scale at column step `col` (clamped to [MIN_COL, MAX_COL]); `laneH` overrides the compact lane height. */
export function scaleAt(col: number, laneH?: number): Scale {
  const c = Math.min(MAX_COL, Math.max(MIN_COL, col));
  if (c === COL && laneH === undefined) return DETAIL;
  if (c >= LABELS_MIN_COL) return { ...DETAIL, col: c, boxW: Math.round(c - (COL - BOX_W) * Math.min(1, c / COL)) };
  // Marks: a gap of about a fifth of the step while there is room for one, none below 3 px.
  const boxW = Math.max(1, c >= 3 ? Math.round(c * 0.8) : Math.round(c));
  const h = Math.max(4, Math.min(COMPACT.laneH, Math.round(laneH ?? COMPACT.laneH)));
  const boxH = Math.max(2, Math.round(h / 2));
  return { ...COMPACT, col: c, boxW, laneH: h, boxTop: Math.round((h - boxH) / 2), boxH, labels: false };
}

/** Left edge of column `index` at scale `s`, after `left` px of margin and gutter. */
export function columnLeft(left: number, index: number, s: Scale): number {
  return left + Math.round(index * s.col);
}
