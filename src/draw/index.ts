// Pictures of a plan: renderSvg (standalone SVG of the forest, at any scale, fitted or windowed),
// renderPackedSvg (the packed layout and what it saves), renderBinsSvg (the same in bins of a
// capacity), layout (the geometry the page zooms and scrolls by), faultOf (the call a rejection
// names) and media names (short media ids, as show, the SVG and the page print them).
// Environment-neutral: used by the CLI's `draw` and the page.
export { XML_DECLARATION, renderSvg, type DrawablePlan, type SvgOptions, type Window } from "./svg.js";
export { renderPackedSvg, PACKED_DEFAULT_WIDTH, type PackedDrawable, type PackedSvgOptions } from "./packed.js";
export { renderBinsSvg, binsSavingsLine, type BinsDrawable } from "./bins.js";
export { savingsOf, savingsLine, type Savings } from "./savings.js";
export { layout, laneOrder, MIN_FIT_WIDTH, type Lane, type Layout, type LayoutOptions } from "./layout.js";
export { COL, DETAIL, LABELS_MIN_COL, MAX_COL, MIN_COL, scaleAt, type Scale } from "./scale.js";
export { laneColour } from "./colours.js";
export { faultOf, type Fault } from "./fault.js";
export { mediaNamer } from "./media.js";
export { clipMiddle } from "./xml.js";

/** A rollout id as part of a file name: characters outside [A-Za-z0-9._-] become `_`, at most 120. */
export function fileSafeId(id: string): string {
  return id.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 120);
}
