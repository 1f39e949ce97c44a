// A plan as one standalone SVG: lanes of calls in ledger order with links to parents, roots,
// leaves, context cuts and media cuts marked, and beneath, each row's path (trained calls filled,
// context calls hollow). Same plan and options, same bytes: no clock, no randomness, integer
// coordinates only. At the detail scale calls are boxes with their ids; zoomed out (`fit`, or the
// page's zoom) they are marks, and lanes may be collapsed. A `window` draws only what is in it
// (the page draws what is on screen of a picture too big to draw whole).
import type { ForestCall } from "../types.js";
import { countOf } from "../messages.js";
import { faultOf } from "./fault.js";
import {
  LABEL_EVERY_PX,
  LEGEND_LINE_H,
  ROW_LABEL_CHARS,
  agentName,
  layout,
  type Cut,
  type DrawablePlan,
  type Lane,
  type Layout,
  type LayoutOptions,
} from "./layout.js";
import { legendItems, type PlacedItem } from "./legend.js";
import { CHAR, FONT, FONT_FAMILY, MARGIN } from "./metrics.js";
import { clip, clipMiddle, text, wrap, xmlText } from "./xml.js";
import { MEDIA_CUT_REASON, mediaList, mediaNamer } from "./media.js";

export type { DrawablePlan } from "./layout.js";

/** A part of the picture, in its own px. */
export interface Window {
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface SvgOptions extends LayoutOptions {
  /** Start with an `<?xml ...?>` declaration (a file on its own); false to inline in HTML. Default true. */
  declaration?: boolean;
  /** A layout already made for this plan (the page keeps one); else made from the options. */
  layout?: Layout;
  /** Draw only what lies in this part (the picture keeps its full size). */
  window?: Window;
}

const STYLE = [
  `.cf-forest text{fill:#222}`,
  `.cf-forest .cf-title{font-weight:bold}`,
  `.cf-forest .cf-dim{fill:#666}`,
  `.cf-forest .cf-bad{fill:#c0392b}`,
  `.cf-forest .cf-lane-label{font-weight:bold}`,
  `.cf-forest .cf-lane-repeat{fill:#999}`,
  `.cf-forest .cf-box{stroke-width:1.5}`,
  `.cf-forest .cf-unlinked{fill:#fff;stroke:#999;stroke-dasharray:4 3}`,
  `.cf-forest .cf-root{fill:#222}`,
  `.cf-forest .cf-leaf{fill:#222}`,
  `.cf-forest .cf-link{fill:none;stroke:#555;stroke-width:1.2}`,
  `.cf-forest .cf-cut{stroke:#c0392b;stroke-width:2;stroke-dasharray:5 3}`,
  `.cf-forest .cf-path{stroke:#bbb;stroke-width:1}`,
  `.cf-forest .cf-context{fill:#fff;stroke-width:1.5}`,
  `.cf-forest .cf-trained{stroke-width:1.5}`,
].join("");
/** Only in a picture with a media cut: a rollout without media keeps its bytes (and snapshot). */
const MEDIA_STYLE = [
  `.cf-forest .cf-media-cut{stroke:#8e44ad;stroke-width:2;stroke-dasharray:2 3}`,
  `.cf-forest .cf-media{fill:#8e44ad}`,
].join("");
/** Only in a picture with a prefix break: a near parent's dashed arrow. */
const NEAR_STYLE = `.cf-forest .cf-near{fill:none;stroke:#d35400;stroke-width:1.2;stroke-dasharray:5 3}`;
/** Only zoomed out: thinner strokes for marks a few px wide. */
const COMPACT_STYLE = [
  `.cf-forest .cf-mark{stroke:none}`,
  `.cf-forest .cf-unlinked-mark{fill:#ccc}`,
  `.cf-forest .cf-link{stroke-width:.8;stroke-opacity:.7}`,
  `.cf-forest .cf-context{stroke-width:1}`,
  `.cf-forest .cf-trained{stroke-width:1}`,
].join("");
/** Only with a collapsed lane. */
const COLLAPSED_STYLE = `.cf-forest .cf-tick{fill-opacity:.6}`;

/** The first line of a standalone SVG file (\`renderSvg\` without \`declaration: false\`). */
export const XML_DECLARATION = `<?xml version="1.0" encoding="UTF-8"?>`;

/** What of the picture a window shows (everything without one). */
class View {
  constructor(private readonly w: Window | undefined) {}
  x(x0: number, x1: number): boolean {
    return this.w === undefined || (x1 >= this.w.x && x0 <= this.w.x + this.w.width);
  }
  y(y0: number, y1: number): boolean {
    return this.w === undefined || (y1 >= this.w.y && y0 <= this.w.y + this.w.height);
  }
  box(x0: number, y0: number, x1: number, y1: number): boolean {
    return this.x(Math.min(x0, x1), Math.max(x0, x1)) && this.y(Math.min(y0, y1), Math.max(y0, y1));
  }
}

/** The title and the counts, clipped to the picture's width (a rollout id is free text). */
function header(plan: DrawablePlan, width: number): string[] {
  const { report } = plan;
  const out: string[] = [];
  const chars = Math.floor((width - 2 * MARGIN) / CHAR);
  const id = report.rollout_id ?? "(no id)";
  out.push(text(MARGIN, MARGIN + 12, clip(`rollout ${id}`, chars), "cf-title"));
  if (report.status === "rejected") return out;
  const counts =
    `${countOf(report.calls, "call")} · ${report.eligible} eligible · ${countOf(report.roots, "tree")} · ` +
    `${countOf(report.leaves, "leaf", "leaves")} · ` +
    `${countOf(report.rows, "row")} · tokens: ${report.captured_tokens} generated, ` +
    `${report.trained_tokens} trained, ` +
    `${report.row_tokens} in rows, ${report.unique_tokens} unique`;
  out.push(text(MARGIN, MARGIN + 30, clip(counts, chars), "cf-dim"));
  return out;
}

function legendMark(item: PlacedItem, y: number): string {
  const x = item.x;
  switch (item.mark) {
    case "root":
      return `<circle cx="${x + 5}" cy="${y + 7}" r="4" class="cf-root"/>`;
    case "leaf":
      return `<rect x="${x}" y="${y}" width="5" height="14" class="cf-leaf"/>`;
    case "link":
      return `<path d="M${x + 24},${y + 7} H${x}" class="cf-link" marker-end="url(#cf-arrow)"/>`;
    case "cut":
      return `<path d="M${x + 4},${y - 1} V${y + 15}" class="cf-cut"/>`;
    case "trained":
      return `<rect x="${x}" y="${y + 1}" width="18" height="12" class="cf-trained" fill="#888" stroke="#888"/>`;
    case "context":
      return `<rect x="${x}" y="${y + 1}" width="18" height="12" class="cf-context" stroke="#888"/>`;
    case "unlinked":
      return `<rect x="${x}" y="${y + 1}" width="18" height="12" class="cf-unlinked"/>`;
    case "media-cut":
      return `<path d="M${x + 4},${y - 1} V${y + 15}" class="cf-media-cut"/>`;
    case "near":
      return `<path d="M${x + 24},${y + 7} H${x}" class="cf-near" marker-end="url(#cf-arrow)"/>`;
  }
}

/** The key to the marks, drawn with the same shapes as the picture, in as many lines as it needs. */
function legend(mediaCuts: boolean, width: number, nearParents: boolean): string[] {
  const out: string[] = [];
  for (const item of legendItems(mediaCuts, width, nearParents)) {
    const y = MARGIN + 44 + item.line * LEGEND_LINE_H;
    out.push(legendMark(item, y), text(item.x + item.markW + 6, y + 11, item.label, "cf-dim"));
  }
  return out;
}

/** A lane's label in `chars` characters: the mode gives way first, then the middle of the name. */
export function laneText(lane: Pick<Lane, "name" | "mode">, chars: number): string {
  const name = Array.from(lane.name);
  if (name.length >= chars - 4 || lane.mode === "") return clipMiddle(lane.name, chars);
  return `${lane.name} · ${clip(lane.mode, chars - name.length - 3)}`;
}

/**
 * A collapsed lane's label in at most `chars` characters: what it holds. The counts are never cut;
 * the words ("agents", "calls") give way first, then the middle of the name, then the name.
 */
export function collapsedLabel(lane: Pick<Lane, "name" | "agents" | "calls">, chars: number): string {
  const more = lane.agents - 1;
  const counts = [
    `${more > 0 ? ` +${countOf(more, "agent")}` : ""} · ${countOf(lane.calls, "call")}`,
    `${more > 0 ? ` +${more}` : ""} · ${countOf(lane.calls, "call")}`,
    `${more > 0 ? ` +${more}` : ""} · ${lane.calls}`,
  ];
  const name = Array.from(lane.name).length;
  for (const tail of counts) if (name + tail.length <= chars) return lane.name + tail;
  for (const tail of counts) {
    const room = chars - tail.length;
    const shown = clipMiddle(lane.name, room);
    if (shown !== "" && room >= Math.min(name, 4)) return shown + tail;
  }
  const bare = counts[2].replace(/^ · /, "").trim();
  return bare.length <= chars ? bare : "";
}
/**
 * Where a lane's label is repeated: about every LABEL_EVERY_PX along the lane, only near the
 * lane's own calls (at most two per call), so a scrolled view names the lanes it shows calls in
 * and the labels stay linear in the picture's size (not lanes × columns).
 */
function repeatSpots(plan: DrawablePlan, l: Layout): Map<string, number[]> {
  const every = Math.max(1, Math.round(LABEL_EVERY_PX / l.scale.col));
  const columns = plan.forest.length;
  const byAgent = new Map<string, Set<number>>();
  for (const call of plan.forest) {
    if (l.folded.has(call.agent)) continue;
    let set = byAgent.get(call.agent);
    if (set === undefined) byAgent.set(call.agent, (set = new Set()));
    const before = Math.floor(call.index / every) * every;
    for (const c of [before, before + every]) if (c > 0 && c < columns) set.add(c);
  }
  return new Map([...byAgent].map(([agent, set]) => [agent, [...set].sort((a, b) => a - b)]));
}

function lanes(plan: DrawablePlan, l: Layout, view: View): string[] {
  const out: string[] = [];
  const s = l.scale;
  const repeats = s.labels ? repeatSpots(plan, l) : new Map<string, number[]>();
  const chars = Math.floor((l.gutter - 16) / CHAR);
  // Text sits on the box's baseline at detail; centred in a lower lane.
  l.lanes.forEach((lane, i) => {
    if (!view.y(lane.y, lane.y + lane.height)) return;
    if (i % 2 === 0) out.push(`<rect x="0" y="${lane.y}" width="${l.width}" height="${lane.height}" fill="#f6f6f6"/>`);
    const bar = Math.min(6, Math.floor(lane.height / 4));
    out.push(
      `<rect x="${MARGIN - 8}" y="${lane.y + bar}" width="4" height="${lane.height - 2 * bar}" fill="${lane.colour}"/>`,
    );
    const baseline = lane.collapsed || !s.labels ? lane.y + Math.round(lane.height / 2) + 4 : lane.y + s.boxTop + 20;
    if (lane.height >= 12)
      out.push(
        text(
          MARGIN,
          baseline,
          lane.collapsed ? `▸ ${collapsedLabel(lane, chars - 2)}` : laneText(lane, chars),
          "cf-lane-label",
        ),
      );
    if (lane.collapsed) return;
    for (const c of repeats.get(lane.agent) ?? []) {
      const x = l.left + Math.round(c * s.col);
      if (view.x(x, x + 24 * CHAR)) out.push(text(x, lane.y + 13, laneText(lane, 24), "cf-lane-repeat"));
    }
  });
  return out;
}

/** Where a call is drawn: its box, or its tick in the collapsed lane it is folded into. */
function spot(l: Layout, call: ForestCall): { x: number; y: number; w: number; h: number } {
  const lane = l.laneOf.get(call.agent)!;
  const x = l.x.get(call.id)!;
  if (l.folded.has(call.agent))
    return { x, y: lane.y + 4, w: Math.max(1, Math.min(l.scale.boxW, 4)), h: lane.height - 8 };
  return { x, y: lane.y + l.scale.boxTop, w: l.scale.boxW, h: l.scale.boxH };
}

function links(plan: DrawablePlan, l: Layout, byId: Map<string, ForestCall>, view: View): string[] {
  const out: string[] = [];
  // Arrowheads shrink with the marks, and go when columns are too narrow to tell them apart.
  const marker = l.scale.labels
    ? ` marker-end="url(#cf-arrow)"`
    : l.scale.col >= 4
      ? ` marker-end="url(#cf-arrow-small)"`
      : "";
  // Position of each call within its lane, to tell whether a same-lane link would cross a box.
  const laneSlot = new Map<string, number>();
  const laneCount = new Map<Lane, number>();
  for (const call of plan.forest) {
    const lane = l.laneOf.get(call.agent)!;
    const n = laneCount.get(lane) ?? 0;
    laneSlot.set(call.id, n);
    laneCount.set(lane, n + 1);
  }
  /** The path from `call` to `target` (its parent, or its near parent), or null when not drawn. */
  const path = (
    call: ForestCall,
    target: ForestCall,
  ): { d: string; bounds: [number, number, number, number] } | null => {
    const childLane = l.laneOf.get(call.agent)!;
    const parentLane = l.laneOf.get(target.agent)!;
    const childFolded = l.folded.has(call.agent);
    const parentFolded = l.folded.has(target.agent);
    if (childFolded && parentFolded && childLane === parentLane) return null; // inside one collapsed lane
    const c = spot(l, call);
    const p = spot(l, target);
    const cy = c.y + Math.round(c.h / 2);
    if (childLane === parentLane && laneSlot.get(call.id)! - laneSlot.get(target.id)! > 1) {
      // boxes in between: arc over them, from top to top
      const top = childLane.y + 3;
      const cx = c.x + Math.round(c.w / 2);
      const px = p.x + Math.round(p.w / 2);
      return { d: `M${cx},${c.y} C${cx},${top} ${px},${top} ${px},${p.y}`, bounds: [px, top, cx, c.y] };
    }
    if (childLane === parentLane) return { d: `M${c.x},${cy} H${p.x + p.w}`, bounds: [p.x + p.w, cy, c.x, cy] };
    // Another lane: from the child's left side to the parent itself — its bottom (or top, when
    // the child's lane is above), at its middle — so the link leaves the call it comes from.
    const below = childLane.y > parentLane.y;
    const px = p.x + Math.round(p.w / 2);
    const pEdge = below ? p.y + p.h : p.y;
    const bend = Math.max(4, Math.round((l.scale.col - l.scale.boxW) / 2) + 8);
    const rise = Math.round((cy - pEdge) / 2);
    return {
      d: `M${c.x},${cy} C${c.x - bend},${cy} ${px},${pEdge + rise} ${px},${pEdge}`,
      bounds: [Math.min(px, c.x - bend), pEdge, c.x, cy],
    };
  };
  /** A near parent's path: in one lane an arc under the boxes (a parent's link is above or between). */
  const nearPath = (call: ForestCall, near: ForestCall): ReturnType<typeof path> => {
    const lane = l.laneOf.get(call.agent)!;
    if (lane !== l.laneOf.get(near.agent) || l.folded.has(call.agent)) return path(call, near);
    const c = spot(l, call);
    const p = spot(l, near);
    const bottom = lane.y + lane.height - 3;
    const cx = c.x + Math.round(c.w / 2);
    const px = p.x + Math.round(p.w / 2);
    return {
      d: `M${cx},${c.y + c.h} C${cx},${bottom} ${px},${bottom} ${px},${p.y + p.h}`,
      bounds: [px, p.y + p.h, cx, bottom],
    };
  };
  for (const call of plan.forest) {
    if (call.parent === null) continue;
    const link = path(call, byId.get(call.parent)!);
    if (link !== null && view.box(...link.bounds)) out.push(`<path d="${link.d}" class="cf-link"${marker}/>`);
  }
  // A near parent (SPEC's prefix_break): dashed, to the call whose prompt this one resent and
  // whose generation it left.
  for (const call of plan.forest) {
    if (call.nearParent === null) continue;
    const near = byId.get(call.nearParent);
    const link = near === undefined ? null : nearPath(call, near);
    if (link === null || !view.box(...link.bounds)) continue;
    const title = `${call.id} resent ${call.nearParent}'s prompt and parts from its generation at token ${call.breakAt} (prefix break)`;
    out.push(
      `<path d="${link.d}" class="cf-near" data-call="${xmlText(call.id)}" data-near="${xmlText(call.nearParent)}"` +
        `${marker}><title>${xmlText(title)}</title></path>`,
    );
  }
  return out;
}

function cutTitle(cut: Cut): string {
  if (cut.reason === "context") {
    return (
      `context cut in ${agentName(cut.agent)}: ${cut.before} was the last call of the old context, ` +
      `${cut.after} starts a new tree`
    );
  }
  const then =
    cut.before === null ? "so it starts a new tree" : `so it continues ${cut.before}, a shorter call whose media agree`;
  return `media cut in ${agentName(cut.agent)} before ${cut.after}: ${MEDIA_CUT_REASON}, ${then}`;
}

function cuts(l: Layout, view: View): string[] {
  const out: string[] = [];
  for (const cut of l.cuts) {
    const height = l.laneOf.get(cut.agent)!.height;
    if (!view.box(cut.x - 2, cut.y, cut.x + 70, cut.y + height)) continue;
    const [line, label, labelClass] =
      cut.reason === "context" ? ["cf-cut", "cut", "cf-bad"] : ["cf-media-cut", "media cut", "cf-media"];
    // A context cut's group keeps its old attributes exactly (the snapshot); a media cut says what it is.
    const kind =
      cut.reason === "context" ? `class="cf-cut-mark"` : `class="cf-cut-mark cf-is-media-cut" data-reason="media"`;
    const word = l.scale.labels ? text(cut.x + 3, cut.y + height - 4, label, labelClass) : "";
    out.push(
      `<g ${kind} data-after="${xmlText(cut.after)}"><title>${xmlText(cutTitle(cut))}</title>` +
        `<path d="M${cut.x},${cut.y + 4} V${cut.y + height - 4}" class="${line}"/>${word}</g>`,
    );
  }
  return out;
}

/** A call's tooltip: what it is and where it went. */
export function callTitle(
  call: ForestCall,
  label: string,
  mediaName: (id: string) => string,
  compaction?: string,
): string {
  const parts = [`${call.id} · ${label}`, `calls[${call.index}]`];
  if (compaction !== undefined) parts.push(compaction === "" ? "compaction" : `compaction: ${compaction}`);
  parts.push(`${call.promptLength} prompt + ${call.generationLength} generated tokens`);
  if (!call.kept) parts.push("not kept");
  else if (!call.eligible) parts.push("empty generation");
  else {
    parts.push(call.root ? "root" : `continues ${call.parent}`);
    if (call.leaf) parts.push(`leaf of row ${call.ownerRow}`);
    parts.push(`trained in row ${call.ownerRow}`);
    if (call.mediaMismatch) parts.push(`media cut: ${MEDIA_CUT_REASON}`);
    if (call.nearParent !== null) parts.push(`prefix break: near ${call.nearParent}, parts at ${call.breakAt}`);
  }
  if (call.media.length > 0) parts.push(mediaList(call.media, mediaName));
  return parts.join(" · ");
}

function calls(plan: DrawablePlan, l: Layout, view: View): string[] {
  const out: string[] = [];
  const s = l.scale;
  const mediaName = mediaNamer(plan.forest);
  const boxChars = Math.floor((s.boxW - 8) / CHAR);
  // Calls a capture's own compaction records name (diagnostic context_compaction): labelled.
  const compactions = new Map<string, string>();
  for (const d of plan.report.diagnostics)
    if (d.code === "context_compaction" && d.call !== null) compactions.set(d.call, d.detail ?? "");
  for (const call of plan.forest) {
    const lane = l.laneOf.get(call.agent)!;
    const { x, y, w, h } = spot(l, call);
    if (!view.box(x - 6, y, x + w, y + h)) continue;
    const label = lane.agent === call.agent ? lane.label : agentName(call.agent);
    if (l.folded.has(call.agent)) {
      // Folded into a collapsed lane: a tick, not a call box (expand the lane to see the call).
      out.push(
        `<rect x="${x}" y="${y}" width="${w}" height="${h}" class="cf-tick" data-index="${call.index}" ` +
          `fill="${call.eligible ? lane.colour : "#ccc"}"/>`,
      );
      continue;
    }
    const classes = [
      "cf-call",
      call.root ? "cf-is-root" : "",
      call.leaf ? "cf-is-leaf" : "",
      call.eligible ? "" : "cf-is-unlinked",
      call.mediaMismatch ? "cf-is-media-mismatch" : "",
    ];
    out.push(
      `<g class="${classes.filter(Boolean).join(" ")}" data-call="${xmlText(call.id)}" data-index="${call.index}">` +
        `<title>${xmlText(callTitle(call, label, mediaName, compactions.get(call.id)))}</title>`,
    );
    if (!s.labels) {
      out.push(
        call.eligible
          ? `<rect x="${x}" y="${y}" width="${w}" height="${h}" class="cf-box cf-mark" fill="${lane.colour}"/>`
          : `<rect x="${x}" y="${y}" width="${w}" height="${h}" class="cf-unlinked-mark"/>`,
      );
      if (call.root && s.col >= 6) out.push(`<circle cx="${x}" cy="${y + h / 2}" r="2" class="cf-root"/>`);
      if (call.leaf && w >= 5) out.push(`<rect x="${x + w - 2}" y="${y}" width="2" height="${h}" class="cf-leaf"/>`);
      out.push(`</g>`);
      continue;
    }
    if (call.eligible) {
      out.push(
        `<rect x="${x}" y="${y}" width="${w}" height="${h}" rx="3" class="cf-box" fill="${lane.colour}" ` +
          `fill-opacity="0.2" stroke="${lane.colour}"/>`,
      );
    } else {
      out.push(`<rect x="${x}" y="${y}" width="${w}" height="${h}" rx="3" class="cf-unlinked"/>`);
    }
    out.push(text(x + 6, y + 13, clipMiddle(call.id, boxChars)));
    // A capture's compaction call says so where the row number would be (the tooltip has both).
    const second = !call.kept
      ? "not kept"
      : !call.eligible
        ? "empty"
        : compactions.has(call.id)
          ? "compacted"
          : `row ${call.ownerRow}`;
    out.push(text(x + 6, y + 27, clip(second, boxChars), "cf-dim"));
    if (call.root) out.push(`<circle cx="${x}" cy="${y + h / 2}" r="4" class="cf-root"/>`);
    if (call.leaf) out.push(`<rect x="${x + w - 5}" y="${y}" width="5" height="${h}" class="cf-leaf"/>`);
    out.push(`</g>`);
  }
  return out;
}

function rows(plan: DrawablePlan, l: Layout, byId: Map<string, ForestCall>, view: View): string[] {
  const out: string[] = [];
  if (plan.rows.length === 0) return out;
  const s = l.scale;
  if (view.y(l.rowsTop - 24, l.rowsTop)) {
    out.push(
      text(
        MARGIN,
        l.rowsTop - 12,
        "rows: each row's path, root first (filled = trained by this row, hollow = context only)" +
          (l.rowsShown === plan.rows.length
            ? ""
            : l.rowsShown === 0
              ? ` · none of the ${countOf(plan.rows.length, "row")} fits this height`
              : ` · the first ${l.rowsShown} of ${countOf(plan.rows.length, "row")}: the rest do not fit this height`),
        "cf-title",
      ),
    );
  }
  const boxTop = Math.round((s.rowH - s.rowBoxH) / 2);
  const labelY = Math.round(s.rowH / 2) + 4;
  for (const row of plan.rows) {
    if (row.index >= l.rowsShown) break;
    const y = l.rowsTop + row.index * s.rowH;
    if (!view.y(y, y + s.rowH)) continue;
    const trained = new Set(row.trained);
    if (row.index % 2 === 0) out.push(`<rect x="0" y="${y}" width="${l.width}" height="${s.rowH}" fill="#f6f6f6"/>`);
    const title =
      `row ${row.index} · leaf ${row.leaf} · ${row.numTokens} tokens · trains ${row.trained.join(" ") || "–"} · ` +
      `context ${row.context.join(" ") || "–"}`;
    out.push(`<g class="cf-row" data-row="${row.index}"><title>${xmlText(title)}</title>`);
    if (s.rowH >= 12) out.push(text(MARGIN, y + labelY, `row ${row.index}`, "cf-lane-label"));
    const xs = row.calls.map((id) => l.x.get(id)!);
    const mid = y + boxTop + s.rowBoxH / 2;
    if (xs.length > 1)
      out.push(
        `<path d="M${xs[0] + Math.round(s.boxW / 2)},${mid} H${xs[xs.length - 1] + Math.round(s.boxW / 2)}" ` +
          `class="cf-path"/>`,
      );
    row.calls.forEach((id, i) => {
      if (!view.x(xs[i], xs[i] + s.boxW)) return;
      const call = byId.get(id)!;
      const colour = l.laneOf.get(call.agent)!.colour;
      const box = `x="${xs[i]}" y="${y + boxTop}" width="${s.boxW}" height="${s.rowBoxH}"${s.labels ? ` rx="2"` : ""}`;
      out.push(
        trained.has(id)
          ? `<rect ${box} class="cf-trained" data-call="${xmlText(id)}" fill="${colour}" stroke="${colour}"/>`
          : `<rect ${box} class="cf-context" data-call="${xmlText(id)}" stroke="${colour}"/>`,
      );
    });
    const end = xs[xs.length - 1] + s.boxW + 6;
    const leafLane = l.laneOf.get(row.agent)!;
    const owner = leafLane.agent === row.agent ? leafLane.label : agentName(row.agent);
    if (s.rowH >= 12)
      out.push(text(end, y + labelY, clip(`${clipMiddle(row.leaf, 12)} · ${owner}`, ROW_LABEL_CHARS), "cf-dim"));
    out.push(`</g>`);
  }
  return out;
}

function rejection(plan: DrawablePlan): { body: string[]; height: number } {
  const { report } = plan;
  const body: string[] = [];
  let y = MARGIN + 36;
  body.push(text(MARGIN, y, `rejected (${report.reason}):`, "cf-bad"));
  for (const line of wrap(report.detail ?? "", 120)) {
    y += 18;
    body.push(text(MARGIN + 16, y, line));
  }
  const fault = faultOf(report);
  if (fault !== null) {
    y += 24;
    body.push(
      text(
        MARGIN,
        y,
        `call at fault: calls[${fault.index}]${fault.id !== null ? ` ${JSON.stringify(fault.id)}` : ""}`,
        "cf-title",
      ),
    );
  }
  return { body, height: y + MARGIN + 8 };
}

/** The `<svg ...>` document around a body: same header, style and arrow marker for every picture. */
export function svgDocument(options: {
  declaration?: boolean;
  width: number;
  height: number;
  title: string;
  className: string;
  style: string;
  body: readonly string[];
  smallArrow?: boolean;
}): string {
  const { width, height } = options;
  const out = [
    ...(options.declaration === false ? [] : [XML_DECLARATION]),
    `<svg xmlns="http://www.w3.org/2000/svg" class="${options.className}" width="${width}" height="${height}" ` +
      `viewBox="0 0 ${width} ${height}" ` +
      `font-family="${FONT_FAMILY}" font-size="${FONT}" role="img">`,
    `<title>${xmlText(options.title)}</title>`,
    `<style>${options.style}</style>`,
    `<defs><marker id="cf-arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto">` +
      `<path d="M0,0 L8,4 L0,8 z" fill="#555"/></marker>` +
      (options.smallArrow
        ? `<marker id="cf-arrow-small" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="5" markerHeight="5" ` +
          `orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#555"/></marker>`
        : "") +
      `</defs>`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
  ];
  // Appended one by one, never spread into push(): a body has one element per call or row,
  // more than a function call takes arguments in a large rollout.
  for (const element of options.body) out.push(element);
  out.push(`</svg>`);
  return out.join("\n") + "\n";
}

/** The plan as an SVG document (UTF-8 text). */
export function renderSvg(plan: DrawablePlan, options: SvgOptions = {}): string {
  const rejected = plan.report.status === "rejected";
  const id = plan.report.rollout_id ?? "(no id)";
  const title = `callforest: rollout ${id}`;
  if (rejected) {
    const width = Math.max(960, 2 * MARGIN + 125 * CHAR);
    const r = rejection(plan);
    return svgDocument({
      declaration: options.declaration,
      width,
      height: r.height,
      title,
      className: "cf-forest",
      style: STYLE,
      body: [...header(plan, width), ...r.body],
    });
  }
  const l = options.layout ?? layout(plan, options);
  const view = new View(options.window);
  const byId = new Map(plan.forest.map((c) => [c.id, c]));
  const body: string[] = view.y(0, l.lanesTop)
    ? [...header(plan, l.width), ...legend(l.mediaCuts, l.width, l.nearParents)]
    : [];
  for (const part of [
    lanes(plan, l, view),
    cuts(l, view),
    links(plan, l, byId, view),
    calls(plan, l, view),
    rows(plan, l, byId, view),
  ]) {
    for (const element of part) body.push(element);
  }
  const style =
    STYLE +
    (l.mediaCuts ? MEDIA_STYLE : "") +
    (l.nearParents ? NEAR_STYLE : "") +
    (l.scale.labels ? "" : COMPACT_STYLE) +
    (l.folded.size > 0 ? COLLAPSED_STYLE : "");
  return svgDocument({
    declaration: options.declaration,
    width: l.width,
    height: l.height,
    title,
    className: "cf-forest",
    style,
    body,
    smallArrow: !l.scale.labels,
  });
}
