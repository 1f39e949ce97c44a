// A linked forest as a Plan: the report's counts, one row per leaf with its path split into the
// calls it trains and the calls it only reads, and (on demand) every call of the rollout.
import type { CoreForest, CorePacked, ForestCore } from "../core/types.js";
import type { RecordLayout, SegmentLayout } from "./packing.js";
import type { Trie } from "./trie.js";
import { fillVersions, type WeightVersion } from "./weight-version.js";
import type {
  AgentInfo,
  BinSegment,
  ForestCall,
  MediaItem,
  PackedBin,
  PackedSegment,
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
  /** Whether SPEC v4's route_mismatch holds for each call. */
  readonly routeMismatch: boolean[];
  /** Each call's prefix_break (its near parent's id and where they part), null when none. */
  readonly prefixBreaks: ({ near: string; at: number } | null)[];
  /** Each eligible call's routed experts (null for the others, and when the rollout gives none). */
  readonly routedExperts: (RoutedExperts | null)[];
  /** Each eligible call's route ids for its tokens but the last (src/plan/route-ids.ts), or null. */
  readonly routeIds: (Int32Array | null)[];
  /** Each eligible call's weight version(s) (null for the others, and when it gives none). */
  readonly weightVersions: (WeightVersion | null)[];
}

/** A fresh copy of a call's occurrences (callers may change what a plan gives them). */
function mediaOf(media: MediaItem[] | null): MediaItem[] {
  return media === null ? [] : media.map(({ id, offset, length }) => ({ id, offset, length }));
}

/** The rollout-wide values every row repeats. */
export interface PlanHeader {
  rolloutId: string;
  reward: number;
  groupId: string | null;
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
  layouts: { trie: Trie | null; trees: RecordLayout[] | null; bins: RecordLayout[] | null },
  /** Rows with their arrays only (planBatch's, which copies them out): no Row objects made. */
  arraysOnly = false,
): Plan {
  report.eligible = calls.eligible.length;
  countLinkedTokens(calls, forest, report);
  const versioned = calls.weightVersions.some((v) => v !== null);
  const rows = arraysOnly ? countRows(calls, forest, report) : makeRows(calls, forest, header, report, versioned);
  report.leaves = rows.length;
  report.rows = rows.length;
  let trees: PackedTree[] = [];
  let bins: PackedBin[] = [];
  const trie = layouts.trie;
  if (trie !== null) {
    report.trie_tokens = trie.nodes.reduce((n, node) => n + node.end - node.start, 0);
    const packer = new RecordMaker(calls, forest.parents, trie, header, versioned);
    // The core filled the layouts' records in the order they were asked for: trees, then bins.
    let next = 0;
    if (layouts.trees)
      trees = layouts.trees.map((record, index) => ({
        index,
        ...packer.fields(record, forest.packed[next][index]),
        segments: packer.segments(record),
      }));
    if (layouts.trees) next++;
    if (layouts.bins) {
      const arrays = forest.packed[next];
      bins = layouts.bins.map((record, index) => ({
        index,
        ...packer.fields(record, arrays[index]),
        segments: packer.binSegments(record),
      }));
      report.packed_tokens = bins.reduce((n, bin) => n + bin.numTokens, 0);
    }
  }
  return new PlannedRollout(report, rows, trees, bins, header.agents, () => describeForest(calls, forest), core);
}

/** The fields of packed records laid out over the trie's nodes (each segment's `call` a node). */
class RecordMaker {
  /** The forest root of each eligible call. */
  private readonly rootOf: Int32Array;

  constructor(
    private readonly calls: CallTable,
    parents: ArrayLike<number>,
    private readonly trie: Trie,
    private readonly header: PlanHeader,
    private readonly versioned: boolean,
  ) {
    this.rootOf = new Int32Array(parents.length);
    for (let e = 0; e < parents.length; e++) this.rootOf[e] = parents[e] < 0 ? e : this.rootOf[parents[e]];
  }

  private id(e: number): string {
    return this.calls.ids[this.calls.eligible[e]];
  }

  private creator(s: SegmentLayout): number {
    return this.trie.nodes[s.node].creator;
  }

  fields(record: RecordLayout, arrays: CorePacked) {
    const creators: number[] = [];
    const seen = new Set<number>();
    const roots = new Set<number>();
    for (const s of record.segments) {
      const e = this.creator(s);
      if (!seen.has(e)) creators.push(e);
      seen.add(e);
      roots.add(this.rootOf[e]);
    }
    const { rolloutId, reward, groupId } = this.header;
    return {
      rolloutId,
      roots: [...roots].sort((a, b) => a - b).map((e) => this.id(e)),
      calls: creators.map((e) => this.id(e)),
      reward,
      groupId,
      numTokens: record.numTokens,
      ...arrays,
      media: this.media(record.segments),
      ...this.experts(record),
      ...(this.versioned ? { weightVersions: this.versions(record) } : {}),
    };
  }

  segments(record: RecordLayout): PackedSegment[] {
    return record.segments.map((s) => ({
      call: this.id(this.creator(s)),
      parent: s.parent,
      start: s.start,
      length: s.length,
      end: s.end,
    }));
  }

  binSegments(record: RecordLayout): BinSegment[] {
    return this.segments(record).map((s, i) => ({
      ...s,
      tree: record.segments[i].tree,
      trained: record.segments[i].trained,
    }));
  }

  /** SPEC: the record's occurrences, each once (in the segment that holds it), in packed order. */
  private media(segments: readonly SegmentLayout[]): MediaItem[] {
    const out: MediaItem[] = [];
    for (const s of segments) {
      for (const { id, offset, length } of this.calls.media[this.calls.eligible[this.creator(s)]] ?? []) {
        if (offset >= s.from && offset < s.from + s.length) out.push({ id, offset: s.start + offset - s.from, length });
      }
    }
    return out;
  }

  /**
   * SPEC: per packed token its resolved route — its creator's entry, but on the creator's last
   * token (routed only by its continuations' prefill) the entry of the first call that shared it
   * with a route — all -1 where none.
   */
  private experts(record: RecordLayout): { routedExperts?: RoutedExperts } {
    const all = this.calls.routedExperts;
    const eligible = this.calls.eligible;
    const first = all[eligible[this.creator(record.segments[0])]];
    if (!first) return {};
    const { layers, topk } = first;
    const width = layers * topk;
    // Where each segment's entries come from: its creator's, and its creator's last token's from
    // the resolver's (when the segment holds it).
    const sources = record.segments.map((s) => {
      const creator = this.creator(s);
      const index = eligible[creator];
      const last = this.calls.promptLengths[index] + this.calls.generationLengths[index] - 1;
      const holdsLast = s.from + s.length - 1 === last;
      const resolver = this.trie.lastResolver[creator];
      return {
        s,
        own: all[index]!,
        ownTo: holdsLast ? last : s.from + s.length,
        resolver: holdsLast && resolver >= 0 ? all[eligible[resolver]]! : null,
        last,
        holdsLast,
      };
    });
    const wide = sources.some(
      ({ s, own, ownTo, resolver, last }) =>
        needsInt32(own, s.from, ownTo) || (resolver !== null && needsInt32(resolver, last, last + 1)),
    );
    const data = expertArray(record.numTokens, layers, topk, wide);
    for (const { s, own, ownTo, resolver, last, holdsLast } of sources) {
      copyTokens(own, s.from, ownTo, data, s.start * width);
      if (!holdsLast) continue;
      const at = (s.start + last - s.from) * width;
      if (resolver !== null) copyTokens(resolver, last, last + 1, data, at);
      else data.fill(-1, at, at + width);
    }
    return { routedExperts: { tokens: record.numTokens, layers, topk, data } };
  }

  /** SPEC: the version of each generated token of its segment's creator, -1 elsewhere. */
  private versions(record: RecordLayout): Int32Array {
    const out = new Int32Array(record.numTokens).fill(-1);
    const { eligible, promptLengths, weightVersions } = this.calls;
    for (const s of record.segments) {
      const index = eligible[this.creator(s)];
      const version = weightVersions[index];
      if (version === null) continue;
      const prompt = promptLengths[index];
      const from = Math.max(s.from, prompt);
      const to = s.from + s.length;
      if (to <= from) continue;
      if (typeof version === "number") out.fill(version, s.start + from - s.from, s.start + to - s.from);
      else out.set(version.subarray(from - prompt, to - prompt), s.start + from - s.from);
    }
    return out;
  }
}

/** What the report's token counts read of a call table. */
export type TokenCounts = Pick<CallTable, "eligible" | "promptLengths" | "generationLengths">;

/** Roots, generated tokens, and distinct tokens (a child adds what extends its parent's sequence). */
export function countLinkedTokens(calls: TokenCounts, forest: CoreForest, report: Report): void {
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

/**
 * The core's rows as they are (tokenIds, logprobs, lossMask and no other Row field), adding to the
 * report what makeRows adds.
 */
export function countRows(calls: TokenCounts, forest: CoreForest, report: Report): Row[] {
  const { eligible, generationLengths } = calls;
  forest.rows.forEach((coreRow, index) => {
    const pathEnd = coreRow.pathStart + coreRow.pathLength;
    for (let k = coreRow.pathStart; k < pathEnd; k++) {
      const e = forest.paths[k];
      if (forest.ownerRows[e] === index) report.trained_tokens += generationLengths[eligible[e]];
    }
    report.row_tokens += coreRow.tokenIds.length;
  });
  return forest.rows as unknown as Row[];
}

/** One row per leaf, its arrays the core's; adds the trained and row tokens to the report. */
function makeRows(calls: CallTable, forest: CoreForest, header: PlanHeader, report: Report, versioned: boolean): Row[] {
  const { ids, agentNames, eligible, generationLengths, media } = calls;
  const { rolloutId, reward, groupId } = header;
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
    const row: Row = {
      index,
      rolloutId,
      leaf: ids[leaf],
      agent: agentNames[leaf],
      calls: path,
      trained,
      context,
      reward,
      groupId,
      numTokens: coreRow.tokenIds.length,
      tokenIds: coreRow.tokenIds,
      logprobs: coreRow.logprobs,
      lossMask: coreRow.lossMask,
      media: mediaOf(media[leaf]),
    };
    const experts = calls.routedExperts[leaf];
    if (experts !== null) row.routedExperts = rowExperts(experts, coreRow.tokenIds.length);
    if (versioned) row.weightVersions = rowVersions(calls, forest, coreRow);
    return row;
  });
}

/**
 * SPEC "Rows": entry i is R(leaf, i) — the leaf's own entry (its prefill routed every earlier
 * token of the row, and the path's calls agree with it) — and all -1 on the last token, which no
 * prefill routed; int16 unless a wider type is needed. (Rows leave it out when the rollout has none.)
 */
function rowExperts(experts: RoutedExperts, tokens: number): RoutedExperts {
  const { layers, topk } = experts;
  const width = layers * topk;
  const routed = Math.max(tokens - 1, 0);
  const wide = needsInt32(experts, 0, routed);
  const data = expertArray(tokens, layers, topk, wide);
  data.set(experts.data.subarray(0, routed * width));
  data.fill(-1, routed * width);
  return { tokens, layers, topk, data };
}

/** SPEC "Rows": the version that sampled each generated token of the path's calls, -1 elsewhere. */
function rowVersions(calls: CallTable, forest: CoreForest, row: CoreForest["rows"][number]): Int32Array {
  const out = new Int32Array(row.tokenIds.length).fill(-1);
  for (let k = row.pathStart; k < row.pathStart + row.pathLength; k++) {
    const index = calls.eligible[forest.paths[k]];
    const version = calls.weightVersions[index];
    if (version !== null) fillVersions(version, calls.generationLengths[index], out, calls.promptLengths[index]);
  }
  return out;
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
      routeMismatch: calls.routeMismatch[index],
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
    for (const records of [this.trees, this.bins]) {
      for (const record of records) {
        record.tokenIds = RELEASED_TOKENS;
        record.positionIds = RELEASED_TOKENS;
        record.logprobs = RELEASED_LOGPROBS;
        record.lossMask = RELEASED_MASK;
      }
    }
    this.#core.release();
  }
}

const RELEASED_TOKENS = new Int32Array(0);
const RELEASED_LOGPROBS = new Float32Array(0);
const RELEASED_MASK = new Uint8Array(0);
