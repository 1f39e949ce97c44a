// Public types of callforest. SPEC.md (shared with the project) is the source of truth for
// every field and rule named here.

/** Token IDs as a caller may hold them: a plain array, or an Int32Array. */
export type TokenIds = readonly number[] | Int32Array;
/** Logprobs as a caller may hold them: a plain array, or a Float32Array/Float64Array. */
export type Logprobs = readonly number[] | Float32Array | Float64Array;

/** One model call of SPEC's canonical rollout. */
export interface CanonicalCall {
  id: string;
  /** Agent id; defaults to "". When the rollout lists `agents`, it must name one of them. */
  agent?: string;
  prompt_token_ids: TokenIds;
  generation_token_ids: TokenIds;
  generation_log_probs: Logprobs;
  /** `false` marks a try that no agent kept (a retry): ignored entirely. Default true. */
  kept?: boolean;
  /** The media whose placeholder tokens stand in the prompt (SPEC "Input"); none when absent or null. */
  media?: readonly MediaItem[] | null;
  /**
   * MoE router choices for the tokens of prompt ++ generation (at least all but the last: vLLM's
   * `S = len(full) - 1`): an `nrlre1:` envelope or [S][L][K] lists; an all -1 entry is not routed.
   */
  routed_experts?: string | readonly (readonly (readonly number[])[])[] | null;
  /** The policy version that sampled the generation: one, or one per generated token (SPEC v4). */
  weight_version?: number | readonly number[] | null;
}

/**
 * MoE routed experts (SPEC `calls[].routed_experts`): `tokens` × `layers` × `topk` expert ids in C
 * order — token t's at [t·L·K, (t+1)·L·K). Written as SPEC's envelope (`nrlre1:int16:…`).
 */
export interface RoutedExperts {
  tokens: number;
  layers: number;
  topk: number;
  data: Int8Array | Int16Array | Int32Array;
}

/**
 * One media occurrence (SPEC `calls[].media`): item `id` (a content digest: equal content, equal
 * id) stands in `prompt_token_ids[offset : offset + length]`.
 */
export interface MediaItem {
  id: string;
  offset: number;
  length: number;
}

export interface AgentInfo {
  id: string;
  parent: string | null;
  /** Free text: leader, fresh, fork, background, ... */
  mode?: string;
}

/** An agent as a rollout lists it: a missing parent means none (plans give `parent: null`). */
export type AgentInput = Omit<AgentInfo, "parent"> & { parent?: string | null };

/** SPEC's canonical rollout. Unknown fields are ignored. */
export interface Rollout {
  rollout_id: string;
  reward: number;
  /** The rollouts sampled for one task (for group baselines); every row and record carries it. */
  group_id?: string | null;
  agents?: AgentInput[];
  calls: CanonicalCall[];
}

export type RejectionCode =
  | "malformed_json"
  | "invalid_rollout"
  | "duplicate_call_id"
  | "unknown_agent"
  | "invalid_token"
  | "logprob_length_mismatch"
  | "invalid_logprob"
  | "invalid_routed_experts"
  | "invalid_weight_version"
  | "invalid_media"
  | "ambiguous_parent"
  | "no_trainable_calls"
  | "row_exceeds_capacity"
  | "rollout_too_large";

/** A note about a call that does not reject the rollout (e.g. `empty_generation`). */
export interface Diagnostic {
  code: string;
  call: string | null;
  detail?: string;
  /** prefix_break: the near parent's id (SPEC "Prefix breaks"). */
  near?: string;
  /** prefix_break: where the call's prompt parts from the near parent's full sequence. */
  at?: number;
  /** route_mismatch: the first layer whose experts differ at `at`. */
  layer?: number;
  /** prefix_break: full(near)[at : at+8]. */
  expected?: number[];
  /** prefix_break: prompt(call)[at : at+8]. */
  found?: number[];
}

/**
 * SPEC's prefix_break: the call resent all of `near`'s prompt (and more than its own parent's
 * sequence), then parted from `near` inside `near`'s generation, at token index `at`.
 */
export interface PrefixBreak extends Diagnostic {
  code: "prefix_break";
  call: string;
  near: string;
  at: number;
  expected: number[];
  found: number[];
}

/**
 * SPEC's route_mismatch: tokens and media alone would have linked the call to a call as long as
 * `near`, but their routers chose other experts at token `at`, first in layer `layer`.
 */
export interface RouteMismatch extends Diagnostic {
  code: "route_mismatch";
  call: string;
  near: string;
  at: number;
  layer: number;
}

/** SPEC's report: one per input rollout. */
export interface Report {
  rollout_id: string | null;
  status: "ok" | "rejected";
  reason?: RejectionCode;
  detail?: string;
  /** 1-based input line, when the rollout came from a file. */
  line?: number;
  calls: number;
  eligible: number;
  roots: number;
  leaves: number;
  rows: number;
  captured_tokens: number;
  trained_tokens: number;
  row_tokens: number;
  unique_tokens: number;
  /** Only when packed trees or bins were asked for: the sum of the packed trees' num_tokens. */
  trie_tokens?: number;
  /** Only when bins were asked for: the sum of the bins' num_tokens. */
  packed_tokens?: number;
  diagnostics: Diagnostic[];
}

/** One training row: a leaf's full sequence with logprobs and a loss mask. */
export interface Row {
  /** 0-based row number within the rollout (rows are in the ledger order of their leaves). */
  index: number;
  rolloutId: string;
  leaf: string;
  /** The leaf's agent. */
  agent: string;
  /** Call ids of the path, root first. */
  calls: string[];
  /** Calls of the path that this row trains (loss mask 1 on their generated spans). */
  trained: string[];
  /** Calls of the path that are context only. */
  context: string[];
  reward: number;
  /** The rollout's group_id, null when it names none. */
  groupId: string | null;
  numTokens: number;
  /**
   * full(leaf). A view over memory the backend's core reuses (linear memory on WASM), valid until
   * `plan.release()`; copy it (`slice()`) to keep it longer.
   */
  tokenIds: Int32Array;
  /** Per-token logprob: the generating call's logprob on generated spans, 0 elsewhere. */
  logprobs: Float32Array;
  /** Bitset, SPEC's bit order: bit i is bit (i % 8) of byte (i >> 3). */
  lossMask: Uint8Array;
  /** The leaf's media occurrences; their offsets index tokenIds. Empty when none. */
  media: MediaItem[];
  /**
   * Only when the rollout gives them: entry i is the route of token i as the row's path knows it
   * (the leaf's own), all -1 on the last token (int16 or int32).
   */
  routedExperts?: RoutedExperts;
  /**
   * Only when some call gives weight_version: per token, the version that sampled it on the
   * generated spans of the path's calls, -1 elsewhere.
   */
  weightVersions?: Int32Array;
}

/**
 * One segment of a packed record (SPEC "Packed trees"): a node of the rollout's token trie, tokens
 * of its creator `call`'s full sequence (a call may have several segments).
 */
export interface PackedSegment {
  call: string;
  /** Index of the parent's segment in this record; -1 for a tree's (or a piece's) root. */
  parent: number;
  /** The segment holds packed tokens [start, start + length). */
  start: number;
  length: number;
  /** Packed index just past the segment's whole subtree (the attention rule's bound). */
  end: number;
}

/** A segment of a bin: also which tree it is from and whether this bin trains its call. */
export interface BinSegment extends PackedSegment {
  tree: number;
  trained: boolean;
}

/** The arrays every packed record has (views valid until `plan.release()`, as rows' are). */
interface PackedArrays {
  rolloutId: string;
  /** The forest's roots whose calls the record holds, in ledger order. */
  roots: string[];
  /** The calls that created its segments, in the pre-order of their first segment. */
  calls: string[];
  reward: number;
  /** The rollout's group_id, null when it names none. */
  groupId: string | null;
  numTokens: number;
  tokenIds: Int32Array;
  /** Each token's position in the full sequence of its segment's creator. */
  positionIds: Int32Array;
  /** The creator's generation logprobs on a segment's generated tokens, 0 elsewhere. */
  logprobs: Float32Array;
  /** Bitset, SPEC's bit order: 1 on the generated tokens of the calls this record trains. */
  lossMask: Uint8Array;
  /** The record's media occurrences, each once, offsets packed indices. */
  media: MediaItem[];
  /** Only when the rollout gives them: each packed token's resolved route, all -1 where none. */
  routedExperts?: RoutedExperts;
  /** Only when some call gives weight_version: the version of each generated token, -1 elsewhere. */
  weightVersions?: Int32Array;
}

/** One tree of the rollout's token trie, every exactly shared prefix once (SPEC "Packed trees"). */
export interface PackedTree extends PackedArrays {
  /** 0-based, in the ledger order of the trie roots' creators. */
  index: number;
  segments: PackedSegment[];
}

/** Packed pieces of trees that fit a capacity (SPEC "Bins"). */
export interface PackedBin extends PackedArrays {
  index: number;
  segments: BinSegment[];
}

/** What the planner learned about one call of the rollout (all calls, in ledger order). */
export interface ForestCall {
  id: string;
  agent: string;
  /** Position in the rollout's call list (ledger order). */
  index: number;
  kept: boolean;
  eligible: boolean;
  promptLength: number;
  generationLength: number;
  /** Id of the parent call, null for roots and for calls that are not eligible. */
  parent: string | null;
  /** Ids of the eligible calls that name this call as parent, in ledger order. */
  children: string[];
  root: boolean;
  leaf: boolean;
  /** Row number of the row that trains this call; -1 when not eligible. */
  ownerRow: number;
  /** The call's media occurrences (in its prompt), as given. */
  media: MediaItem[];
  /**
   * True when tokens alone would have linked this call elsewhere: no earlier call of the longest
   * token-prefix length agrees on media (SPEC's `media_mismatch`). Such a call is a root, or
   * continues a shorter call that still had the same media.
   */
  mediaMismatch: boolean;
  /**
   * True when tokens and media alone would have linked this call to a call as long as its best
   * such candidate, but their routes disagreed (SPEC v4's `route_mismatch`).
   */
  routeMismatch: boolean;
  /**
   * The near parent's id when the call has a prefix break (SPEC's `prefix_break`: it resent all
   * of that call's prompt, then parted from it inside its generation); null when none.
   */
  nearParent: string | null;
  /** Where the call's prompt parts from its near parent's full sequence; null when none. */
  breakAt: number | null;
}

/**
 * A planned rollout. `forest` is computed on first access (a getter on the class), so copy the
 * fields you need rather than spreading the object.
 */
export interface Plan {
  report: Report;
  /** Empty when the rollout was rejected. */
  rows: Row[];
  /** Every call in ledger order; empty when the rollout was rejected. */
  forest: ForestCall[];
  /** One packed record per tree, when asked for (`{ trees: true }`); else empty. */
  trees: PackedTree[];
  /** Bins of at most `capacity` tokens, when asked for (`{ capacity }`); else empty. */
  bins: PackedBin[];
  /** The rollout's agents as given (empty when it lists none). */
  agents: AgentInfo[];
  /** Frees the plan's memory. Row arrays must not be used afterwards. Idempotent. */
  release(): void;
}

export type BackendName = "wasm" | "ts";

export interface InitOptions {
  /** "wasm" (default) or "ts" (pure TypeScript, same results). */
  backend?: BackendName;
  /** WASM only: force the SIMD (true) or scalar (false) build; default: SIMD when supported. */
  simd?: boolean;
  /**
   * The most memory one plan's core may hold, in bytes (default and ceiling 4 GiB): on WASM its
   * instance's linear memory, on TS its arrays. A rollout that needs more is rejected with
   * `rollout_too_large`. Memory grows by doubling, so the cap is reached a little before the
   * rollout's exact need; the two backends lay memory out differently, so near the cap one may
   * take a rollout the other rejects.
   */
  maxMemory?: number;
}

export interface PlanOptions {
  /** Input line number to put in the report. */
  line?: number;
  /** Also lay the forest out as packed trees (`plan.trees`). */
  trees?: boolean;
  /**
   * Also lay it out as bins of at most this many tokens (`plan.bins`, `report.packed_tokens`); a
   * leaf longer than that rejects the rollout (`row_exceeds_capacity`).
   */
  capacity?: number;
}

/**
 * What init() resolves to. (Declared here, with the data types, so the package's type
 * declarations need no WebAssembly types: a Node project without the DOM lib checks them too.)
 */
export interface Callforest {
  readonly backend: BackendName;
  /** True when the WASM backend runs its SIMD build. */
  readonly simd: boolean;
  /** Plans one canonical rollout (SPEC). Bad input gives a rejected report, never an exception. */
  plan(rollout: unknown, options?: PlanOptions): Plan;
  /**
   * Assembles a rollout in place: stage() hands out views to write a call's arrays into (linear
   * memory on the WASM backend), commit() links it, finish() gives the Plan.
   */
  builder(header: BuilderHeader, options?: { callsHint?: number }): RolloutBuilder;
  /**
   * Plans many rollouts given as flat typed arrays, each exactly as plan() would; the rows come
   * back in flat buffers, valid until the result's release(). Bad input in one rollout rejects that
   * rollout only; a batch whose arrays do not fit together throws.
   */
  planBatch(batch: RolloutBatch): BatchPlan;
}

// planBatch: many rollouts in flat arrays, their rows in flat buffers.

/**
 * Rollouts as flat arrays (Callforest.planBatch): calls carry tokens only (no media, routed
 * experts or weight versions: plan() or the builder take those). Call c (counted over the whole
 * batch) holds prompt ++ generation at tokens[tokenStarts[c], tokenStarts[c + 1]), of which the
 * first promptLengths[c] are the prompt; its generation's logprobs follow the earlier calls' in
 * `logprobs`.
 */
export interface RolloutBatch {
  /** Each rollout's rollout_id, reward, group_id and agents, as a canonical rollout gives them. */
  rollouts: readonly BuilderHeader[];
  /** Rollout r's calls are [rolloutCalls[r], rolloutCalls[r + 1]): rollouts.length + 1 entries, from 0. */
  rolloutCalls: Int32Array;
  callIds: readonly string[];
  /** Each call's agent; absent (or an absent entry): the call names none. */
  callAgents?: readonly (string | undefined)[];
  /** 0: the call is not kept (SPEC `kept: false`); absent: every call is kept. */
  kept?: Uint8Array;
  tokens: Int32Array;
  /** callIds.length + 1 entries, from 0, never decreasing, the last tokens.length. */
  tokenStarts: Int32Array;
  promptLengths: Int32Array;
  /** Every call's generation logprobs, call after call: as many as generated tokens in all. */
  logprobs: Float32Array;
}

/**
 * planBatch's result. Row k (counted over the batch) is tokenIds and logprobs at
 * [tokenStarts[k], tokenStarts[k + 1]) and its loss-mask bitset at lossMask[maskStarts[k],
 * maskStarts[k + 1]). The buffers are JS memory, not views of a core's: valid until release().
 */
export interface BatchPlan {
  /** Each rollout's report, as plan() gives it; a rejected rollout has one and no rows. */
  reports: Report[];
  /** Rollout r's rows are rows [rowStarts[r], rowStarts[r + 1]). */
  rowStarts: Int32Array;
  tokenStarts: Int32Array;
  maskStarts: Int32Array;
  tokenIds: Int32Array;
  logprobs: Float32Array;
  lossMask: Uint8Array;
  /** Rollout r's rows as plan() gives them, their arrays views of the buffers above. */
  rows(rollout: number): Row[];
  /**
   * Gives the buffers to the next planBatch() to reuse (fresh ones cost more than planning a batch
   * of small rollouts); the arrays are empty after it, and a view taken before shows the next
   * batch's rows. An unreleased result keeps its buffers until it is collected.
   */
  release(): void;
}

// The builder (Callforest.builder): a rollout assembled in place, call by call.

export interface BuilderHeader {
  rollout_id: string;
  reward: number;
  group_id?: string | null;
  agents?: AgentInput[];
}

/** One call's arrays, to fill before commit(). Valid until the next stage(), commit() or finish(). */
export interface CallSlot {
  promptTokenIds: Int32Array;
  generationTokenIds: Int32Array;
  logprobs: Float32Array;
}

export interface CallMeta {
  id: string;
  agent?: string;
  kept?: boolean;
  /** The media whose placeholder tokens stand in the staged prompt (SPEC `calls[].media`). */
  media?: readonly MediaItem[] | null;
  /** MoE router choices for the staged call's tokens (SPEC `calls[].routed_experts`). */
  routed_experts?: string | readonly (readonly (readonly number[])[])[] | null;
  /** The policy version(s) that sampled the staged generation (SPEC `calls[].weight_version`). */
  weight_version?: number | readonly number[] | null;
}

export interface RolloutBuilder {
  /** Views for the next call: prompt and generation token IDs, and the generation's logprobs. */
  stage(promptLength: number, generationLength: number): CallSlot;
  /** Checks and links the staged call. False once the rollout is rejected (later calls are ignored). */
  commit(meta: CallMeta): boolean;
  /** The plan (rows and report, or the rejection). Ends the builder. */
  finish(options?: PlanOptions): Plan;
}
