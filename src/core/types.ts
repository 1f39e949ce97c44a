// The contract between the planner (src/plan/plan-rollout.ts) and a forest core. Two cores implement it
// with identical results: the WebAssembly one (wasm-core.ts) and the pure TypeScript one
// (ts-core.ts). The planner validates metadata; a core checks token values, links, and builds rows.

/**
 * commit() results below -1; a result >= -1 is the parent's eligible index (-1: a root). The
 * WebAssembly core declares them in assembly/codes.ts and exports them; test/core/checks.test.ts
 * fails when the two disagree.
 */
export const AMBIGUOUS_PARENT = -2;
export const INVALID_TOKEN = -3;
export const INVALID_LOGPROB = -4;
export const NOT_LINKED = -5;

/**
 * The most working memory an instance kept from one use to the next may hold. A WebAssembly
 * memory never shrinks, so after one huge rollout the instance (a released core, the TS core's
 * arrays, the CLI's line scanner) is left to the GC rather than held, gigabytes strong, for the
 * small rollouts that follow; the next huge one grows a fresh one, a small cost beside reading it.
 */
export const KEPT_MEMORY_MAX_BYTES = 256 * 2 ** 20;

/** Released cores (TsCorePool) or instances (WasmCorePool) kept idle for the next plan. */
export const MAX_IDLE_CORES = 2;

/**
 * All a wasm32 linear memory can address: the most a core may hold (init's maxMemory at most; the
 * TS core keeps to it too) and the most a line scanner can.
 */
export const WASM_MEMORY_MAX_BYTES = 2 ** 32;

/** Token positions are i32 in the cores: the most tokens one call (prompt ++ generation) may hold. */
export const MAX_CALL_TOKENS = 2 ** 31 - 1;

/**
 * Where the planner writes one call's arrays. Valid until the next stage()/commit(). The arrays
 * may be longer than asked for (cores reuse them from call to call); only the first P + G tokens
 * and G logprobs count.
 */
export interface StagedCall {
  /** prompt ++ generation: prompt at [0, P), generation at [P, P + G). */
  tokens: Int32Array;
  /** The generation's logprobs. */
  logprobs: Float32Array;
}

/**
 * Many calls staged at once (ForestCore.stageCalls): `table` holds STAGED_CALL_INTS a call (prompt
 * length, generated tokens, agent, link 0/1); each call's prompt ++ generation follow one another
 * in `tokens`, and its logprobs in `logprobs`. Valid until the next call into the core.
 */
export interface StagedCalls {
  table: Int32Array;
  tokens: Int32Array;
  logprobs: Float32Array;
}

/** Tokens a prefix_break quotes on each side (SPEC: "up to 8 tokens each"). */
export const BREAK_QUOTE = 8;

/** Ints a call takes in StagedCalls.table (assembly/batch.ts B_CALL). */
export const STAGED_CALL_INTS = 4;
/**
 * Ints a call's result takes after commitStaged (assembly/batch.ts B_RESULT): commit's result,
 * media_mismatch (0/1), the prefix break's near call (-1: none), at, the quotes' lengths
 * (expected, found), then BREAK_QUOTE (8) ints of each quote.
 */
export const STAGED_RESULT_INTS = 6 + 2 * BREAK_QUOTE;
/** Where each field of a call's result lies in its STAGED_RESULT_INTS (assembly/batch.ts B_*). */
export const STAGED_RESULT = {
  code: 0,
  mediaMismatch: 1,
  near: 2,
  at: 3,
  expectedLength: 4,
  foundLength: 5,
  quotes: 6,
} as const;

/** SPEC's prefix_break for a call, as a core finds it: `near` is an eligible index. */
export interface CoreBreak {
  near: number;
  at: number;
  /** full(near)[at : at+8]. */
  expected: number[];
  /** prompt(call)[at : at+8]. */
  found: number[];
}

/** SPEC v4's route_mismatch for a call, as a core finds it: `near` is an eligible index. */
export interface CoreRouteMismatch {
  near: number;
  /** The first token where the two calls' route ids differ. */
  at: number;
}

export interface CoreRow {
  /** Eligible index of the leaf. */
  leaf: number;
  /** The path (eligible indices, root first) is paths[pathStart, pathStart + pathLength). */
  pathStart: number;
  pathLength: number;
  tokenIds: Int32Array;
  logprobs: Float32Array;
  lossMask: Uint8Array;
}

/** Ints a segment takes in PackRequest.segments. */
export const SEGMENT_INTS = 4;

/**
 * Packed records to fill at finish() (src/plan/packing.ts lays them out): record r holds segments
 * [recordStarts[r], recordStarts[r + 1]); segment s is the quadruple at SEGMENT_INTS × s of
 * `segments`: eligible call, `from` and `length` (it holds full(call)[from : from + length]),
 * trained (1: its generated tokens get mask 1) or not (0).
 */
export interface PackRequest {
  segments: Int32Array;
  recordStarts: Int32Array;
  /** Each record's tokens (the sum of its segments' lengths). */
  recordTokens: Int32Array;
}

/** One packed record's arrays (views valid until release(), as rows' are). */
export interface CorePacked {
  tokenIds: Int32Array;
  positionIds: Int32Array;
  logprobs: Float32Array;
  lossMask: Uint8Array;
}

export interface CoreForest {
  /** Parent's eligible index for each eligible call, -1 for roots. */
  parents: ArrayLike<number>;
  /** Row that trains each eligible call. */
  ownerRows: ArrayLike<number>;
  /** Where the rows' paths are (see CoreRow); read only while the plan is built. */
  paths: ArrayLike<number>;
  rows: CoreRow[];
  /** For each PackRequest given to finish(), its records' arrays. */
  packed: CorePacked[][];
}

/** What a core may reserve up front (0 = unknown). Hints, not limits: the data decides. */
export interface SizeHints {
  calls: number;
  /** Generated tokens of all calls. */
  generated: number;
  /** The longest call's prompt + generation. */
  longestCall: number;
  /** The same over the calls that will be linked (kept, with generated tokens); 0 when unknown. */
  longestLinked?: number;
}

export interface ForestCore {
  /**
   * The fewest bytes this core needs for a rollout of these sizes (what any plan of it must hold
   * at once), to refuse one that cannot fit before copying gigabytes into it; and its limit.
   */
  minimumBytes(hints: SizeHints): number;
  readonly memoryLimit: number;
  /**
   * Starts a plan. `agentParents[a]` is the parent agent of agent a (-1: none; agents past the
   * end of the table have none); hints size the core's memory up front.
   */
  begin(agentParents: Int32Array, hints: SizeHints): void;
  stage(prompt: number, generated: number): StagedCall;
  /** The staged call's arrays as they are now (linking may have grown memory since stage()). */
  staged(): StagedCall;
  /** Index of the first staged token outside [0, 2^31-1] among the first `count`, or -1. */
  checkStagedTokens(count: number): number;
  /**
   * The media of the call about to be committed, as (item, offset, length) triples, `item` the
   * rollout's number for the media id (equal ids, equal numbers). Applies to the next commit()
   * or commitArrays() only; a call committed without it has no media.
   */
  stageMedia(triples: Int32Array): void;
  /** After a commit that linked: whether SPEC's media_mismatch holds for the call. */
  lastMediaMismatch(): boolean;
  /**
   * The route ids (src/plan/route-ids.ts) of the call about to be committed, one per token but its
   * last (SPEC v4: that one's route is none). Applies to the next commit() or commitArrays() only;
   * a call committed without it gives no routes.
   */
  stageRoutes(ids: Int32Array): void;
  /** After a commit that linked: SPEC v4's route_mismatch for the call, or null when it has none. */
  lastRouteMismatch(): CoreRouteMismatch | null;
  /** A copy of full(call) of eligible call `call` (after its commit; before finish()). */
  fullTokens(call: number): Int32Array;
  /** After a commit that linked: SPEC's prefix_break for the call, or null when it has none. */
  lastPrefixBreak(): CoreBreak | null;
  /** Checks the staged call; links it as the next eligible call when `link`. See the codes above. */
  commit(prompt: number, generated: number, agent: number, link: boolean): number;
  /**
   * Optional (the TS core has it): commit() for a call read straight from the caller's arrays,
   * with no staging copy — a WebAssembly core cannot read them, a JS one can. Same results as
   * stage(), copying the arrays in, and commit(). `logprobs` holds exactly one per generated token.
   */
  commitArrays?(
    prompt: Int32Array,
    generation: Int32Array,
    logprobs: Float32Array,
    agent: number,
    link: boolean,
  ): number;
  /**
   * Optional (the WebAssembly core has it): room to stage `count` calls at once, holding `tokens`
   * tokens and `logprobs` logprobs in all, for commitStaged(). Calls with media or routes go one
   * at a time (stage() and commit()).
   */
  stageCalls?(count: number, tokens: number, logprobs: number): StagedCalls;
  /**
   * Commits the staged calls in order, each as commit() would. `failed` is -1 when all went
   * through, else the first call that failed (the ones after it are not committed; lastBadIndex()
   * and ambiguousCandidates() are its). `results` holds STAGED_RESULT_INTS a committed call, valid
   * until the next call into the core.
   */
  commitStaged?(count: number): { failed: number; results: Int32Array };
  /** After INVALID_TOKEN / INVALID_LOGPROB: index into the staged tokens (prompt ++ generation) / logprobs. */
  lastBadIndex(): number;
  /** After AMBIGUOUS_PARENT: two of the tied candidates (eligible indices). */
  ambiguousCandidates(): [number, number];
  /** Builds the rows, and the packed records asked for. Their arrays stay valid until release(). */
  finish(packs?: readonly PackRequest[]): CoreForest;
  /**
   * Gives the core's memory back; the rows' arrays must not be used afterwards. `reusable`
   * false (after a failure) drops the core instead of recycling it.
   */
  release(reusable?: boolean): void;
}

/** Makes a fresh or recycled core for one plan. */
export type CoreFactory = () => ForestCore;
