// Pictures of a plan: renderSvg (standalone SVG) and faultOf (the call a rejection names).
// Environment-neutral: used by the CLI's `draw` and by the browser page.
export { renderSvg, type DrawablePlan, type SvgOptions } from "./svg.js";
export { faultOf, type Fault } from "./fault.js";
