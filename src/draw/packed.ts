// The packed layout as an SVG (SPEC "Packed trees"): each tree's segments on one token axis, in
// pre-order, one level per depth. A segment's block is the tokens its call adds to its parent
// (its generated tokens darker); the thin line after it runs to end(segment), over the tokens
// that attend to it; a connector drops from the parent. "×N" marks a segment that N rows repeat,
// which the packed record computes once. Above: what packing saves (tokens, attention).
import type { PackedTree } from "../types.js";
import { laneColour } from "./colours.js";
import { laneOrder, type DrawablePlan } from "./layout.js";
import { CHAR, MARGIN } from "./metrics.js";
import { savingsLine, savingsOf, count, times } from "./savings.js";
import { renderSvg, svgDocument } from "./svg.js";
import { clip, clipMiddle, xmlText } from "./xml.js";
import { agentName } from "./layout.js";

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
const TREE_HEAD_H = 26;
const TREE_GAP = 18;
const TOP = 92;

const STYLE = [
  `.cf-packed text{fill:#222}`,
  `.cf-packed .cf-title{font-weight:bold}`,
  `.cf-packed .cf-dim{fill:#666}`,
  `.cf-packed .cf-subtree{stroke-width:1.5}`,
  `.cf-packed .cf-parent-link{stroke:#888;stroke-width:1}`,
  `.cf-packed .cf-seg-label{fill:#111}`,
].join("");

function text(x: number, y: number, content: string, cls?: string): string {
  return `<text x="${x}" y="${y}"${cls ? ` class="${cls}"` : ""}>${xmlText(content)}</text>`;
}

/** Depth of each segment (its parent's + 1). Parents come first in pre-order. */
function depths(tree: PackedTree): number[] {
  const out: number[] = [];
  for (const segment of tree.segments) out.push(segment.parent < 0 ? 0 : out[segment.parent] + 1);
  return out;
}

export function renderPackedSvg(plan: PackedDrawable, options: PackedSvgOptions = {}): string {
  if (plan.report.status === "rejected") return renderSvg(plan, { declaration: options.declaration });
  const width = options.width ?? PACKED_DEFAULT_WIDTH;
  const chars = Math.floor((width - 2 * MARGIN) / CHAR);
  const savings = savingsOf(plan);
  const byId = new Map(plan.forest.map((c) => [c.id, c]));
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
        `rollout ${id} · packed: ${plan.trees.length} tree${plan.trees.length === 1 ? "" : "s"}, ${segments} segments, every token once`,
        chars,
      ),
      "cf-title",
    ),
    text(MARGIN, MARGIN + 30, clip(savingsLine(savings), chars), "cf-dim"),
    text(
      MARGIN,
      MARGIN + 48,
      clip(
        "block: the tokens a call adds to its parent (darker: generated) · line: to end(segment), the tokens that attend to it",
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
    const inRows = rowTokensOf.get(tree.root) ?? { rows: 0, tokens: 0, keys: 0 };
    let keys = 0;
    for (let i = 0; i < tree.positionIds.length; i++) keys += tree.positionIds[i] + 1;
    const head =
      `tree ${tree.index} · root ${tree.root} · ${agentName(tree.agent)} · ${count(tree.numTokens)} tokens once (its ${inRows.rows} row${inRows.rows === 1 ? "" : "s"} hold ${count(inRows.tokens)}, ${times(inRows.tokens, tree.numTokens)}) · ` +
      `keys ${count(keys)} (rows ${count(inRows.keys)})`;
    body.push(`<g class="cf-tree" data-tree="${tree.index}">`, text(MARGIN, y + 14, clip(head, chars), "cf-title"));
    const top = y + TREE_HEAD_H;
    const depth = depths(tree);
    tree.segments.forEach((segment, s) => {
      const call = byId.get(segment.call);
      const colour = colourOf.get(call?.agent ?? "") ?? laneColour(0);
      const x0 = at(segment.start);
      const x1 = Math.max(x0 + 2, at(segment.start + segment.length));
      const xEnd = Math.max(x1, at(segment.end));
      const by = top + depth[s] * LEVEL_H;
      const generated = Math.min(segment.length, call?.generationLength ?? 0);
      const xGen = Math.min(x1 - 1, Math.max(x0, at(segment.start + segment.length - generated)));
      const repeats = savings.rowsOf.get(segment.call) ?? 0;
      const title =
        `${segment.call} · segment ${s} of tree ${tree.index} · parent ${segment.parent < 0 ? "none (root)" : `segment ${segment.parent} (${tree.segments[segment.parent].call})`} · ` +
        `tokens [${segment.start}, ${segment.start + segment.length}) (${segment.length}: ${segment.length - generated} added to the prompt, ${generated} generated) · ` +
        `seen by [${segment.start}, ${segment.end}) · in ${repeats} row${repeats === 1 ? "" : "s"}${repeats > 1 ? `, computed once here` : ""}`;
      body.push(
        `<g class="cf-segment" data-tree="${tree.index}" data-segment="${s}" data-call="${xmlText(segment.call)}" data-parent="${segment.parent}" ` +
          `data-start="${segment.start}" data-length="${segment.length}" data-end="${segment.end}" data-rows="${repeats}"><title>${xmlText(title)}</title>`,
      );
      if (segment.parent >= 0) {
        const py = top + depth[segment.parent] * LEVEL_H + BLOCK_H;
        body.push(`<path d="M${x0},${py} V${by}" class="cf-parent-link"/>`);
      }
      body.push(
        `<rect x="${x0}" y="${by}" width="${x1 - x0}" height="${BLOCK_H}" fill="${colour}" fill-opacity="0.35" stroke="${colour}"/>`,
      );
      if (x1 > xGen)
        body.push(`<rect x="${xGen}" y="${by}" width="${x1 - xGen}" height="${BLOCK_H}" fill="${colour}"/>`);
      if (xEnd > x1)
        body.push(
          `<path d="M${x1},${by + BLOCK_H / 2} H${xEnd} M${xEnd},${by + 3} V${by + BLOCK_H - 3}" class="cf-subtree" stroke="${colour}"/>`,
        );
      const room = Math.floor((x1 - x0 - 4) / CHAR);
      const label = repeats > 1 ? `${segment.call} ×${repeats}` : segment.call;
      if (room >= 3)
        body.push(
          text(
            x0 + 3,
            by + 11,
            Array.from(label).length <= room ? label : clipMiddle(segment.call, room),
            "cf-seg-label",
          ),
        );
      body.push(`</g>`);
    });
    body.push(`</g>`);
    y = top + (depth.reduce((most, d) => Math.max(most, d), 0) + 1) * LEVEL_H + TREE_GAP; // no spreading: a tree may have more segments than a call takes arguments
  }
  return svgDocument({
    declaration: options.declaration,
    width,
    height: y + MARGIN,
    title: `callforest: rollout ${id}, packed`,
    className: "cf-packed",
    style: STYLE,
    body,
  });
}
