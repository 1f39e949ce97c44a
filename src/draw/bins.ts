// Bins as an SVG (SPEC "Bins"): packed records of at most a capacity's tokens, drawn as the packed
// trees are (src/draw/packed.ts) — one record per band, its segments on one token axis, one level
// per depth — with each bin's pieces (a tree, or a part of one that holds its root) one after
// another. A segment the bin trains is filled; one it holds only as context (its call is trained
// in another bin, this bin needs it for the path to what it trains) is an outline. Above: what
// the bins cost, `packed_tokens` against `row_tokens` and `unique_tokens`.
import type { PackedBin, Report } from "../types.js";
import { countOf } from "../messages.js";
import { laneColour } from "./colours.js";
import { agentName, laneOrder, type DrawablePlan } from "./layout.js";
import { CHAR, MARGIN } from "./metrics.js";
import {
  PACKED_DEFAULT_WIDTH,
  PACKED_STYLE,
  TOP,
  TREE_GAP,
  TREE_HEAD_H,
  depths,
  levelsHeight,
  segmentMarks,
  type PackedSvgOptions,
} from "./packed.js";
import { text } from "./xml.js";
import { count, times } from "./savings.js";
import { renderSvg, svgDocument } from "./svg.js";
import { clip, xmlText } from "./xml.js";

export interface BinsDrawable extends DrawablePlan {
  bins: readonly PackedBin[];
  /** The capacity the bins were laid out for (`plan(rollout, { capacity })`). */
  capacity: number;
}

const STYLE = `${PACKED_STYLE}.cf-packed .cf-context-seg{stroke-dasharray:3 2}`;

/** One line: the bins' tokens (`packed_tokens`) against the rows' and the forest's (each token once). */
export function binsSavingsLine(report: Pick<Report, "row_tokens" | "unique_tokens" | "packed_tokens">): string {
  const rows = report.row_tokens;
  const bins = report.packed_tokens ?? 0;
  const unique = report.unique_tokens;
  return (
    `tokens: rows ${count(rows)} → bins ${count(bins)} (${times(rows, bins)} fewer) · ` +
    `unique ${count(unique)} (the bins repeat ${count(bins - unique)} as context)`
  );
}

/** The percentage `a` is of `b`, whole ("95%"). */
function percent(a: number, b: number): string {
  return b === 0 ? "–" : `${Math.round((100 * a) / b)}%`;
}

export function renderBinsSvg(plan: BinsDrawable, options: PackedSvgOptions = {}): string {
  if (plan.report.status === "rejected") return renderSvg(plan, { declaration: options.declaration });
  const width = options.width ?? PACKED_DEFAULT_WIDTH;
  const chars = Math.floor((width - 2 * MARGIN) / CHAR);
  const byId = new Map(plan.forest.map((c) => [c.id, c]));
  const colourOf = new Map(laneOrder(plan).map(({ agent }, i) => [agent, laneColour(i)]));
  const maxTokens = plan.bins.reduce((most, b) => Math.max(most, b.numTokens), 1);
  const perToken = (width - 2 * MARGIN) / maxTokens;
  const at = (k: number) => MARGIN + Math.round(k * perToken);
  const id = plan.report.rollout_id ?? "(no id)";
  // Which bin trains each call (every eligible call is trained in exactly one).
  const trainedIn = new Map<string, number>();
  let segments = 0;
  let context = 0;
  for (const bin of plan.bins) {
    for (const segment of bin.segments) {
      segments++;
      if (segment.trained) trainedIn.set(segment.call, bin.index);
      else context++;
    }
  }
  const body: string[] = [
    text(
      MARGIN,
      MARGIN + 12,
      clip(
        `rollout ${id} · bins of at most ${count(plan.capacity)} tokens: ${countOf(plan.bins.length, "bin")}, ` +
          `${countOf(segments, "segment")} (${context} as context)`,
        chars,
      ),
      "cf-title",
    ),
    text(MARGIN, MARGIN + 30, clip(binsSavingsLine(plan.report), chars), "cf-dim"),
    text(
      MARGIN,
      MARGIN + 48,
      clip(
        "block: the tokens a call adds to its parent (darker: generated) · " +
          "outline: context here, trained in another bin",
        chars,
      ),
      "cf-dim",
    ),
    text(
      MARGIN,
      MARGIN + 64,
      clip(
        "a bin holds pieces (a tree, or a part of one with its root) one after another · line: to end(segment)",
        chars,
      ),
      "cf-dim",
    ),
  ];
  let y = TOP;
  for (const bin of plan.bins) {
    const trained = bin.segments.reduce((n, segment) => n + (segment.trained ? 1 : 0), 0);
    const pieces = bin.roots.length;
    const head =
      `bin ${bin.index} · ${count(bin.numTokens)} of ${count(plan.capacity)} tokens ` +
      `(${percent(bin.numTokens, plan.capacity)}) · ` +
      `${countOf(pieces, "piece")}, root${pieces === 1 ? "" : "s"} ${bin.roots.join(" ")} · ` +
      `trains ${countOf(trained, "call")}` +
      (trained < bin.segments.length ? `, ${bin.segments.length - trained} more as context` : "");
    body.push(`<g class="cf-bin" data-bin="${bin.index}">`, text(MARGIN, y + 14, clip(head, chars), "cf-title"));
    const top = y + TREE_HEAD_H;
    const depth = depths(bin);
    bin.segments.forEach((segment, s) => {
      const call = byId.get(segment.call);
      const generated = Math.min(segment.length, call?.generationLength ?? 0);
      const parent =
        segment.parent < 0
          ? "none (the piece's root)"
          : `segment ${segment.parent} (${bin.segments[segment.parent].call})`;
      const where = segment.trained
        ? "trained here"
        : `context here, trained in bin ${trainedIn.get(segment.call) ?? "–"}`;
      const title =
        `${segment.call} · segment ${s} of bin ${bin.index} ` +
        `(tree ${segment.tree}, ${agentName(call?.agent ?? "")}) · ` +
        `parent ${parent} · tokens [${segment.start}, ${segment.start + segment.length}) ` +
        `(${segment.length}: ${segment.length - generated} added to the prompt, ${generated} generated) · ` +
        `seen by [${segment.start}, ${segment.end}) · ${where}`;
      body.push(
        `<g class="cf-segment" data-bin="${bin.index}" data-segment="${s}" data-call="${xmlText(segment.call)}" ` +
          `data-parent="${segment.parent}" data-start="${segment.start}" data-length="${segment.length}" ` +
          `data-end="${segment.end}" data-tree="${segment.tree}" ` +
          `data-trained="${segment.trained}"><title>${xmlText(title)}</title>`,
      );
      const colour = colourOf.get(call?.agent ?? "") ?? laneColour(0);
      segmentMarks(body, {
        at,
        top,
        depth,
        segments: bin.segments,
        s,
        colour,
        generated,
        label: segment.call,
        hollow: !segment.trained,
      });
      body.push(`</g>`);
    });
    body.push(`</g>`);
    y = top + levelsHeight(depth) + TREE_GAP;
  }
  return svgDocument({
    declaration: options.declaration,
    width,
    height: y + MARGIN,
    title: `callforest: rollout ${id}, bins of at most ${plan.capacity} tokens`,
    className: "cf-packed cf-bins",
    style: STYLE,
    body,
  });
}
