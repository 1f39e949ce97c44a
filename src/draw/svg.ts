// A plan as one standalone SVG: lanes of calls in ledger order with links to parents, roots,
// leaves, context cuts and media cuts marked, and beneath, each row's path (trained calls filled,
// context calls hollow). Same plan, same bytes: no clock, no randomness, integer coordinates only.
import type { ForestCall } from "../types.js";
import { countOf } from "../rejection.js";
import { faultOf } from "./fault.js";
import {
  BOX_H,
  BOX_TOP,
  BOX_W,
  CHAR,
  COL,
  FONT,
  LABEL_EVERY,
  LANE_H,
  MARGIN,
  ROW_BOX_H,
  ROW_H,
  ROW_LABEL_CHARS,
  agentName,
  layout,
  type Cut,
  type DrawablePlan,
  type Layout,
} from "./layout.js";
import { clip, wrap, xmlText } from "./xml.js";
import { MEDIA_CUT_REASON, mediaList, mediaNamer } from "./media.js";

export type { DrawablePlan } from "./layout.js";

export interface SvgOptions {
  /** Start with an `<?xml ...?>` declaration (a file on its own); false to inline in HTML. Default true. */
  declaration?: boolean;
}

/** Tableau 10: distinct on white, readable as fills at low opacity and as strokes. */
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
const FONT_FAMILY = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', 'Liberation Mono', monospace";
const BOX_CHARS = Math.floor((BOX_W - 8) / CHAR);

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

function colourOf(index: number): string {
  return PALETTE[index % PALETTE.length];
}

function text(x: number, y: number, content: string, cls?: string): string {
  return `<text x="${x}" y="${y}"${cls ? ` class="${cls}"` : ""}>${xmlText(content)}</text>`;
}

/** The first line of a standalone SVG file (\`renderSvg\` without \`declaration: false\`). */
export const XML_DECLARATION = `<?xml version="1.0" encoding="UTF-8"?>`;

/** The title and the counts, clipped to the picture's width (a rollout id is free text). */
function header(plan: DrawablePlan, width: number): string[] {
  const { report } = plan;
  const out: string[] = [];
  const chars = Math.floor((width - 2 * MARGIN) / CHAR);
  const id = report.rollout_id ?? "(no id)";
  out.push(text(MARGIN, MARGIN + 12, clip(`rollout ${id}`, chars), "cf-title"));
  if (report.status === "rejected") return out;
  const counts =
    `${countOf(report.calls, "call")} · ${report.eligible} eligible · ${countOf(report.roots, "tree")} · ${countOf(report.leaves, "leaf", "leaves")} · ` +
    `${countOf(report.rows, "row")} · tokens: ${report.captured_tokens} generated, ${report.trained_tokens} trained, ` +
    `${report.row_tokens} in rows, ${report.unique_tokens} unique`;
  out.push(text(MARGIN, MARGIN + 30, clip(counts, chars), "cf-dim"));
  return out;
}

/** The key to the marks, drawn with the same shapes as the picture. */
function legend(mediaCuts: boolean): string[] {
  const y = MARGIN + 44;
  const out: string[] = [];
  let x = MARGIN;
  const item = (shape: string, label: string, shapeWidth: number) => {
    out.push(shape, text(x + shapeWidth + 6, y + 11, label, "cf-dim"));
    x += shapeWidth + 6 + Array.from(label).length * CHAR + 18;
  };
  item(`<circle cx="${x + 5}" cy="${y + 7}" r="4" class="cf-root"/>`, "root", 10);
  item(`<rect x="${x}" y="${y}" width="5" height="14" class="cf-leaf"/>`, "leaf (ends a row)", 5);
  item(`<path d="M${x + 24},${y + 7} H${x}" class="cf-link" marker-end="url(#cf-arrow)"/>`, "continues (points to parent)", 24);
  item(`<path d="M${x + 4},${y - 1} V${y + 15}" class="cf-cut"/>`, "context cut (compaction)", 8);
  item(`<rect x="${x}" y="${y + 1}" width="18" height="12" class="cf-trained" fill="#888" stroke="#888"/>`, "trained", 18);
  item(`<rect x="${x}" y="${y + 1}" width="18" height="12" class="cf-context" stroke="#888"/>`, "context only", 18);
  item(`<rect x="${x}" y="${y + 1}" width="18" height="12" class="cf-unlinked"/>`, "not kept / empty", 18);
  // last, so a picture without one draws the legend it always did (MEDIA_CUT_LEGEND_W pays for it)
  if (mediaCuts) item(`<path d="M${x + 4},${y - 1} V${y + 15}" class="cf-media-cut"/>`, "media cut", 8);
  return out;
}

/**
 * Columns where a lane's label is repeated: every LABEL_EVERY-th column with one of the lane's
 * calls at most LABEL_EVERY columns away — so a scrolled view names the lanes it shows calls in,
 * and the labels stay at most two per call (not lanes × columns).
 */
function repeatColumns(plan: DrawablePlan): Map<string, number[]> {
  const columns = plan.forest.length;
  const byAgent = new Map<string, Set<number>>();
  for (const call of plan.forest) {
    let set = byAgent.get(call.agent);
    if (set === undefined) byAgent.set(call.agent, (set = new Set()));
    const before = Math.floor(call.index / LABEL_EVERY) * LABEL_EVERY;
    for (const c of [before, before + LABEL_EVERY]) if (c > 0 && c < columns) set.add(c);
  }
  return new Map([...byAgent].map(([agent, set]) => [agent, [...set].sort((a, b) => a - b)]));
}

function lanes(plan: DrawablePlan, l: Layout): string[] {
  const out: string[] = [];
  const repeats = repeatColumns(plan);
  l.lanes.forEach((lane, i) => {
    if (i % 2 === 0) out.push(`<rect x="0" y="${lane.y}" width="${l.width}" height="${LANE_H}" fill="#f6f6f6"/>`);
    out.push(`<rect x="${MARGIN - 8}" y="${lane.y + 6}" width="4" height="${LANE_H - 12}" fill="${colourOf(lane.colour)}"/>`);
    const chars = Math.floor((l.gutter - 16) / CHAR);
    out.push(text(MARGIN, lane.y + BOX_TOP + 20, clip(lane.label, chars), "cf-lane-label"));
    // Repeated above the boxes, so a scrolled view still names its lanes.
    for (const c of repeats.get(lane.agent) ?? []) {
      out.push(text(l.gutter + MARGIN + c * COL, lane.y + 13, clip(lane.label, 24), "cf-lane-repeat"));
    }
  });
  return out;
}

function links(plan: DrawablePlan, l: Layout, byId: Map<string, ForestCall>): string[] {
  const out: string[] = [];
  // Position of each call within its lane, to tell whether a same-lane link would cross a box.
  const laneSlot = new Map<string, number>();
  const laneCount = new Map<string, number>();
  for (const call of plan.forest) {
    const n = laneCount.get(call.agent) ?? 0;
    laneSlot.set(call.id, n);
    laneCount.set(call.agent, n + 1);
  }
  for (const call of plan.forest) {
    if (call.parent === null) continue;
    const parent = byId.get(call.parent)!;
    const cx = l.x.get(call.id)!;
    const px = l.x.get(parent.id)!;
    const cy = l.laneOf.get(call.agent)!.y + BOX_TOP;
    const py = l.laneOf.get(parent.agent)!.y + BOX_TOP;
    let d: string;
    if (parent.agent === call.agent && laneSlot.get(call.id)! - laneSlot.get(parent.id)! > 1) {
      // boxes in between: arc over them, from top to top
      const top = l.laneOf.get(call.agent)!.y + 3;
      d = `M${cx + BOX_W / 2},${cy} C${cx + BOX_W / 2},${top} ${px + BOX_W / 2},${top} ${px + BOX_W / 2},${py}`;
    } else if (parent.agent === call.agent) {
      d = `M${cx},${cy + BOX_H / 2} H${px + BOX_W}`;
    } else {
      const bend = (COL - BOX_W) / 2 + 8;
      d = `M${cx},${cy + BOX_H / 2} C${cx - bend},${cy + BOX_H / 2} ${px + BOX_W + bend},${py + BOX_H / 2} ${px + BOX_W},${py + BOX_H / 2}`;
    }
    out.push(`<path d="${d}" class="cf-link" marker-end="url(#cf-arrow)"/>`);
  }
  return out;
}

function cutTitle(cut: Cut): string {
  if (cut.reason === "context") {
    return `context cut in ${agentName(cut.agent)}: ${cut.before} was the last call of the old context, ${cut.after} starts a new tree`;
  }
  const then = cut.before === null ? "so it starts a new tree" : `so it continues ${cut.before}, a shorter call whose media agree`;
  return `media cut in ${agentName(cut.agent)} before ${cut.after}: ${MEDIA_CUT_REASON}, ${then}`;
}

function cuts(l: Layout): string[] {
  return l.cuts.map((cut) => {
    const [line, label, labelClass] = cut.reason === "context" ? ["cf-cut", "cut", "cf-bad"] : ["cf-media-cut", "media cut", "cf-media"];
    // A context cut's group keeps its old attributes exactly (the snapshot); a media cut says what it is.
    const kind = cut.reason === "context" ? `class="cf-cut-mark"` : `class="cf-cut-mark cf-is-media-cut" data-reason="media"`;
    return (
      `<g ${kind} data-after="${xmlText(cut.after)}"><title>${xmlText(cutTitle(cut))}</title>` +
      `<path d="M${cut.x},${cut.y + 4} V${cut.y + LANE_H - 4}" class="${line}"/>${text(cut.x + 3, cut.y + LANE_H - 4, label, labelClass)}</g>`
    );
  });
}

function callTitle(call: ForestCall, label: string, mediaName: (id: string) => string): string {
  const parts = [`${call.id} · ${label}`, `calls[${call.index}]`];
  parts.push(`${call.promptLength} prompt + ${call.generationLength} generated tokens`);
  if (!call.kept) parts.push("not kept");
  else if (!call.eligible) parts.push("empty generation");
  else {
    parts.push(call.root ? "root" : `continues ${call.parent}`);
    if (call.leaf) parts.push(`leaf of row ${call.ownerRow}`);
    parts.push(`trained in row ${call.ownerRow}`);
    if (call.mediaMismatch) parts.push(`media cut: ${MEDIA_CUT_REASON}`);
  }
  if (call.media.length > 0) parts.push(mediaList(call.media, mediaName));
  return parts.join(" · ");
}

function calls(plan: DrawablePlan, l: Layout): string[] {
  const out: string[] = [];
  const mediaName = mediaNamer(plan.forest);
  for (const call of plan.forest) {
    const lane = l.laneOf.get(call.agent)!;
    const x = l.x.get(call.id)!;
    const y = lane.y + BOX_TOP;
    const colour = colourOf(lane.colour);
    const classes = ["cf-call", call.root ? "cf-is-root" : "", call.leaf ? "cf-is-leaf" : "", call.eligible ? "" : "cf-is-unlinked", call.mediaMismatch ? "cf-is-media-mismatch" : ""];
    out.push(`<g class="${classes.filter(Boolean).join(" ")}" data-call="${xmlText(call.id)}" data-index="${call.index}"><title>${xmlText(callTitle(call, lane.label, mediaName))}</title>`);
    if (call.eligible) {
      out.push(`<rect x="${x}" y="${y}" width="${BOX_W}" height="${BOX_H}" rx="3" class="cf-box" fill="${colour}" fill-opacity="0.2" stroke="${colour}"/>`);
    } else {
      out.push(`<rect x="${x}" y="${y}" width="${BOX_W}" height="${BOX_H}" rx="3" class="cf-unlinked"/>`);
    }
    out.push(text(x + 6, y + 13, clip(call.id, BOX_CHARS)));
    const second = !call.kept ? "not kept" : !call.eligible ? "empty" : `row ${call.ownerRow}`;
    out.push(text(x + 6, y + 27, clip(second, BOX_CHARS), "cf-dim"));
    if (call.root) out.push(`<circle cx="${x}" cy="${y + BOX_H / 2}" r="4" class="cf-root"/>`);
    if (call.leaf) out.push(`<rect x="${x + BOX_W - 5}" y="${y}" width="5" height="${BOX_H}" class="cf-leaf"/>`);
    out.push(`</g>`);
  }
  return out;
}

function rows(plan: DrawablePlan, l: Layout, byId: Map<string, ForestCall>): string[] {
  const out: string[] = [];
  if (plan.rows.length === 0) return out;
  out.push(text(MARGIN, l.rowsTop - 12, "rows: each row's path, root first (filled = trained by this row, hollow = context only)", "cf-title"));
  for (const row of plan.rows) {
    const y = l.rowsTop + row.index * ROW_H;
    const trained = new Set(row.trained);
    if (row.index % 2 === 0) out.push(`<rect x="0" y="${y}" width="${l.width}" height="${ROW_H}" fill="#f6f6f6"/>`);
    const title = `row ${row.index} · leaf ${row.leaf} · ${row.numTokens} tokens · trains ${row.trained.join(" ") || "–"} · context ${row.context.join(" ") || "–"}`;
    out.push(`<g class="cf-row" data-row="${row.index}"><title>${xmlText(title)}</title>`);
    out.push(text(MARGIN, y + 15, `row ${row.index}`, "cf-lane-label"));
    const xs = row.calls.map((id) => l.x.get(id)!);
    const mid = y + 4 + ROW_BOX_H / 2;
    if (xs.length > 1) out.push(`<path d="M${xs[0] + BOX_W / 2},${mid} H${xs[xs.length - 1] + BOX_W / 2}" class="cf-path"/>`);
    row.calls.forEach((id, i) => {
      const call = byId.get(id)!;
      const colour = colourOf(l.laneOf.get(call.agent)!.colour);
      const box = `x="${xs[i]}" y="${y + 4}" width="${BOX_W}" height="${ROW_BOX_H}" rx="2"`;
      out.push(
        trained.has(id)
          ? `<rect ${box} class="cf-trained" data-call="${xmlText(id)}" fill="${colour}" stroke="${colour}"/>`
          : `<rect ${box} class="cf-context" data-call="${xmlText(id)}" stroke="${colour}"/>`,
      );
    });
    const end = xs[xs.length - 1] + BOX_W + 6;
    out.push(text(end, y + 15, clip(`${row.leaf} · ${l.laneOf.get(row.agent)!.label}`, ROW_LABEL_CHARS), "cf-dim"));
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
    body.push(text(MARGIN, y, `call at fault: calls[${fault.index}]${fault.id !== null ? ` ${JSON.stringify(fault.id)}` : ""}`, "cf-title"));
  }
  return { body, height: y + MARGIN + 8 };
}

/** The plan as an SVG document (UTF-8 text). */
export function renderSvg(plan: DrawablePlan, options: SvgOptions = {}): string {
  const l = layout(plan);
  const rejected = plan.report.status === "rejected";
  const mediaCuts = l.cuts.some((cut) => cut.reason === "media");
  const width = rejected ? Math.max(960, 2 * MARGIN + 125 * CHAR) : l.width;
  let height = l.height;
  const body: string[] = header(plan, width);
  if (rejected) {
    const r = rejection(plan);
    body.push(...r.body);
    height = r.height;
  } else {
    const byId = new Map(plan.forest.map((c) => [c.id, c]));
    // Appended part by part, never spread into push(): a part has one element per call or row,
    // more than a function call takes arguments in a large rollout.
    for (const part of [legend(mediaCuts), lanes(plan, l), cuts(l), links(plan, l, byId), calls(plan, l), rows(plan, l, byId)]) {
      for (const element of part) body.push(element);
    }
  }
  const id = plan.report.rollout_id ?? "(no id)";
  const out = [
    ...(options.declaration === false ? [] : [XML_DECLARATION]),
    `<svg xmlns="http://www.w3.org/2000/svg" class="cf-forest" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
      `font-family="${FONT_FAMILY}" font-size="${FONT}" role="img">`,
    `<title>${xmlText(`callforest: rollout ${id}`)}</title>`,
    `<style>${STYLE}${mediaCuts ? MEDIA_STYLE : ""}</style>`,
    `<defs><marker id="cf-arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#555"/></marker></defs>`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    ...body,
    `</svg>`,
  ];
  return out.join("\n") + "\n";
}
