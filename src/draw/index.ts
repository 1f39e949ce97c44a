// Pictures of a plan: renderSvg (standalone SVG), faultOf (the call a rejection names) and media
// names (short media ids, as show, the SVG and the page print them).
// Environment-neutral: used by the CLI's `draw` and by the browser page.
export { XML_DECLARATION, renderSvg, type DrawablePlan, type SvgOptions } from "./svg.js";
export { faultOf, type Fault } from "./fault.js";
export { mediaNamer } from "./media.js";

/** A rollout id as part of a file name: characters outside [A-Za-z0-9._-] become `_`, at most 120. */
export function fileSafeId(id: string): string {
  return id.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 120);
}
