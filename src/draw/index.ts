// Pictures of a plan: renderSvg (standalone SVG of the forest, at any scale, fitted or windowed),
// renderPackedSvg (the packed layout and what it saves), renderBinsSvg (the same in bins of a
// capacity), layout (the geometry the page zooms and scrolls by), faultOf (the call a rejection
// names) and media names (short media ids, as show, the SVG and the page print them).
// Environment-neutral: used by the CLI's `draw` and the page.
export {
  XML_DECLARATION,
  collapsedLabel,
  renderSvg,
  type DrawablePlan,
  type SvgOptions,
  type Window,
} from "./svg.js";
export { renderPackedSvg, type PackedDrawable, type PackedSvgOptions } from "./packed.js";
export { renderBinsSvg, binsSavingsLine, type BinsDrawable } from "./bins.js";
export { savingsOf, savingsLine } from "./savings.js";
export { layout, MIN_FIT_WIDTH, type Layout } from "./layout.js";
export { COL, MAX_COL, scaleAt } from "./scale.js";
export { faultOf, type Fault } from "./fault.js";
export { mediaNamer } from "./media.js";
export { clipMiddle } from "./xml.js";

/** A rollout id as part of a file name: characters outside [A-Za-z0-9._-] become `_`, at most 120. */
export function fileSafeId(id: string): string {
  return id.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 120);
}
