// Where everything goes in the picture: one lane per agent, one column per call in ledger order,
// one line per row. Pure geometry (integers only), so the SVG is the same bytes for the same plan.
import type { AgentInfo, ForestCall, Report, Row } from "../types.js";

/** What the renderer needs of a plan (token arrays are not drawn). */
export interface DrawablePlan {
  report: Report;
  forest: readonly ForestCall[];
  agents: readonly AgentInfo[];
  rows: readonly Pick<Row, "index" | "leaf" | "agent" | "calls" | "trained" | "context" | "numTokens">[];
}

/** Font size everywhere, in px. Constant: big rollouts get wider, never smaller. */
export const FONT = 11;
/** Advance of one monospace character at FONT, rounded up. */
export const CHAR = 7;
export const MARGIN = 16;
/** Column step and call box size. */
export const COL = 88;
export const BOX_W = 72;
export const BOX_H = 32;
export const LANE_H = 64;
/** Offset of a call box below its lane's top (room for arcs and repeated labels). */
export const BOX_TOP = 20;
export const ROW_H = 22;
export const ROW_BOX_H = 14;
export const HEADER_H = 76;
/** Lane labels repeat every this many columns, so a scrolled view still names its lanes. */
export const LABEL_EVERY = 20;
/** Characters of the label drawn after a row's leaf. */
export const ROW_LABEL_CHARS = 20;
/** Wide enough for the legend (1,023 px of marks and labels from the margin) and the header. */
export const MIN_WIDTH = 1056;
/** What the legend's "media cut" item takes (8 px mark, 6, 9 characters, 18), drawn only in a picture with a media cut. */
export const MEDIA_CUT_LEGEND_W = 96;

export interface Lane {
  agent: string;
  label: string;
  /** Index into the colour palette. */
  colour: number;
  y: number;
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

export interface Layout {
  width: number;
  height: number;
  gutter: number;
  lanes: Lane[];
  laneOf: Map<string, Lane>;
  /** Left edge of each call's column, by call id. */
  x: Map<string, number>;
  cuts: Cut[];
  rowsTop: number;
}

/** An agent's name for people: the unnamed agent ("") is "(no agent)". */
export function agentName(agent: string): string {
  return agent === "" ? "(no agent)" : agent;
}

export function agentLabel(agent: string, info: AgentInfo | undefined): string {
  const name = agentName(agent);
  return info?.mode ? `${name} · ${info.mode}` : name;
}

export function columnX(gutter: number, index: number): number {
  return MARGIN + gutter + index * COL;
}

export function layout(plan: DrawablePlan): Layout {
  // Lanes: the listed agents in their order, then any other agent in order of first call.
  // (Maps and sets, not array searches: a rollout may have as many agents as calls.)
  const listed = new Map(plan.agents.map((a) => [a.id, a]));
  const seen = new Set(listed.keys());
  const order: string[] = [...seen];
  for (const call of plan.forest) {
    if (seen.has(call.agent)) continue;
    seen.add(call.agent);
    order.push(call.agent);
  }
  const labels = order.map((agent) => agentLabel(agent, listed.get(agent)));
  const rowLabelChars = plan.rows.length === 0 ? 0 : `row ${plan.rows.length - 1}`.length;
  const widest = labels.reduce((most, l) => Math.max(most, Array.from(l).length), Math.max(8, rowLabelChars));
  const gutter = Math.min(widest, 32) * CHAR + 24;

  const lanes: Lane[] = order.map((agent, i) => ({ agent, label: labels[i], colour: i, y: HEADER_H + i * LANE_H }));
  const laneOf = new Map(lanes.map((l) => [l.agent, l]));
  const x = new Map<string, number>();
  for (const call of plan.forest) x.set(call.id, columnX(gutter, call.index));

  // A context cut: an agent's eligible call that is a root although the agent had eligible calls
  // before (a compaction summary ended the old tree, or the history was not resent exactly).
  // A media cut: a call kept off the parent its tokens point to because the media differ; it
  // wins over a context cut at the same call, media being the reason that call is a root.
  const cuts: Cut[] = [];
  const lastEligible = new Map<string, ForestCall>();
  for (const call of plan.forest) {
    if (!call.eligible) continue;
    const before = lastEligible.get(call.agent);
    const at = { agent: call.agent, after: call.id, x: x.get(call.id)! - (COL - BOX_W) / 2, y: laneOf.get(call.agent)!.y };
    if (call.mediaMismatch) cuts.push({ ...at, reason: "media", before: call.parent });
    else if (before !== undefined && call.root) cuts.push({ ...at, reason: "context", before: before.id });
    lastEligible.set(call.agent, call);
  }

  const columns = plan.forest.length;
  const legendWidth = cuts.some((cut) => cut.reason === "media") ? MIN_WIDTH + MEDIA_CUT_LEGEND_W : MIN_WIDTH;
  // Room after the last column for a row's leaf label (see rows() in svg.ts).
  const width = Math.max(legendWidth, MARGIN + gutter + columns * COL + ROW_LABEL_CHARS * CHAR + MARGIN);
  const rowsTop = HEADER_H + lanes.length * LANE_H + 40;
  const height = rowsTop + plan.rows.length * ROW_H + MARGIN;
  return { width, height, gutter, lanes, laneOf, x, cuts, rowsTop };
}
