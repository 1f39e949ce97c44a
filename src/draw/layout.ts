// Where everything goes in the picture: one lane per agent (subagents under their parents), one
// column per call in ledger order, one line per row, at a scale (detail, or zoomed out to marks).
// Pure geometry, integers only, so the SVG is the same bytes for the same plan and options.
import type { AgentInfo, ForestCall, Report, Row } from "../types.js";
import { laneColour } from "./colours.js";
import { NEAR_LEGEND_W, legendLines } from "./legend.js";
import { CHAR, MARGIN } from "./metrics.js";
import { COL, DETAIL, columnLeft, scaleAt, type Scale } from "./scale.js";

export { BOX_W, COL } from "./scale.js";
export { CHAR, FONT, MARGIN } from "./metrics.js";

/** What the renderer needs of a plan (token arrays are not drawn). */
export interface DrawablePlan {
  report: Report;
  forest: readonly ForestCall[];
  agents: readonly AgentInfo[];
  rows: readonly Pick<Row, "index" | "leaf" | "agent" | "calls" | "trained" | "context" | "numTokens">[];
}

/** Title, counts and one line of legend. */
export const HEADER_H = 76;
/** Height of each further line of legend (a narrow, fitted picture). */
export const LEGEND_LINE_H = 22;
/** Lane labels repeat about every this many px (20 detail columns), so a scrolled view still names its lanes. */
export const LABEL_EVERY_PX = 20 * COL;
/** Characters of the label drawn after a row's leaf. */
export const ROW_LABEL_CHARS = 20;
/** Wide enough for the legend (1,023 px of marks and labels from the margin) and the header. */
export const MIN_WIDTH = 1056;
/**
 * What the legend's "media cut" item takes (8 px mark, 6, 9 characters, 18), drawn only in a
 * picture with a media cut.
 */
export const MEDIA_CUT_LEGEND_W = 96;
/** The narrowest picture `fit` makes. */
export const MIN_FIT_WIDTH = 320;

export interface Lane {
  agent: string;
  /** `name · mode` (the name alone without a mode). */
  label: string;
  name: string;
  mode: string;
  colour: string;
  /** Levels of parent agents above this one. */
  depth: number;
  y: number;
  height: number;
  /** Collapsed: its calls and its subagents' lanes are folded into this thin lane. */
  collapsed: boolean;
  /** Agents folded into a collapsed lane (itself included) and their calls; 1 and its own calls otherwise. */
  agents: number;
  calls: number;
  /** Agents below this one (any depth): what collapsing it folds away. */
  subagents: number;
}

export interface Cut {
  agent: string;
  /**
   * "context": `after` is a root although its agent had calls before (compaction, or a history
   * not resent exactly). "media": tokens alone would have linked `after` elsewhere, but its media
   * disagree (SPEC's media_mismatch): it is a root, or continues a shorter call.
   */
  reason: "context" | "media";
  /** A context cut: the old context's last call in the lane. A media cut: `after`'s parent, if any. */
  before: string | null;
  after: string;
  x: number;
  y: number;
}

export interface LayoutOptions {
  /** The scale to draw at (default: detail). Ignored with `fit`. */
  scale?: Scale;
  /** Zoom out (never in) so the picture is this many px wide, every column in view. */
  fit?: number;
  /** Compact scales only: lane height (the page fits lanes to its height). */
  laneH?: number;
  /**
   * With `fit`: the picture's most height. Lanes and rows get lower (down to FIT_MIN_LANE_H and
   * FIT_MIN_ROW_H); rows that still do not fit are left out, and the rows' title says how many.
   */
  fitHeight?: number;
  /** Agents whose lanes are collapsed, each with its subagents. */
  collapsed?: ReadonlySet<string>;
}

export interface Layout {
  scale: Scale;
  width: number;
  height: number;
  gutter: number;
  /** Left edge of column 0. */
  left: number;
  /** Top of the first lane (below title, counts and legend). */
  lanesTop: number;
  /** Lanes drawn, top to bottom (a collapsed lane's subagents have none). */
  lanes: Lane[];
  /** Each agent's lane: a folded agent's is the collapsed lane it is folded into. */
  laneOf: Map<string, Lane>;
  /** Agents folded into a collapsed lane: their calls are drawn as ticks there, not as boxes. */
  folded: Set<string>;
  /** Left edge of each call's column, by call id. */
  x: Map<string, number>;
  cuts: Cut[];
  rowsTop: number;
  /** Rows drawn: the first this many (all but when `fitHeight` left some out). */
  rowsShown: number;
  mediaCuts: boolean;
  /** Whether some call has a near parent (SPEC's prefix_break), drawn as a dashed arrow. */
  nearParents: boolean;
}

/** The lowest lane and row a height-fitted picture draws (a mark of 2 px, a line of 1). */
export const FIT_MIN_LANE_H = 4;
export const FIT_MIN_ROW_H = 3;
/** Space between the last lane and the first row, for the rows' title. */
const ROWS_GAP = { labels: 40, marks: 30 };

/** An agent's name for people: the unnamed agent ("") is "(no agent)". */
export function agentName(agent: string): string {
  return agent === "" ? "(no agent)" : agent;
}

export function agentLabel(agent: string, info: AgentInfo | undefined): string {
  const name = agentName(agent);
  return info?.mode ? `${name} · ${info.mode}` : name;
}

/**
 * Agents in lane order: depth first from each agent without a (known) parent, children in the
 * order listed, unlisted agents in order of first call. Iterative: a chain of subagents may be
 * deeper than the stack. Returns each agent with its depth and its count of subagents.
 */
export function laneOrder(
  plan: Pick<DrawablePlan, "agents" | "forest">,
): { agent: string; depth: number; subagents: number; parent: string | null }[] {
  const listed = new Map(plan.agents.map((a) => [a.id, a]));
  const all: string[] = [...listed.keys()];
  const seen = new Set(all);
  for (const call of plan.forest) {
    if (seen.has(call.agent)) continue;
    seen.add(call.agent);
    all.push(call.agent);
  }
  const children = new Map<string, string[]>();
  const roots: string[] = [];
  for (const agent of all) {
    const parent = listed.get(agent)?.parent ?? null;
    if (parent === null || parent === agent || !seen.has(parent)) roots.push(agent);
    else {
      let list = children.get(parent);
      if (list === undefined) children.set(parent, (list = []));
      list.push(agent);
    }
  }
  const out: { agent: string; depth: number; subagents: number; parent: string | null }[] = [];
  const placed = new Set<string>();
  const visit = (start: string) => {
    const stack: { agent: string; depth: number }[] = [{ agent: start, depth: 0 }];
    while (stack.length > 0) {
      const { agent, depth } = stack.pop()!;
      if (placed.has(agent)) continue;
      placed.add(agent);
      out.push({ agent, depth, subagents: 0, parent: listed.get(agent)?.parent ?? null });
      const kids = children.get(agent) ?? [];
      for (let i = kids.length - 1; i >= 0; i--) stack.push({ agent: kids[i], depth: depth + 1 });
    }
  };
  for (const root of roots) visit(root);
  // Agents on a parent cycle are reachable from no root: each starts its own lane group.
  for (const agent of all) visit(agent);
  // Subagent counts: in pre-order, an agent's subtree is the run of deeper entries after it.
  const open: number[] = [];
  out.forEach((entry, i) => {
    while (open.length > 0 && out[open[open.length - 1]].depth >= entry.depth) open.pop();
    for (const j of open) out[j].subagents++;
    open.push(i);
  });
  return out;
}

export function layout(plan: DrawablePlan, options: LayoutOptions = {}): Layout {
  const listed = new Map(plan.agents.map((a) => [a.id, a]));
  const order = laneOrder(plan);
  const labels = order.map(({ agent }) => agentLabel(agent, listed.get(agent)));
  const rowLabelChars = plan.rows.length === 0 ? 0 : `row ${plan.rows.length - 1}`.length;
  const widest = labels.reduce((most, l) => Math.max(most, Array.from(l).length), Math.max(8, rowLabelChars));
  const gutter = Math.min(widest, 32) * CHAR + 24;
  const left = MARGIN + gutter;
  const columns = plan.forest.length;
  const mediaCuts = plan.forest.some((call) => call.eligible && call.mediaMismatch);
  const nearParents = plan.forest.some((call) => call.nearParent !== null);
  const legendWidth = MIN_WIDTH + (mediaCuts ? MEDIA_CUT_LEGEND_W : 0) + (nearParents ? NEAR_LEGEND_W : 0);
  // Room after the last column for a row's leaf label (see rows() in svg.ts).
  const tail = ROW_LABEL_CHARS * CHAR + MARGIN;
  /** Where the lanes start in a picture `width` wide: below the header and every legend line. */
  const lanesTopAt = (width: number) => HEADER_H + (legendLines(mediaCuts, width, nearParents) - 1) * LEGEND_LINE_H;

  let scale = options.scale ?? DETAIL;
  let width: number;
  let rowsShown = plan.rows.length;
  if (options.fit !== undefined) {
    const room = options.fit - left - tail;
    scale = scaleAt(Math.min(COL, room / Math.max(1, columns)), options.laneH);
    width = options.fit;
    if (options.fitHeight !== undefined && !scale.labels) {
      const fitted = fitToHeight(
        scale,
        options.fitHeight - lanesTopAt(width) - ROWS_GAP.marks - MARGIN,
        visibleLanes(order, options.collapsed),
        plan.rows.length,
      );
      scale = fitted.scale;
      rowsShown = fitted.rows;
    }
  } else {
    if (options.laneH !== undefined && !scale.labels) scale = scaleAt(scale.col, options.laneH);
    width = Math.max(legendWidth, left + Math.round(columns * scale.col) + tail);
  }
  const lanesTop = lanesTopAt(width);

  // Lanes, with collapsed ones folding their subagents (an agent folded into an ancestor's lane
  // is not looked at again: its own collapse changes nothing while the ancestor's holds).
  const collapsed = options.collapsed ?? new Set<string>();
  const callsOf = new Map<string, number>();
  for (const call of plan.forest) callsOf.set(call.agent, (callsOf.get(call.agent) ?? 0) + 1);
  const lanes: Lane[] = [];
  const laneOf = new Map<string, Lane>();
  const folded = new Set<string>();
  let y = lanesTop;
  for (let i = 0; i < order.length; i++) {
    const { agent, depth, subagents } = order[i];
    const info = listed.get(agent);
    const isCollapsed = collapsed.has(agent);
    const lane: Lane = {
      agent,
      label: labels[i],
      name: agentName(agent),
      mode: info?.mode ?? "",
      colour: laneColour(i),
      depth,
      y,
      height: isCollapsed ? scale.collapsedH : scale.laneH,
      collapsed: isCollapsed,
      agents: 1,
      calls: callsOf.get(agent) ?? 0,
      subagents,
    };
    lanes.push(lane);
    laneOf.set(agent, lane);
    if (isCollapsed) {
      folded.add(agent);
      for (let j = i + 1; j <= i + subagents; j++) {
        folded.add(order[j].agent);
        laneOf.set(order[j].agent, lane);
        lane.agents++;
        lane.calls += callsOf.get(order[j].agent) ?? 0;
      }
      i += subagents;
    }
    y += lane.height;
  }

  const x = new Map<string, number>();
  for (const call of plan.forest) x.set(call.id, columnLeft(left, call.index, scale));

  // A context cut: an agent's eligible call that is a root although the agent had eligible calls
  // before (a compaction summary ended the old tree, or the history was not resent exactly).
  // A media cut: a call kept off the parent its tokens point to because the media differ; it
  // wins over a context cut at the same call, media being the reason that call is a root.
  const cuts: Cut[] = [];
  const lastEligible = new Map<string, ForestCall>();
  const gap = Math.round((scale.col - scale.boxW) / 2);
  for (const call of plan.forest) {
    if (!call.eligible) continue;
    const before = lastEligible.get(call.agent);
    lastEligible.set(call.agent, call);
    if (folded.has(call.agent)) continue;
    const at = { agent: call.agent, after: call.id, x: x.get(call.id)! - gap, y: laneOf.get(call.agent)!.y };
    if (call.mediaMismatch) cuts.push({ ...at, reason: "media", before: call.parent });
    else if (before !== undefined && call.root) cuts.push({ ...at, reason: "context", before: before.id });
  }

  const rowsTop = y + (scale.labels ? ROWS_GAP.labels : ROWS_GAP.marks);
  const height = rowsTop + rowsShown * scale.rowH + MARGIN;
  return {
    scale,
    width,
    height,
    gutter,
    left,
    lanesTop,
    lanes,
    laneOf,
    folded,
    x,
    cuts,
    rowsTop,
    rowsShown,
    mediaCuts,
    nearParents,
  };
}

/** Lanes drawn (open ones, and collapsed ones without the subagents they fold). */
function visibleLanes(order: readonly { agent: string; subagents: number }[], collapsed?: ReadonlySet<string>): number {
  let lanes = 0;
  for (let i = 0; i < order.length; i++, lanes++) if (collapsed?.has(order[i].agent)) i += order[i].subagents;
  return lanes;
}

/**
 * A compact scale whose `lanes` lanes and `rows` rows fit in `room` px: both shrink by one factor
 * down to their minimums; then as many rows as the rest of the room holds.
 */
function fitToHeight(scale: Scale, room: number, lanes: number, rows: number): { scale: Scale; rows: number } {
  const natural = lanes * scale.laneH + rows * scale.rowH;
  if (natural <= room) return { scale, rows };
  const factor = Math.max(0, room) / natural;
  const laneH = Math.max(FIT_MIN_LANE_H, Math.floor(scale.laneH * factor));
  const rowH = Math.max(FIT_MIN_ROW_H, Math.floor(scale.rowH * factor));
  const lower = scaleAt(scale.col, laneH);
  const fitted: Scale = {
    ...lower,
    collapsedH: Math.min(lower.collapsedH, laneH),
    rowH,
    rowBoxH: Math.max(1, Math.round((rowH * scale.rowBoxH) / scale.rowH)),
  };
  const rowsRoom = room - lanes * laneH;
  return { scale: fitted, rows: Math.max(0, Math.min(rows, Math.floor(rowsRoom / rowH))) };
}
