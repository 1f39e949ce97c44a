// Assembles one rollout in a core, call by call: identity checks (ids, agents), staging, value
// checks, linking; then the report's call counts, the rows being made by make-plan.ts. Used by
// plan() (which copies a canonical object's arrays in, or lets a JS core read typed ones in place)
// and by the builder (whose caller writes them in place).
import { callName, describeValue, errorLine } from "../messages.js";
import { Rejection } from "./rejection.js";
import { CoreMemoryError } from "../core/errors.js";
import {
  AMBIGUOUS_PARENT,
  BREAK_QUOTE,
  type CoreBreak,
  INVALID_LOGPROB,
  INVALID_TOKEN,
  MAX_CALL_TOKENS,
  SEGMENT_INTS,
  STAGED_RESULT,
  type ForestCore,
  type PackRequest,
  type SizeHints,
  type StagedCall,
  type StagedCalls,
} from "../core/types.js";
import { emptyReport, reportOfRejection } from "./report.js";
import type { RolloutHeader } from "./validate.js";
import { makePlan, type CallTable } from "./make-plan.js";
import { MediaNumbers, readMedia } from "./media.js";
import { readRoutedExperts } from "./routed-experts.js";
import { RouteIds } from "./route-ids.js";
import { readWeightVersion, type WeightVersion } from "./weight-version.js";
import { buildTrie, type Trie } from "./trie.js";
import { layOutBins, layOutTrees, leafPastCapacity, type ForestShape, type RecordLayout } from "./packing.js";
import type { AgentInfo, Diagnostic, MediaItem, Plan, PlanOptions, RejectionCode, RoutedExperts } from "../types.js";

/** Why a call's media, routed experts or weight version reject the rollout. */
export interface CallProblem {
  code: "invalid_routed_experts" | "invalid_weight_version" | "invalid_media";
  detail: string;
}

export interface CallIdentity {
  id: string;
  agent: string;
  kept: boolean;
  media?: MediaItem[] | null;
  /** Checked by readRoutedExperts; none when absent. */
  routedExperts?: RoutedExperts | null;
  /** Checked by readWeightVersion; none when absent. */
  weightVersion?: WeightVersion | null;
}

/** The caller's own arrays, when it has them, to quote the original value of a bad entry. */
export interface ValueSource {
  prompt: ArrayLike<unknown>;
  generation: ArrayLike<unknown>;
  logprobs: ArrayLike<unknown>;
}

const TOKEN_RULE = "not an integer in [0, 2^31-1]";

function tokenField(index: number, promptLength: number): string {
  return index < promptLength ? `prompt_token_ids[${index}]` : `generation_token_ids[${index - promptLength}]`;
}

export function invalidToken(where: string, index: number, promptLength: number, value: unknown): Rejection {
  return new Rejection(
    "invalid_token",
    `${where}: ${tokenField(index, promptLength)} is ${describeValue(value)}, ${TOKEN_RULE}`,
  );
}

export function invalidLogprob(where: string, index: number, value: unknown): Rejection {
  const why = typeof value === "number" && Number.isFinite(value) ? "overflows float32" : "is not a finite number";
  return new Rejection("invalid_logprob", `${where}: generation_log_probs[${index}] = ${describeValue(value)} ${why}`);
}

/** A rejected rollout's plan: no rows, and a report with no diagnostics (SPEC "Output"). */
export function planOfRejection(
  rolloutId: string | null,
  calls: number,
  rejection: Rejection,
  agents: AgentInfo[],
  options: PlanOptions,
): Plan {
  const report = reportOfRejection(rolloutId, calls, rejection.code, rejection.detail, options.line);
  return { report, rows: [], forest: [], trees: [], bins: [], agents, release() {} };
}

/**
 * Running out of linear memory (the core's abort at its page limit) or of JS heap (an allocation
 * V8 refuses, a stack overflow on a value too deep for the code reading it) means the rollout is
 * too large. Anything else — other RangeErrors (a caller's getter), a WebAssembly trap (every
 * module checks its growth, so a trap is a bug) — is not that: it propagates.
 */
export function isOutOfMemory(error: unknown): boolean {
  return (
    error instanceof CoreMemoryError ||
    (error instanceof RangeError &&
      /memory|allocat|invalid (typed )?array length|array buffer|string length|call stack/i.test(error.message))
  );
}

/** The rejection for a core that ran out of memory (see isOutOfMemory). */
export function tooLargeRejection(error: unknown): Rejection {
  return new Rejection("rollout_too_large", `the rollout does not fit in one core's memory (${errorLine(error)})`);
}

/** The trie's nodes as the packer sees them: a node's "full length" is where its run ends. */
function trieShape(trie: Trie): ForestShape {
  return { parents: trie.nodes.map((n) => n.parent), fullLengths: trie.nodes.map((n) => n.end) };
}

/** The first layer whose experts differ at token `at` (SPEC's route_mismatch `layer`). */
function firstDifferingLayer(near: RoutedExperts, call: RoutedExperts, at: number): number {
  const { layers, topk } = call;
  const width = layers * topk;
  for (let l = 0; l < layers; l++) {
    for (let k = 0; k < topk; k++) {
      const i = at * width + l * topk + k;
      if (near.data[i] !== call.data[i]) return l;
    }
  }
  return -1;
}

/** Token positions in the cores are 32-bit: a longer call cannot be planned (rollout_too_large). */
function checkCallSize(promptLength: number, generationLength: number): void {
  if (promptLength + generationLength > MAX_CALL_TOKENS) {
    throw new CoreMemoryError(
      `a call of ${promptLength + generationLength} tokens: a core holds at most 2^31-1 tokens a call`,
    );
  }
}

/** A layout of trie nodes (each segment's `call` a node) as the cores take it (see PackRequest). */
function packRequest(records: RecordLayout[], trie: Trie): PackRequest {
  const count = records.reduce((n, r) => n + r.segments.length, 0);
  const segments = new Int32Array(SEGMENT_INTS * count);
  const recordStarts = new Int32Array(records.length + 1);
  let s = 0;
  records.forEach((record, r) => {
    recordStarts[r] = s;
    for (const segment of record.segments) {
      const at = SEGMENT_INTS * s++;
      segments[at] = trie.nodes[segment.node].creator;
      segments[at + 1] = segment.from;
      segments[at + 2] = segment.length;
      segments[at + 3] = segment.trained ? 1 : 0;
    }
  });
  recordStarts[records.length] = s;
  return { segments, recordStarts, recordTokens: Int32Array.from(records, (r) => r.numTokens) };
}

/** What commitStaged found for one call: what the core's last*() would say after its commit. */
interface StagedFindings {
  mediaMismatch: boolean;
  broken: CoreBreak | null;
}

// (Shared: most calls have neither, and a small rollout's calls should not each allocate it.)
const NOTHING_FOUND: StagedFindings = { mediaMismatch: false, broken: null };
const MEDIA_MISMATCH_ONLY: StagedFindings = { mediaMismatch: true, broken: null };

/** A call's findings from its STAGED_RESULT_INTS at `results[at ...]` (see ForestCore.commitStaged). */
export function stagedFindings(results: Int32Array, at: number): StagedFindings {
  const { mediaMismatch, near, quotes } = STAGED_RESULT;
  const nearCall = results[at + near];
  const mismatch = results[at + mediaMismatch] !== 0;
  if (nearCall < 0) return mismatch ? MEDIA_MISMATCH_ONLY : NOTHING_FOUND;
  const expected = at + quotes;
  const found = expected + BREAK_QUOTE;
  return {
    mediaMismatch: mismatch,
    broken: {
      near: nearCall,
      at: results[at + STAGED_RESULT.at],
      expected: Array.from(results.subarray(expected, expected + results[at + STAGED_RESULT.expectedLength])),
      found: Array.from(results.subarray(found, found + results[at + STAGED_RESULT.foundLength])),
    },
  };
}

/**
 * Each listed agent's parent agent by index (-1: none), as a core's begin() takes them. Without a
 * list, agent names get indices on first sight and have no parent agent (cores read indices past
 * the table as "no parent").
 */
export function agentParents(header: RolloutHeader): Int32Array {
  const agents = header.agents ?? [];
  const parents = new Int32Array(agents.length);
  for (let i = 0; i < agents.length; i++) {
    const parent = agents[i].parent;
    parents[i] = parent === null ? -1 : header.agentIndex!.get(parent)!;
  }
  return parents;
}

export class RolloutAssembler {
  // Who each call is, in ledger order (plan() passes the call's shape, which holds the caller's
  // arrays: only ids, names and lengths are kept).
  private readonly calls: CallTable = {
    ids: [],
    agentNames: [],
    kept: [],
    promptLengths: [],
    generationLengths: [],
    eligible: [],
    media: [],
    mediaMismatch: [],
    routeMismatch: [],
    prefixBreaks: [],
    routedExperts: [],
    routeIds: [],
    weightVersions: [],
  };
  /** Numbers the rollout's distinct route blocks (SPEC v4), from the first call that gives some. */
  private routeIds: RouteIds | null = null;
  /** Made on the first call with media (most rollouts have none). */
  private mediaNumbers: MediaNumbers | null = null;
  /** Whether some call linked so far (or being linked) has media. */
  private linksMedia = false;
  /** The first call that gave routed experts with entries, and their shape (SPEC: L and K the same for all). */
  private expertShape: { call: string; layers: number; topk: number } | null = null;
  /** Whether the first eligible call gave routed experts (then all must). */
  private eligibleGiveExperts: { call: string; give: boolean } | null = null;
  /** Each eligible call's parent (eligible index, -1 for a root), as the core linked it. */
  private readonly parents: number[] = [];
  private readonly diagnostics: Diagnostic[] = [];
  private readonly seen = new Map<string, number>();
  private readonly agentIndex: Map<string, number>;
  private rejection: Rejection | null = null;
  private stagedPrompt = 0;
  private stagedGeneration = 0;
  private done = false;

  constructor(
    private readonly core: ForestCore,
    private readonly header: RolloutHeader,
    hints: SizeHints,
  ) {
    this.agentIndex = header.agentIndex ?? new Map();
    core.begin(agentParents(header), hints);
  }

  reject(rejection: Rejection): void {
    this.rejection ??= rejection;
  }

  /** True once the rollout is rejected (later calls change nothing). */
  get rejected(): boolean {
    return this.rejection !== null;
  }

  /** Where to write the next call's prompt ++ generation and logprobs (see StagedCall). */
  stage(promptLength: number, generationLength: number): StagedCall {
    checkCallSize(promptLength, generationLength);
    this.stagedPrompt = promptLength;
    this.stagedGeneration = generationLength;
    return this.core.stage(promptLength, generationLength);
  }

  /** Prompt tokens of the staged call. */
  get stagedPromptLength(): number {
    return this.stagedPrompt;
  }

  /** Generated tokens of the staged call. */
  get stagedGenerationLength(): number {
    return this.stagedGeneration;
  }

  /** Index of the first negative among the first `count` staged tokens (default all), or -1. */
  checkStagedTokens(count = this.stagedPrompt + this.stagedGeneration): number {
    return this.core.checkStagedTokens(count);
  }

  /** How messages name the call being added. */
  private where(id: string): string {
    return callName(id, this.calls.ids.length);
  }

  /** Checks the id and agent of the next call; returns its agent index, or null after rejecting. */
  identify(id: string, agent: string): number | null {
    const earlier = this.seen.get(id);
    if (earlier !== undefined) {
      this.reject(new Rejection("duplicate_call_id", `${this.where(id)}: id already used by calls[${earlier}]`));
      return null;
    }
    const known = this.agentIndex.get(agent);
    if (known !== undefined) return known;
    if (this.header.agents) {
      this.reject(new Rejection("unknown_agent", `${this.where(id)}: agent ${JSON.stringify(agent)} is not in agents`));
      return null;
    }
    this.agentIndex.set(agent, this.agentIndex.size);
    return this.agentIndex.size - 1;
  }

  /**
   * Checks the staged values and links the call (when kept with generated tokens). Returns false
   * once the rollout is rejected.
   */
  commit(call: CallIdentity, agentIndex: number, source?: ValueSource): boolean {
    if (this.rejection) return false;
    const routes = this.stageExtras(call);
    return this.record(
      call,
      source,
      this.core.commit(this.stagedPrompt, this.stagedGeneration, agentIndex, this.isEligible(call)),
      routes,
    );
  }

  /** Whether the core reads a call's typed arrays in place (commitArrays), with no staging. */
  get readsArrays(): boolean {
    return this.core.commitArrays !== undefined;
  }

  /** commit() for a call whose arrays the core reads in place (see readsArrays); no stage() before. */
  commitArrays(
    call: CallIdentity,
    agentIndex: number,
    arrays: { prompt: Int32Array; generation: Int32Array; logprobs: Float32Array },
  ): boolean {
    if (this.rejection) return false;
    checkCallSize(arrays.prompt.length, arrays.generation.length);
    this.stagedPrompt = arrays.prompt.length;
    this.stagedGeneration = arrays.generation.length;
    const routes = this.stageExtras(call);
    return this.record(
      call,
      arrays,
      this.core.commitArrays!(arrays.prompt, arrays.generation, arrays.logprobs, agentIndex, this.isEligible(call)),
      routes,
    );
  }

  /** Whether the core can stage many calls at once (stageCalls) and link them in one go. */
  get stagesMany(): boolean {
    return this.core.stageCalls !== undefined;
  }

  /**
   * Whether calls without media, routes or versions may be committed many at once: not once an
   * eligible call gave routed experts (then each later one must too, a check made call by call).
   */
  get takesPlainCalls(): boolean {
    return this.eligibleGiveExperts?.give !== true;
  }

  /** The agent index of `agent`, as identify() gives it, or null (not listed) without rejecting. */
  agentFor(agent: string): number | null {
    const known = this.agentIndex.get(agent);
    if (known !== undefined) return known;
    if (this.header.agents) return null;
    this.agentIndex.set(agent, this.agentIndex.size);
    return this.agentIndex.size - 1;
  }

  /** Room for `count` calls staged at once (see ForestCore.stageCalls). */
  stageCalls(count: number, tokens: number, logprobs: number): StagedCalls {
    return this.core.stageCalls!(count, tokens, logprobs);
  }

  /** Links the calls staged by stageCalls (see ForestCore.commitStaged). */
  commitStaged(count: number): { failed: number; results: Int32Array } {
    return this.core.commitStaged!(count);
  }

  /**
   * Records a call that commitStaged linked (or did not link: not eligible), from its result at
   * `results[at ...]`. Returns false, recording nothing, when an earlier call has its id: the
   * caller plans the rollout again call by call, which rejects it at the right call. Like every
   * method here, it reads `call` and keeps none of it (a caller may reuse the object).
   */
  recordStaged(
    call: CallIdentity,
    promptLength: number,
    generationLength: number,
    results: Int32Array,
    at: number,
  ): boolean {
    if (this.seen.has(call.id)) return false;
    this.stagedPrompt = promptLength;
    this.stagedGeneration = generationLength;
    return this.record(call, undefined, results[at + STAGED_RESULT.code], null, stagedFindings(results, at));
  }

  /**
   * SPEC's invalid_routed_experts across calls, for the next call (`eligible`: kept, with generated
   * tokens): every call's L and K the same, and the eligible calls all giving them or none. Null when
   * they agree (readExtras reports it).
   */
  private expertsProblem(experts: RoutedExperts | null, eligible: boolean): string | null {
    const shape = this.expertShape;
    // (L and K each, not their product; an array with no entries states neither.)
    if (
      experts !== null &&
      experts.tokens > 0 &&
      shape !== null &&
      (experts.layers !== shape.layers || experts.topk !== shape.topk)
    ) {
      return (
        `routed_experts has ${experts.layers}x${experts.topk} per token, ` +
        `where ${shape.call} has ${shape.layers}x${shape.topk}`
      );
    }
    const first = this.eligibleGiveExperts;
    if (eligible && first !== null && (experts !== null) !== first.give) {
      const earlier = JSON.stringify(first.call);
      return experts !== null
        ? `it gives routed_experts, but the eligible call ${earlier} before it does not`
        : `it gives no routed_experts, but the eligible call ${earlier} before it does`;
    }
    return null;
  }

  /**
   * A call's media and routed experts, read and checked. `problem` is the first in SPEC's order
   * (its experts, then experts across calls, then its media); the caller rejects with it after the
   * call's values (rejectAfterValues).
   */
  readExtras(
    mediaValue: unknown,
    expertsValue: unknown,
    versionValue: unknown,
    kept: boolean,
    promptLength: number,
    generationLength: number,
  ): {
    problem: CallProblem | null;
    media: MediaItem[] | null;
    routedExperts: RoutedExperts | null;
    weightVersion: WeightVersion | null;
  } {
    const experts = readRoutedExperts(expertsValue, promptLength + generationLength);
    const version = readWeightVersion(versionValue, generationLength);
    const media = readMedia(mediaValue, promptLength);
    const eligible = kept && generationLength > 0;
    const across = typeof experts === "string" ? null : this.expertsProblem(experts, eligible);
    const problem: CallProblem | null =
      typeof experts === "string"
        ? { code: "invalid_routed_experts", detail: experts }
        : across !== null
          ? { code: "invalid_routed_experts", detail: across }
          : typeof version === "string"
            ? { code: "invalid_weight_version", detail: version }
            : typeof media === "string"
              ? { code: "invalid_media", detail: media }
              : null;
    return {
      problem,
      media: typeof media === "string" ? null : media,
      routedExperts: typeof experts === "string" ? null : experts,
      weightVersion: typeof version === "string" ? null : version,
    };
  }

  /** Remembers what a recorded call's experts require of the later ones (see expertsProblem). */
  private noteExperts(call: CallIdentity, eligible: boolean): void {
    const experts = call.routedExperts ?? null;
    if (experts !== null && experts.tokens > 0 && this.expertShape === null)
      this.expertShape = { call: JSON.stringify(call.id), layers: experts.layers, topk: experts.topk };
    if (eligible && this.eligibleGiveExperts === null)
      this.eligibleGiveExperts = { call: call.id, give: experts !== null };
  }

  /**
   * Hands the core the media and route ids of a call it will link (the others' play no part in
   * linking); returns the route ids (null: none).
   */
  private stageExtras(call: CallIdentity): Int32Array | null {
    if (!this.isEligible(call)) return null;
    if (call.media) {
      this.linksMedia = true;
      this.mediaNumbers ??= new MediaNumbers();
      this.core.stageMedia(this.mediaNumbers.triples(call.media));
    }
    const experts = call.routedExperts;
    if (!experts) return null;
    // A call's last token has no route of its own (SPEC v4): ids for the others.
    const tokens = this.stagedPrompt + this.stagedGeneration - 1;
    if (tokens > 0) this.routeIds ??= new RouteIds(experts.layers * experts.topk);
    const ids = tokens > 0 ? this.routeIds!.ids(experts, tokens) : new Int32Array(0);
    this.core.stageRoutes(ids);
    return ids;
  }

  /**
   * Rejects the staged call with `code` for `problem` (its media or routed experts) — unless one of
   * its staged values is bad, which SPEC's order puts first (the cores would find those at commit).
   */
  rejectAfterValues(id: string, code: RejectionCode, problem: string): void {
    const tokenAt = this.checkStagedTokens();
    const staged = this.core.staged();
    if (tokenAt >= 0)
      return this.reject(invalidToken(this.where(id), tokenAt, this.stagedPrompt, staged.tokens[tokenAt]));
    for (let i = 0; i < this.stagedGeneration; i++) {
      if (!Number.isFinite(staged.logprobs[i]))
        return this.reject(invalidLogprob(this.where(id), i, staged.logprobs[i]));
    }
    this.reject(new Rejection(code, `${this.where(id)}: ${problem}`));
  }

  /** SPEC's eligible call: kept, with generated tokens (the call being committed). */
  private isEligible(call: CallIdentity): boolean {
    return call.kept && this.stagedGeneration > 0;
  }

  /** Records a committed call, or rejects the rollout for what the core's `result` says. */
  private record(
    call: CallIdentity,
    source: ValueSource | undefined,
    result: number,
    routes: Int32Array | null,
    /** What the core found for the call when it was committed with others (commitStaged). */
    staged?: StagedFindings,
  ): boolean {
    const { id, kept } = call;
    const promptLength = this.stagedPrompt;
    const generationLength = this.stagedGeneration;
    if (result === INVALID_TOKEN) {
      const index = this.core.lastBadIndex();
      const value = !source
        ? this.core.staged().tokens[index]
        : index < promptLength
          ? source.prompt[index]
          : source.generation[index - promptLength];
      this.reject(invalidToken(this.where(id), index, promptLength, value));
      return false;
    }
    if (result === INVALID_LOGPROB) {
      const index = this.core.lastBadIndex();
      this.reject(
        invalidLogprob(this.where(id), index, source ? source.logprobs[index] : this.core.staged().logprobs[index]),
      );
      return false;
    }
    if (result === AMBIGUOUS_PARENT) {
      const tied = this.core
        .ambiguousCandidates()
        .sort((a, b) => a - b)
        .map((e) => JSON.stringify(this.calls.ids[this.calls.eligible[e]])); // in ledger order
      this.reject(
        new Rejection(
          "ambiguous_parent",
          `${this.where(id)}: earlier calls ${tied.join(" and ")} have identical full sequences, ` +
            `and neither its agent nor its parent agent singles one out`,
        ),
      );
      return false;
    }
    const calls = this.calls;
    const eligible = this.isEligible(call);
    // (Only a rollout that links media can mismatch: the others ask the core nothing.)
    const mediaMismatch =
      eligible && this.linksMedia && (staged ? staged.mediaMismatch : this.core.lastMediaMismatch());
    this.seen.set(id, calls.ids.length);
    if (eligible) {
      calls.eligible.push(calls.ids.length);
      this.parents.push(result);
    }
    if (kept && generationLength === 0) this.diagnostics.push({ code: "empty_generation", call: id });
    if (mediaMismatch) this.diagnostics.push({ code: "media_mismatch", call: id });
    const routeMismatch = eligible && routes !== null ? this.core.lastRouteMismatch() : null;
    if (routeMismatch !== null) {
      const near = calls.eligible[routeMismatch.near];
      const layer = firstDifferingLayer(calls.routedExperts[near]!, call.routedExperts!, routeMismatch.at);
      const { at } = routeMismatch;
      this.diagnostics.push({ code: "route_mismatch", call: id, near: calls.ids[near], at, layer });
    }
    const broken = !eligible ? null : staged ? staged.broken : this.core.lastPrefixBreak();
    if (broken !== null) {
      const { near, at, expected, found } = broken;
      const nearId = calls.ids[calls.eligible[near]];
      this.diagnostics.push({ code: "prefix_break", call: id, near: nearId, at, expected, found });
      calls.prefixBreaks.push({ near: nearId, at });
    } else {
      calls.prefixBreaks.push(null);
    }
    this.noteExperts(call, eligible);
    calls.media.push(call.media ?? null);
    calls.routedExperts.push(eligible ? (call.routedExperts ?? null) : null);
    calls.routeIds.push(eligible ? routes : null);
    calls.weightVersions.push(eligible ? (call.weightVersion ?? null) : null);
    calls.mediaMismatch.push(mediaMismatch);
    calls.routeMismatch.push(routeMismatch !== null);
    calls.ids.push(id);
    calls.agentNames.push(call.agent);
    calls.kept.push(kept);
    calls.promptLengths.push(promptLength);
    calls.generationLengths.push(generationLength);
    return true;
  }

  /**
   * The plan: rows and report, or the first rejection. Ends the assembler. `arraysOnly`: rows
   * carry their arrays and nothing else (see makePlan).
   */
  finish(totalCalls: number, options: PlanOptions, arraysOnly = false): Plan {
    if (this.done) throw new Error("this rollout was already finished");
    this.done = true;
    const agents = this.header.agents ?? [];
    if (!this.rejection && this.calls.eligible.length === 0) {
      const detail =
        totalCalls === 0
          ? "the rollout lists no calls"
          : totalCalls === 1
            ? "its one call is not kept with generated tokens"
            : `none of the ${totalCalls} calls is kept with generated tokens`;
      this.rejection = new Rejection("no_trainable_calls", detail);
    }
    // Only packing reads the forest's shape.
    const shape = options.trees || options.capacity !== undefined ? this.forestShape() : null;
    if (!this.rejection && shape !== null && options.capacity !== undefined)
      this.rejection = this.capacityProblem(shape, options.capacity);
    if (this.rejection) {
      this.core.release();
      // The diagnostics read so far are dropped: a prefix_break of a rollout that yields no rows
      // would be announced by rows and not explained by explain.
      return planOfRejection(this.header.rolloutId, totalCalls, this.rejection, agents, options);
    }
    const report = emptyReport(this.header.rolloutId, totalCalls, options.line);
    report.diagnostics = this.diagnostics;
    // A header of its own: the caller's (this.header) holds the calls and their arrays.
    const { rolloutId, reward, groupId } = this.header;
    const trie = shape !== null ? this.buildTrie(shape) : null;
    const nodes = trie !== null ? trieShape(trie) : null;
    const layouts = {
      trie,
      trees: nodes !== null && options.trees ? layOutTrees(nodes) : null,
      bins: nodes !== null && options.capacity !== undefined ? layOutBins(nodes, options.capacity) : null,
    };
    const requests = [layouts.trees, layouts.bins]
      .filter((l): l is RecordLayout[] => l !== null)
      .map((records) => packRequest(records, trie!));
    const header = { rolloutId, reward, groupId, agents };
    return makePlan(this.calls, this.core.finish(requests), header, report, this.core, layouts, arraysOnly);
  }

  /** SPEC v4's token trie over the eligible calls (for packed trees and bins). */
  private buildTrie(shape: ForestShape): Trie {
    const { eligible, promptLengths, media, routeIds } = this.calls;
    // (Every eligible call gives routes or none does: a rollout that mixes them was rejected.)
    const routes = eligible.some((i) => routeIds[i] !== null) ? eligible.map((i) => routeIds[i]) : null;
    return buildTrie({
      promptLengths: eligible.map((i) => promptLengths[i]),
      fullLengths: shape.fullLengths,
      parents: shape.parents,
      media: eligible.map((i) => media[i]),
      routes,
      tokens: (call) => this.core.fullTokens(call),
    });
  }

  /** The linked forest as the packer sees it (eligible calls, in ledger order). */
  private forestShape(): ForestShape {
    const { eligible, promptLengths, generationLengths } = this.calls;
    return { parents: this.parents, fullLengths: eligible.map((i) => promptLengths[i] + generationLengths[i]) };
  }

  /** SPEC's row_exceeds_capacity: a leaf longer than the bins' capacity, or null. */
  private capacityProblem(shape: ForestShape, capacity: number): Rejection | null {
    const leaf = leafPastCapacity(shape, capacity);
    if (leaf < 0) return null;
    const index = this.calls.eligible[leaf];
    return new Rejection(
      "row_exceeds_capacity",
      `leaf ${callName(this.calls.ids[index], index)} holds ${shape.fullLengths[leaf]} tokens, ` +
        `more than the capacity of ${capacity}`,
    );
  }

  /** Gives the core back after a failure (it is not reused). */
  abandon(): void {
    this.done = true;
    this.core.release(false);
  }
}
