// A linked forest as a Plan: the report's counts, one row per leaf with its path split into the
// calls it trains and the calls it only reads, and (on demand) every call of the rollout.
import type { CoreForest, CorePacked, ForestCore } from "../core/types.js";
import type { RecordLayout, SegmentLayout } from "./packing.js";
import type {
  AgentInfo,
  BinSegment,
  ForestCall,
  MediaItem,
  PackedBin,
  PackedTree,
  Plan,
  Report,
  RoutedExperts,
  Row,
} from "../types.js";
import { copyTokens, expertArray, needsInt32 } from "./routed-experts.js";

/**
 * What the assembler kept of each committed call, in ledger order. Its own lists, not the
 * caller's objects: a plan must not keep the caller's arrays alive.
 */
export interface CallTable {
  readonly ids: string[];
  readonly agentNames: string[];
  readonly kept: boolean[];
  readonly promptLengths: number[];
  readonly generationLengths: number[];
  /** Ledger index of each eligible call, in eligible order (the core numbers calls this way). */
  readonly eligible: number[];
  /** Each call's media occurrences (checked copies), null when it has none. */
  readonly media: (MediaItem[] | null)[];
  /** Whether SPEC's media_mismatch holds for each call. */
  readonly mediaMismatch: boolean[];
  /** Each call's prefix_break (its near parent's id and where they part), null when none. */
  readonly prefixBreaks: ({ near: string; at: number } | null)[];
  /** Each eligible call's routed experts (null for the others, and when the rollout gives none). */
  readonly routedExperts: (RoutedExperts | null)[];
}

/** A fresh copy of a call's occurrences (callers may change what a plan gives them). */
function mediaOf(media: MediaItem[] | null): MediaItem[] {
  return media === null ? [] : media.map(({ id, offset, length }) => ({ id, offset, length }));
}

/** The rollout-wide values every row repeats. */
export interface PlanHeader {
  rolloutId: string;
  reward: number;
  agents: AgentInfo[];
}

/**
 * The plan of a forest the core linked. `report` comes with the call counts and diagnostics; the
 * token counts, roots, leaves and rows are added here. The plan holds `core` until release().
 */
export function makePlan(
  calls: CallTable,
  forest: CoreForest,
  header: PlanHeader,
  report: Report,
  core: ForestCore,
  layouts: { trees: RecordLayout[] | null; bins: RecordLayout[] | null },
): Plan {
  report.eligible = calls.eligible.length;
  countLinkedTokens(calls, forest, report);
  const rows = makeRows(calls, forest, header, report);
  report.leaves = rows.length;
  report.rows = rows.length;
  // The core filled the layouts' records in the order they were asked for: trees, then bins.
  let next = 0;
  const firstChild = layouts.trees || layouts.bins ? firstChildren(forest.parents) : new Int32Array(0);
  const trees = layouts.trees ? makeTrees(calls, layouts.trees, forest.packed[next++], header, firstChild) : [];
  const bins = layouts.bins ? makeBins(calls, layouts.bins, forest.packed[next++], header, firstChild) : [];
  if (layouts.bins) report.packed_tokens = bins.reduce((n, bin) => n + bin.numTokens, 0);
  return new PlannedRollout(report, rows, trees, bins, header.agents, () => describeForest(calls, forest), core);
}

/** A packed record's fields but its segments and what names it. */
function packedFields(
  calls: CallTable,
  record: RecordLayout,
  arrays: CorePacked,
  header: PlanHeader,
  firstChild: Int32Array,
) {
  const { ids, eligible } = calls;
  return {
    rolloutId: header.rolloutId,
    calls: record.segments.map((s) => ids[eligible[s.call]]),
    reward: header.reward,
    numTokens: record.numTokens,
    ...arrays,
    media: packedMedia(calls, record.segments),
    ...packedExperts(calls, record, firstChild),
  };
}

/** SPEC: each occurrence once, in the segment of the first call whose prompt has it. */
function packedMedia(calls: CallTable, segments: readonly SegmentLayout[]): MediaItem[] {
  const out: MediaItem[] = [];
  for (const s of segments) {
    for (const { id, offset, length } of calls.media[calls.eligible[s.call]] ?? []) {
      // Occurrences before `from` are the parent's (the media clause made them equal).
      if (offset >= s.from) out.push({ id, offset: s.start + offset - s.from, length });
    }
  }
  return out;
}

function makeTrees(
  calls: CallTable,
  records: RecordLayout[],
  arrays: CorePacked[],
  header: PlanHeader,
  firstChild: Int32Array,
): PackedTree[] {
  const { ids, agentNames, eligible } = calls;
  return records.map((record, index) => {
    const root = eligible[record.segments[0].call];
    return {
      index,
      root: ids[root],
      agent: agentNames[root],
      ...packedFields(calls, record, arrays[index], header, firstChild),
      segments: record.segments.map((s) => ({
        call: ids[eligible[s.call]],
        parent: s.parent,
        start: s.start,
        length: s.length,
        end: s.end,
      })),
    };
  });
}

function makeBins(
  calls: CallTable,
  records: RecordLayout[],
  arrays: CorePacked[],
  header: PlanHeader,
  firstChild: Int32Array,
): PackedBin[] {
  const { ids, eligible } = calls;
  return records.map((record, index) => ({
    index,
    roots: record.segments.filter((s) => s.parent < 0).map((s) => ids[eligible[s.call]]),
    ...packedFields(calls, record, arrays[index], header, firstChild),
    segments: record.segments.map(
      (s): BinSegment => ({
        call: ids[eligible[s.call]],
        parent: s.parent,
        start: s.start,
        length: s.length,
        end: s.end,
        tree: s.tree,
        trained: s.trained,
      }),
    ),
  }));
}

/** Roots, generated tokens, and distinct tokens (a child adds what extends its parent's sequence). */
function countLinkedTokens(calls: CallTable, forest: CoreForest, report: Report): void {
  const { eligible, promptLengths, generationLengths } = calls;
  const fullLength = (index: number) => promptLengths[index] + generationLengths[index];
  for (let e = 0; e < eligible.length; e++) {
    const index = eligible[e];
    const p = forest.parents[e];
    report.captured_tokens += generationLengths[index];
    if (p < 0) {
      report.roots++;
      report.unique_tokens += fullLength(index);
    } else {
      report.unique_tokens += fullLength(index) - fullLength(eligible[p]);
    }
  }
}

/** One row per leaf, its arrays the core's; adds the trained and row tokens to the report. */
function makeRows(calls: CallTable, forest: CoreForest, header: PlanHeader, report: Report): Row[] {
  const { ids, agentNames, eligible, generationLengths, media } = calls;
  const { rolloutId, reward } = header;
  return forest.rows.map((coreRow, index) => {
    const path: string[] = [];
    const trained: string[] = [];
    const context: string[] = [];
    const pathEnd = coreRow.pathStart + coreRow.pathLength;
    for (let k = coreRow.pathStart; k < pathEnd; k++) {
      const e = forest.paths[k];
      const id = ids[eligible[e]];
      path.push(id);
      if (forest.ownerRows[e] === index) {
        trained.push(id);
        report.trained_tokens += generationLengths[eligible[e]];
      } else {
        context.push(id);
      }
    }
    report.row_tokens += coreRow.tokenIds.length;
    const leaf = eligible[coreRow.leaf];
    return {
      index,
      rolloutId,
      leaf: ids[leaf],
      agent: agentNames[leaf],
      calls: path,
      trained,
      context,
      reward,
      numTokens: coreRow.tokenIds.length,
      tokenIds: coreRow.tokenIds,
      logprobs: coreRow.logprobs,
      lossMask: coreRow.lossMask,
      media: mediaOf(media[leaf]),
      ...rowExperts(calls.routedExperts[leaf], coreRow.tokenIds.length),
    };
  });
}

/**
 * SPEC "Rows": the first num_tokens entries of the leaf's routed experts (its prefill routed every
 * earlier token of the row), int16 unless a wider type is needed. Absent when the rollout has none.
 */
function rowExperts(experts: RoutedExperts | null, tokens: number): { routedExperts?: RoutedExperts } {
  if (experts === null) return {};
  const { layers, topk } = experts;
  const width = layers * topk;
  const wide = needsInt32(experts, 0, tokens);
  const own = experts.data.subarray(0, tokens * width);
  // A view when the type is already the one written, else one converting copy (int8, or int32 that fits int16).
  const sameType = (own instanceof Int16Array && !wide) || (own instanceof Int32Array && wide);
  const data = sameType ? (own as Int16Array | Int32Array) : expertArray(tokens, layers, topk, wide);
  if (!sameType) data.set(own);
  return { routedExperts: { tokens, layers, topk, data } };
}

/**
 * SPEC "Packed trees": each token of segment x gets x's entry at its position — but the last
 * token of a segment whose call has children, which decode never routed for real: that one comes
 * from the first child's array (its prefill routed it).
 */
function packedExperts(
  calls: CallTable,
  record: RecordLayout,
  firstChild: Int32Array,
): { routedExperts?: RoutedExperts } {
  const all = calls.routedExperts;
  const first = all[calls.eligible[record.segments[0].call]];
  if (!first) return {};
  const { layers, topk } = first;
  const width = layers * topk;
  // Where each segment's entries come from: its own array, and its last token's from the first
  // child's (which may sit in another bin); the type is chosen from exactly these entries.
  const sources = record.segments.map((s) => ({
    s,
    own: all[calls.eligible[s.call]]!,
    child: firstChild[s.call] >= 0 ? all[calls.eligible[firstChild[s.call]]]! : null,
  }));
  const last = (s: (typeof record.segments)[number]) => s.from + s.length - 1;
  const wide = sources.some(
    ({ s, own, child }) =>
      needsInt32(own, s.from, s.from + s.length) || (child !== null && needsInt32(child, last(s), last(s) + 1)),
  );
  const data = expertArray(record.numTokens, layers, topk, wide);
  for (const { s, own, child } of sources) {
    copyTokens(own, s.from, s.from + s.length, data, s.start * width);
    if (child !== null) copyTokens(child, last(s), last(s) + 1, data, (s.start + s.length - 1) * width);
  }
  return { routedExperts: { tokens: record.numTokens, layers, topk, data } };
}

/** Each eligible call's first child in ledger order (-1: a leaf). */
function firstChildren(parents: ArrayLike<number>): Int32Array {
  const first = new Int32Array(parents.length).fill(-1);
  for (let c = parents.length - 1; c >= 0; c--) if (parents[c] >= 0) first[parents[c]] = c;
  return first;
}

/** Every call of the rollout in ledger order, linked or not (plan.forest). */
function describeForest(calls: CallTable, forest: CoreForest): ForestCall[] {
  const { ids, agentNames, kept, eligible, promptLengths, generationLengths } = calls;
  const idOf = (e: number) => ids[eligible[e]];
  const children: string[][] = eligible.map(() => []);
  for (let e = 0; e < eligible.length; e++) if (forest.parents[e] >= 0) children[forest.parents[e]].push(idOf(e));
  const eligibleOf = new Map<number, number>(eligible.map((callIndex, e) => [callIndex, e]));
  return ids.map((id, index) => {
    const e = eligibleOf.get(index);
    const parent = e === undefined ? -1 : forest.parents[e];
    return {
      id,
      agent: agentNames[index],
      index,
      kept: kept[index],
      eligible: e !== undefined,
      promptLength: promptLengths[index],
      generationLength: generationLengths[index],
      parent: parent >= 0 ? idOf(parent) : null,
      children: e === undefined ? [] : children[e],
      root: e !== undefined && parent < 0,
      leaf: e !== undefined && children[e].length === 0,
      ownerRow: e === undefined ? -1 : forest.ownerRows[e],
      media: mediaOf(calls.media[index]),
      mediaMismatch: calls.mediaMismatch[index],
      nearParent: calls.prefixBreaks[index]?.near ?? null,
      breakAt: calls.prefixBreaks[index]?.at ?? null,
    };
  });
}

/**
 * A planned rollout. A class, not an object literal with a getter: V8 gives each such literal
 * its own hidden class, and at one plan per rollout that kept young garbage alive across
 * scavenges (a third of the time of a batch of small rollouts went to the GC).
 */
class PlannedRollout implements Plan {
  // #private: not enumerable, so JSON.stringify, spreading and inspect see the plan, not the core.
  #forestCalls: ForestCall[] | null = null;
  #released = false;
  readonly #describeForest: () => ForestCall[];
  readonly #core: ForestCore;

  constructor(
    readonly report: Report,
    readonly rows: Row[],
    readonly trees: PackedTree[],
    readonly bins: PackedBin[],
    readonly agents: AgentInfo[],
    describeForest: () => ForestCall[],
    core: ForestCore,
  ) {
    this.#describeForest = describeForest;
    this.#core = core;
  }

  /** Every call of the rollout; built on first use (pictures and tables, not the hot path). */
  get forest(): ForestCall[] {
    return (this.#forestCalls ??= this.#describeForest());
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    // The rows' arrays were views of memory the next plan reuses: empty them, so a row read after
    // release() shows nothing rather than another rollout's tokens (on every backend alike).
    for (const row of this.rows) {
      row.tokenIds = RELEASED_TOKENS;
      row.logprobs = RELEASED_LOGPROBS;
      row.lossMask = RELEASED_MASK;
    }
    for (const record of [...this.trees, ...this.bins]) {
      record.tokenIds = RELEASED_TOKENS;
      record.positionIds = RELEASED_TOKENS;
      record.logprobs = RELEASED_LOGPROBS;
      record.lossMask = RELEASED_MASK;
    }
    this.#core.release();
  }
}

const RELEASED_TOKENS = new Int32Array(0);
const RELEASED_LOGPROBS = new Float32Array(0);
const RELEASED_MASK = new Uint8Array(0);
