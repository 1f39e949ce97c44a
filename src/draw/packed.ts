// The packed layout as an SVG (SPEC "Packed trees"): each tree's segments on one token axis, in
// pre-order, one level per depth. A segment's block is a run of its creator's tokens (those it
// generated darker); the thin line after it runs to end(segment), over the tokens that attend to
// it; a connector drops from the parent. "×N" marks a segment that N rows repeat, which the packed
// record computes once. Above: what packing saves (tokens, attention).
import type { PackedSegment, PackedTree } from "../types.js";
import { laneColour } from "./colours.js";
import { laneOrder, type DrawablePlan } from "./layout.js";
import { CHAR, MARGIN } from "./metrics.js";
import { savingsLine, savingsOf, count, times } from "./savings.js";
import { renderSvg, svgDocument } from "./svg.js";
import { clip, clipMiddle, text, xmlText } from "./xml.js";

export interface PackedDrawable extends DrawablePlan {
  trees: readonly PackedTree[];
}

export interface PackedSvgOptions {
  /** The picture's width in px (default 1400): the token axis spans it. */
  width?: number;
  declaration?: boolean;
}

export const PACKED_DEFAULT_WIDTH = 1400;
const LEVEL_H = 20;
const BLOCK_H = 14;
/** A record's head line, the gap after it, where the first record starts (under the four lines of text). */
export const TREE_HEAD_H = 26;
export const TREE_GAP = 18;
export const TOP = 92;

export const PACKED_STYLE = [
  `.cf-packed text{fill:#222}`,
  `.cf-packed .cf-title{font-weight:bold}`,
  `.cf-packed .cf-dim{fill:#666}`,
  `.cf-packed .cf-subtree{stroke-width:1.5}`,
  `.cf-packed .cf-parent-link{stroke:#888;stroke-width:1}`,
  `.cf-packed .cf-seg-label{fill:#111}`,
].join("");

/** Depth of each segment (its parent's + 1; a tree's or a piece's root 0). Parents come first in pre-order. */
export function depths(record: { segments: readonly PackedSegment[] }): number[] {
  const out: number[] = [];
  for (const segment of record.segments) out.push(segment.parent < 0 ? 0 : out[segment.parent] + 1);
  return out;
}

/**
 * How many of a segment's tokens its creator generated: they are its last ones, at positions past
 * the creator's prompt (a segment may hold prompt tokens only, generated ones only, or both).
 */
export function generatedIn(
  record: { positionIds: Int32Array; segments: readonly PackedSegment[] },
  s: number,
  promptLength: number,
): number {
  const segment = record.segments[s];
  if (segment.length === 0) return 0;
  const first = record.positionIds[segment.start];
  return Math.max(0, Math.min(segment.length, first + segment.length - promptLength));
}

/**
 * How many rows hold each segment of a record: a row's tokens are its leaf's trie path, the
 * segments from the one that holds the leaf's last token up to the root.
 */
export function rowsThrough(
  record: { positionIds: Int32Array; segments: readonly PackedSegment[] },
  leaves: ReadonlyMap<string, number>,
): number[] {
  const counts = record.segments.map(() => 0);
  record.segments.forEach((segment, s) => {
    const full = leaves.get(segment.call);
    const last = record.positionIds[segment.start + segment.length - 1];
    if (full === undefined || segment.length === 0 || last !== full - 1) return;
    for (let at = s; at >= 0; at = record.segments[at].parent) counts[at]++;
  });
  return counts;
}

/** Each leaf call's full length (a row per leaf). */
export function leafLengths(forest: DrawablePlan["forest"]): Map<string, number> {
  return new Map(forest.filter((c) => c.leaf).map((c) => [c.id, c.promptLength + c.generationLength]));
}

/** Where one segment is drawn, and how. */
export interface SegmentMark {
  /** The x of packed index k. */
  at: (k: number) => number;
  /** The record's first level's y, and each segment's depth. */
  top: number;
  depth: readonly number[];
  segments: readonly PackedSegment[];
  s: number;
  colour: string;
  /** The segment's generated tokens (its last ones), drawn darker unless hollow. */
  generated: number;
  label: string;
  /** Context (a bin that does not train the call): an outline, no fill. */
  hollow?: boolean;
}

/**
 * One segment's marks: a connector dropping from its parent, its block (the tokens it adds; its
 * generated tokens darker), the line to end(segment) and its label where there is room.
 */
export function segmentMarks(body: string[], m: SegmentMark): void {
  const segment = m.segments[m.s];
  const x0 = m.at(segment.start);
  const x1 = Math.max(x0 + 2, m.at(segment.start + segment.length));
  const xEnd = Math.max(x1, m.at(segment.end));
  const by = m.top + m.depth[m.s] * LEVEL_H;
  const xGen = Math.min(x1 - 1, Math.max(x0, m.at(segment.start + segment.length - m.generated)));
  if (segment.parent >= 0) {
    const py = m.top + m.depth[segment.parent] * LEVEL_H + BLOCK_H;
    body.push(`<path d="M${x0},${py} V${by}" class="cf-parent-link"/>`);
  }
  if (m.hollow)
    body.push(
      `<rect x="${x0}" y="${by}" width="${x1 - x0}" height="${BLOCK_H}" fill="#fff" stroke="${m.colour}" ` +
        `class="cf-context-seg"/>`,
    );
  else {
    body.push(
      `<rect x="${x0}" y="${by}" width="${x1 - x0}" height="${BLOCK_H}" fill="${m.colour}" fill-opacity="0.35" ` +
        `stroke="${m.colour}"/>`,
    );
    if (x1 > xGen)
      body.push(`<rect x="${xGen}" y="${by}" width="${x1 - xGen}" height="${BLOCK_H}" fill="${m.colour}"/>`);
  }
  if (xEnd > x1)
    body.push(
      `<path d="M${x1},${by + BLOCK_H / 2} H${xEnd} M${xEnd},${by + 3} V${by + BLOCK_H - 3}" class="cf-subtree" ` +
        `stroke="${m.colour}"/>`,
    );
  const room = Math.floor((x1 - x0 - 4) / CHAR);
  if (room >= 3)
    body.push(
      text(
        x0 + 3,
        by + 11,
        Array.from(m.label).length <= room ? m.label : clipMiddle(segment.call, room),
        m.hollow ? "cf-seg-label cf-dim" : "cf-seg-label",
      ),
    );
}

/** The height of a record's levels. */
export function levelsHeight(depth: readonly number[]): number {
  return (depth.reduce((most, d) => Math.max(most, d), 0) + 1) * LEVEL_H;
}

export function renderPackedSvg(plan: PackedDrawable, options: PackedSvgOptions = {}): string {
  if (plan.report.status === "rejected") return renderSvg(plan, { declaration: options.declaration });
  const width = options.width ?? PACKED_DEFAULT_WIDTH;
  const chars = Math.floor((width - 2 * MARGIN) / CHAR);
  const savings = savingsOf(plan);
  const byId = new Map(plan.forest.map((c) => [c.id, c]));
  const leaves = leafLengths(plan.forest);
  const colourOf = new Map(laneOrder(plan).map(({ agent }, i) => [agent, laneColour(i)]));
  const maxTokens = plan.trees.reduce((most, t) => Math.max(most, t.numTokens), 1);
  const perToken = (width - 2 * MARGIN) / maxTokens;
  const at = (k: number) => MARGIN + Math.round(k * perToken);
  const id = plan.report.rollout_id ?? "(no id)";
  const segments = plan.trees.reduce((n, t) => n + t.segments.length, 0);

  const body: string[] = [
    text(
      MARGIN,
      MARGIN + 12,
      clip(
        `rollout ${id} · packed: ${plan.trees.length} tree${plan.trees.length === 1 ? "" : "s"}, ` +
          `${segments} segments, every token once`,
        chars,
      ),
      "cf-title",
    ),
    text(MARGIN, MARGIN + 30, clip(savingsLine(savings), chars), "cf-dim"),
    text(
      MARGIN,
      MARGIN + 48,
      clip(
        "block: a run of one call's tokens (darker: generated by it) · " +
          "line: to end(segment), the tokens that attend to it",
        chars,
      ),
      "cf-dim",
    ),
    text(
      MARGIN,
      MARGIN + 64,
      clip("×N: N rows repeat this segment, the packed record computes it once · one token axis for all trees", chars),
      "cf-dim",
    ),
  ];
  let y = TOP;
  // Rows' tokens per tree: the rows whose path starts at the tree's root.
  const rowTokensOf = new Map<string, { rows: number; tokens: number; keys: number }>();
  for (const row of plan.rows) {
    const entry = rowTokensOf.get(row.calls[0]) ?? { rows: 0, tokens: 0, keys: 0 };
    entry.rows++;
    entry.tokens += row.numTokens;
    entry.keys += (row.numTokens * (row.numTokens + 1)) / 2;
    rowTokensOf.set(row.calls[0], entry);
  }
  for (const tree of plan.trees) {
    const inRows = { rows: 0, tokens: 0, keys: 0 };
    for (const root of tree.roots) {
      const of = rowTokensOf.get(root);
      if (of === undefined) continue;
      inRows.rows += of.rows;
      inRows.tokens += of.tokens;
      inRows.keys += of.keys;
    }
    let keys = 0;
    for (let i = 0; i < tree.positionIds.length; i++) keys += tree.positionIds[i] + 1;
    const head =
      `tree ${tree.index} · ${tree.roots.length === 1 ? "root" : "roots"} ${tree.roots.join(" ")} · ` +
      `${count(tree.numTokens)} tokens once ` +
      `(its ${inRows.rows} row${inRows.rows === 1 ? "" : "s"} hold ${count(inRows.tokens)}, ` +
      `${times(inRows.tokens, tree.numTokens)}) · ` +
      `keys ${count(keys)} (rows ${count(inRows.keys)})`;
    body.push(`<g class="cf-tree" data-tree="${tree.index}">`, text(MARGIN, y + 14, clip(head, chars), "cf-title"));
    const top = y + TREE_HEAD_H;
    const depth = depths(tree);
    const through = rowsThrough(tree, leaves);
    tree.segments.forEach((segment, s) => {
      const call = byId.get(segment.call);
      const generated = generatedIn(tree, s, call?.promptLength ?? 0);
      const repeats = through[s];
      const parent =
        segment.parent < 0 ? "none (root)" : `segment ${segment.parent} (${tree.segments[segment.parent].call})`;
      const title =
        `${segment.call} · segment ${s} of tree ${tree.index} · ` +
        `parent ${parent} · ` +
        `tokens [${segment.start}, ${segment.start + segment.length}) ` +
        `(${segment.length}: ${segment.length - generated} of its prompt, ${generated} generated) · ` +
        `seen by [${segment.start}, ${segment.end}) · in ${repeats} row${repeats === 1 ? "" : "s"}` +
        `${repeats > 1 ? `, computed once here` : ""}`;
      body.push(
        `<g class="cf-segment" data-tree="${tree.index}" data-segment="${s}" data-call="${xmlText(segment.call)}" ` +
          `data-parent="${segment.parent}" data-start="${segment.start}" data-length="${segment.length}" ` +
          `data-end="${segment.end}" data-rows="${repeats}"><title>${xmlText(title)}</title>`,
      );
      const label = repeats > 1 ? `${segment.call} ×${repeats}` : segment.call;
      const colour = colourOf.get(call?.agent ?? "") ?? laneColour(0);
      segmentMarks(body, { at, top, depth, segments: tree.segments, s, colour, generated, label });
      body.push(`</g>`);
    });
    body.push(`</g>`);
    y = top + levelsHeight(depth) + TREE_GAP; // no spreading: a tree may have more segments than a call takes arguments
  }
  return svgDocument({
    declaration: options.declaration,
    width,
    height: y + MARGIN,
    title: `callforest: rollout ${id}, packed`,
    className: "cf-packed",
    style: PACKED_STYLE,
    body,
  });
}
