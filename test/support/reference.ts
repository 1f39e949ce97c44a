// A small, obviously-correct reference implementation of SPEC.md (spec v4: media- and
// route-aware linking, prefix breaks, route mismatches, weight versions, group ids, and packed
// records as SPEC's token trie), for tests only.
// Quadratic on purpose: every pair of calls is compared token by token, plain arrays
// everywhere, no hashing; the token trie is built node by node exactly as SPEC words it (its
// "shares the most tokens" is recomputed by brute force over a subtree). Each rule quotes the
// SPEC sentence it implements.
//
// Choices where SPEC's text leaves room (tests of other modules avoid relying on them;
// test/plan/reference-v4.test.ts pins the trie's):
// - an optional field given as `null` (agents, agent, kept) counts as "of the wrong type";
//   `media`, `routed_experts` and `weight_version` given as `null` count as absent;
// - an agent's `parent` that names no listed agent, or a duplicate agent id, is invalid_rollout;
// - the rollout's own fields are checked in the order rollout_id, reward, group_id, agents, calls;
// - an agent without a `parent` field is a top-level agent (parent null), as the README says;
// - token arrays are plain arrays or Int32Array, logprob arrays plain, Float32Array or Float64Array
//   (types.ts); any other container is "of the wrong type"; a per-token `weight_version` is a
//   plain array or an Int32Array;
// - `trained` and `context` list call ids in path order (root first), like `calls`;
// - a call's own checks run in the order: structure, duplicate id, agent, tokens, logprob count,
//   logprobs, routed experts, weight version, media (SPEC lists no order; weight_version, new in
//   v4, goes after the routed experts and before the media);
// - routed experts: the envelope's base64 is standard (padded, no stray bits), as v3 said; every
//   entry must be a well-formed [L][K] int32 block, but only entries i < len(full(c)) are checked
//   for negative ids (SPEC: "entries past len(full(c)) are ignored"); the entry of the call's last
//   token is checked ("validated and otherwise ignored");
// - rows and records carry `routed_experts` when the eligible calls give them (an unkept call's
//   routes alone do not count); where the rollout states no L and K at all, a none entry is [];
// - diagnostics of one call come in the order empty_generation, media_mismatch, route_mismatch,
//   prefix_break;
// - the trie's "the one along which c would share the most tokens" counts the tokens c shares from
//   the branch on along the best path of that child's subtree, by SPEC's definition of sharing,
//   up to len(full(c)) (not cut at len(prompt(c)) nor backed up out of media);
// - a call that would stop inside a media occurrence backs up out of its own occurrences (on
//   shared tokens they are the node's creator's too);
// - a packed record's `roots` are the forest roots one of whose forest tree's calls created a
//   segment of the record (a record "holds" the calls that created its segments): twins with
//   empty prompts are two trie roots, and a call that continues the first twin in the forest
//   may hang from the second in the trie, so both records name the first twin;
// - row_exceeds_capacity is reported at the first leaf in ledger order that is too long.
import type { RejectionCode } from "../../src/types.js";

/** SPEC v4's rejection codes: src/types.ts's, and `invalid_weight_version` (new in v4). */
export type RefRejectionCode = RejectionCode | "invalid_weight_version";

/** One token's routed experts: an L × K block, `[layer][slot]`. */
export type RouteBlock = number[][];

export interface RefRow {
  index: number;
  leaf: string;
  agent: string;
  calls: string[];
  trained: string[];
  context: string[];
  num_tokens: number;
  token_ids: number[];
  /** Float32-rounded (Math.fround) per token. */
  logprobs: number[];
  /** 0/1 per token. */
  loss_mask: number[];
  reward: number;
  /** "media is media(l): the leaf's occurrences" */
  media: RefMedia[];
  /** "group_id: the rollout's group_id, or null." */
  group_id: string | null;
  /** Only when the rollout gives routes: `num_tokens` entries [S][L][K], all −1 where none. */
  routed_experts?: number[][][];
  /** Only when some eligible call gives `weight_version`: one per token, −1 elsewhere. */
  weight_versions?: number[];
}

/** A packed segment: one node of the token trie (SPEC "Packed trees"). */
export interface RefSegment {
  call: string;
  parent: number;
  start: number;
  length: number;
  end: number;
}

/** One packed record: one tree of SPEC's token trie. */
export interface RefPacked {
  rollout_id: string;
  tree: number;
  roots: string[];
  calls: string[];
  num_tokens: number;
  token_ids: number[];
  position_ids: number[];
  /** Float32-rounded (Math.fround) per token. */
  logprobs: number[];
  /** 0/1 per token. */
  loss_mask: number[];
  segments: RefSegment[];
  /** Offsets are packed indices. */
  media: RefMedia[];
  reward: number;
  group_id: string | null;
  /** When the rollout gives routes: per packed token its resolved route, all −1 where none. */
  routed_experts?: number[][][];
  /** When some eligible call gives `weight_version`: per packed token, −1 elsewhere. */
  weight_versions?: number[];
}

export interface RefMedia {
  id: string;
  offset: number;
  length: number;
}

export interface RefCall {
  id: string;
  agent: string;
  index: number;
  kept: boolean;
  eligible: boolean;
  promptLength: number;
  generationLength: number;
  parent: string | null;
  children: string[];
  root: boolean;
  leaf: boolean;
  ownerRow: number;
  media: RefMedia[];
  mediaMismatch: boolean;
  /** The near parent of its prefix_break, null when none. */
  nearParent: string | null;
  breakAt: number | null;
  /** Whether the report has a route_mismatch for it. */
  routeMismatch: boolean;
}

export interface RefCounts {
  calls: number;
  eligible: number;
  roots: number;
  leaves: number;
  rows: number;
  captured_tokens: number;
  trained_tokens: number;
  row_tokens: number;
  unique_tokens: number;
  /** Only when packed records were asked for: the sum of the records' num_tokens. */
  trie_tokens?: number;
}

export interface RefAccepted {
  status: "ok";
  rollout_id: string;
  reward: number;
  group_id: string | null;
  /** The report's counts, as SPEC's "Output" defines them. */
  counts: RefCounts;
  /** SPEC: "at least `empty_generation` for each kept call that generated nothing", ... */
  diagnostics: RefDiagnostic[];
  rows: RefRow[];
  forest: RefCall[];
  /** Only when packed records (or bins) were asked for: the token trie's records, in order. */
  trees?: RefPacked[];
}

export interface RefRejected {
  status: "rejected";
  /** The rollout's id when it is a valid one, else null. */
  rollout_id: string | null;
  reason: RefRejectionCode;
  /** Id of the call the rejection is about, when there is one with a usable id. */
  call: string | null;
  /** Ledger index of that call, when the rejection is about one call. */
  callIndex: number | null;
  message: string;
}

export type RefResult = RefAccepted | RefRejected;

/**
 * A report diagnostic: `{code, call}`; for prefix_break also `near, at, expected, found`; for
 * route_mismatch also `near, at, layer`.
 */
export interface RefDiagnostic {
  code: string;
  call: string | null;
  near?: string;
  at?: number;
  expected?: number[];
  found?: number[];
  layer?: number;
}

/** What to compute besides rows: packed records (`trees`), or bins' capacity (`capacity`). */
export interface RefOptions {
  trees?: boolean;
  capacity?: number;
}

interface Call {
  id: string;
  agent: string;
  index: number;
  prompt: number[];
  generation: number[];
  logprobs: number[];
  kept: boolean;
  /** SPEC: "full(c) = prompt(c) ++ generation(c)" */
  full: number[];
  media: RefMedia[];
  /** Whether it gives routed experts. */
  givesExperts: boolean;
  /** "LxK" of its routed experts, null when it gives none or an array with no entries. */
  expertsShape: string | null;
  /** Its routed experts' first min(S, len(full(c))) entries, null when it gives none. */
  routes: RouteBlock[] | null;
  /** Its `weight_version`: one, one per generated token, or null when it gives none. */
  weightVersion: number | number[] | null;
}

const MAX_TOKEN = 2 ** 31 - 1;

class Rejection extends Error {
  constructor(
    readonly reason: RefRejectionCode,
    readonly call: string | null,
    readonly callIndex: number | null,
    message: string,
  ) {
    super(message);
  }
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

// types.ts: TokenIds = readonly number[] | Int32Array.
function isTokenList(x: unknown): x is ArrayLike<unknown> {
  return Array.isArray(x) || x instanceof Int32Array;
}

// types.ts: Logprobs = readonly number[] | Float32Array | Float64Array.
function isLogprobList(x: unknown): x is ArrayLike<unknown> {
  return Array.isArray(x) || x instanceof Float32Array || x instanceof Float64Array;
}

/** A typed array over a detached buffer (transferred away): it reads as empty; README: invalid_rollout. */
function isDetached(x: unknown): boolean {
  if (!ArrayBuffer.isView(x)) return false;
  try {
    new Uint8Array(x.buffer);
    return false;
  } catch {
    return true;
  }
}

function toPlain(list: ArrayLike<unknown>): unknown[] {
  const out: unknown[] = [];
  for (let i = 0; i < list.length; i++) out.push(list[i]);
  return out;
}

/** `a` is a prefix of `b` (equal length allowed), compared token by token. */
export function isPrefix(a: readonly number[], b: readonly number[]): boolean {
  if (a.length > b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function full(c: Call): number[] {
  return c.full;
}

interface Agents {
  listed: boolean;
  parentOf: Map<string, string | null>;
}

function readRolloutFields(rollout: unknown): {
  id: string;
  reward: number;
  groupId: string | null;
  agents: Agents;
  calls: unknown[];
} {
  const bad = (what: string): never => {
    throw new Rejection("invalid_rollout", null, null, what);
  };
  // SPEC table: "rollout_id | non-empty string | required"
  if (!isObject(rollout)) bad("rollout is not an object");
  const r = rollout as Record<string, unknown>;
  if (typeof r.rollout_id !== "string" || r.rollout_id.length === 0)
    bad("rollout_id missing or not a non-empty string");
  // SPEC table: "reward | finite number | required"
  if (typeof r.reward !== "number" || !Number.isFinite(r.reward)) bad("reward missing or not a finite number");
  // SPEC table: "group_id | string or null | optional (v4)"; Rejections: "invalid_rollout | ...
  // (group_id, when present, must be a string)"
  if (r.group_id !== undefined && r.group_id !== null && typeof r.group_id !== "string")
    bad("group_id is neither a string nor null");
  const groupId = (r.group_id as string | null | undefined) ?? null;
  // SPEC table: "agents | array of {id, parent, mode} | optional; id unique string, parent an agent id or null"
  const agents: Agents = { listed: false, parentOf: new Map() };
  if (r.agents !== undefined) {
    if (!Array.isArray(r.agents)) bad("agents is not an array");
    agents.listed = true;
    for (const a of r.agents as unknown[]) {
      if (!isObject(a) || typeof a.id !== "string") bad("agent without a string id");
      const agent = a as Record<string, unknown>;
      if (agents.parentOf.has(agent.id as string)) bad(`duplicate agent id ${agent.id}`);
      const parent = agent.parent === undefined ? null : agent.parent;
      if (parent !== null && typeof parent !== "string") bad(`agent ${agent.id}: parent not a string or null`);
      // SPEC table: "mode free text" (optional)
      if (agent.mode !== undefined && typeof agent.mode !== "string") bad(`agent ${agent.id}: mode not a string`);
      agents.parentOf.set(agent.id as string, parent as string | null);
    }
    for (const [id, parent] of agents.parentOf) {
      if (parent !== null && !agents.parentOf.has(parent)) bad(`agent ${id}: parent ${parent} is not an agent`);
    }
  }
  // SPEC table: "calls | array, in ledger order | required"
  if (!Array.isArray(r.calls)) bad("calls missing or not an array");
  return { id: r.rollout_id as string, reward: r.reward as number, groupId, agents, calls: r.calls as unknown[] };
}

/**
 * A call's own checks, in the order: structure, duplicate id, agent, tokens, lengths, logprobs,
 * routed experts, weight version, media.
 */
function readCall(raw: unknown, index: number, seen: Set<string>, agents: Agents): Call {
  if (!isObject(raw)) throw new Rejection("invalid_rollout", null, index, `call ${index} is not an object`);
  // SPEC table: "calls[].id | non-empty string"
  const id = typeof raw.id === "string" && raw.id.length > 0 ? raw.id : null;
  const bad = (what: string): never => {
    throw new Rejection("invalid_rollout", id, index, `call ${id ?? index}: ${what}`);
  };
  if (id === null) bad("id missing or not a non-empty string");
  // SPEC table: "calls[].agent | string | optional, default """
  if (raw.agent !== undefined && typeof raw.agent !== "string") bad("agent is not a string");
  // SPEC table: "prompt_token_ids | array of integers ... | required (may be empty)"; same for generation
  for (const field of ["prompt_token_ids", "generation_token_ids", "generation_log_probs"])
    if (isDetached(raw[field])) bad(`${field} is detached`);
  if (!isTokenList(raw.prompt_token_ids)) bad("prompt_token_ids missing or not an array");
  if (!isTokenList(raw.generation_token_ids)) bad("generation_token_ids missing or not an array");
  // SPEC table: "generation_log_probs | array of finite numbers | required"
  if (!isLogprobList(raw.generation_log_probs)) bad("generation_log_probs missing or not an array");
  // SPEC table: "calls[].kept | boolean | optional, default true"
  if (raw.kept !== undefined && typeof raw.kept !== "boolean") bad("kept is not a boolean");
  const callId = id as string;
  const agent = (raw.agent as string | undefined) ?? "";

  // SPEC: "duplicate_call_id | two calls share an id"
  if (seen.has(callId)) throw new Rejection("duplicate_call_id", callId, index, `call ${callId}: duplicate id`);
  seen.add(callId);
  // SPEC: "unknown_agent | a call names an agent missing from `agents`" ("when `agents` is given
  // it must name one of them")
  if (agents.listed && !agents.parentOf.has(agent)) {
    throw new Rejection("unknown_agent", callId, index, `call ${callId}: unknown agent ${agent}`);
  }
  // SPEC: "invalid_token | a token ID is not an integer in [0, 2^31-1]"
  const prompt = toPlain(raw.prompt_token_ids as ArrayLike<unknown>);
  const generation = toPlain(raw.generation_token_ids as ArrayLike<unknown>);
  for (const t of [...prompt, ...generation]) {
    if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t > MAX_TOKEN) {
      throw new Rejection("invalid_token", callId, index, `call ${callId}: invalid token ${String(t)}`);
    }
  }
  // SPEC: "logprob_length_mismatch | logprobs and generated tokens differ in count"
  const logprobs = toPlain(raw.generation_log_probs as ArrayLike<unknown>);
  if (logprobs.length !== generation.length) {
    throw new Rejection("logprob_length_mismatch", callId, index, `call ${callId}: logprob count mismatch`);
  }
  // SPEC: "invalid_logprob | a logprob is not a finite number" — rows hold float32, so a double
  // that overflows float32 (1e39) is not a finite logprob either.
  for (const lp of logprobs) {
    if (typeof lp !== "number" || !Number.isFinite(lp) || !Number.isFinite(Math.fround(lp))) {
      throw new Rejection("invalid_logprob", callId, index, `call ${callId}: invalid logprob ${String(lp)}`);
    }
  }
  const experts = checkRoutedExperts(raw.routed_experts, prompt.length + generation.length, callId, index);
  const weightVersion = readWeightVersion(raw.weight_version, generation.length, callId, index);
  const media = readMediaList(raw.media, prompt.length, callId, index);
  return {
    id: callId,
    agent,
    index,
    media,
    givesExperts: experts !== null,
    expertsShape: experts?.shape ?? null,
    routes: experts?.entries ?? null,
    weightVersion,
    prompt: prompt as number[],
    generation: generation as number[],
    logprobs: (logprobs as number[]).map((x) => Math.fround(x)),
    // SPEC: "`false` = a try that no agent kept (a retry): ignored entirely"
    kept: raw.kept !== false,
    full: [...(prompt as number[]), ...(generation as number[])],
  };
}

/**
 * SPEC table: "calls[].routed_experts | string or array | optional: ... in NeMo RL's envelope
 * nrlre1:<dtype>:<S>x<L>x<K>:<base64> (dtype int8, int16 or int32; L MoE layers, K top-k;
 * little-endian C-order bytes) or as nested integer lists [S][L][K] (every layer of every token
 * with K entries, each fitting int32). S ≥ len(full(c)) − 1 ...; entries past len(full(c)) are
 * ignored. Expert ids are ≥ 0, except that an entry whose L × K values are all −1 is not
 * recorded ...; an entry mixing −1 with other values, or holding any other negative value, is
 * invalid. ... an array with no entries ([], or S = 0) states no L and K". Base64 is standard:
 * padded, no stray bits before the padding (Buffer re-encodes the decoded bytes to the same
 * text). (One call's own rules: the rules across calls are checked by the caller.) Returns the
 * shape "LxK" (null when no entries) and the first min(S, len(full(c))) entries.
 */
function checkRoutedExperts(
  value: unknown,
  fullLength: number,
  id: string,
  index: number,
): { shape: string | null; entries: RouteBlock[] } | null {
  const bad = (what: string): never => {
    throw new Rejection("invalid_routed_experts", id, index, `call ${id}: ${what}`);
  };
  if (value === undefined || value === null) return null;
  let entries: RouteBlock[] = [];
  let layers = 0;
  let topk = 0;
  if (typeof value === "string") {
    const m = /^nrlre1:(int8|int16|int32):(\d+)x(\d+)x(\d+):([A-Za-z0-9+/]*={0,2})$/.exec(value);
    if (!m) bad("not an nrlre1 envelope");
    const [, type, s, l, k, payload] = m as RegExpExecArray;
    const size = { int8: 1, int16: 2, int32: 4 }[type as "int8"];
    const S = Number(s);
    layers = Number(l);
    topk = Number(k);
    if (S > 0 && (layers < 1 || topk < 1)) bad("L or K is 0");
    const bytes = Buffer.from(payload, "base64");
    if (bytes.toString("base64") !== payload) bad("not standard base64");
    if (bytes.length !== S * layers * topk * size) bad("payload length");
    // "little-endian C-order bytes": value (t, l, k) at ((t * L + l) * K + k) * size
    const at = (t: number, li: number, ki: number): number => {
      const offset = ((t * layers + li) * topk + ki) * size;
      return size === 1 ? bytes.readInt8(offset) : size === 2 ? bytes.readInt16LE(offset) : bytes.readInt32LE(offset);
    };
    for (let t = 0; t < S; t++) {
      const block: RouteBlock = [];
      for (let li = 0; li < layers; li++) {
        const chosen: number[] = [];
        for (let ki = 0; ki < topk; ki++) chosen.push(at(t, li, ki));
        block.push(chosen);
      }
      entries.push(block);
    }
  } else {
    if (!Array.isArray(value)) bad("neither a string nor an array");
    const lists = value as unknown[];
    layers = (lists[0] as unknown[] | undefined)?.length ?? 0;
    topk = ((lists[0] as unknown[][] | undefined)?.[0] as unknown[] | undefined)?.length ?? 0;
    for (const perToken of lists) {
      if (!Array.isArray(perToken) || perToken.length !== layers || layers === 0) bad("ragged layers");
      for (const chosen of perToken as unknown[]) {
        if (!Array.isArray(chosen) || chosen.length !== topk || topk === 0) bad("ragged top-k");
        for (const e of chosen as unknown[])
          if (typeof e !== "number" || !Number.isInteger(e) || e < -(2 ** 31) || e >= 2 ** 31) bad("not an int32");
      }
    }
    entries = (lists as number[][][]).map((block) => block.map((chosen) => chosen.slice()));
  }
  // "an array with no entries ([], or S = 0) states no L and K"
  const shape = entries.length === 0 ? null : `${layers}x${topk}`;
  // "S ≥ len(full(c)) − 1"
  if (entries.length < fullLength - 1) bad("covers too few tokens");
  // "entries past len(full(c)) are ignored"
  entries = entries.slice(0, fullLength);
  for (const block of entries) {
    const values = block.flat();
    // "an entry whose L × K values are all −1 is not recorded"
    if (values.every((e) => e === -1)) continue;
    // "an entry mixing −1 with other values, or holding any other negative value, is invalid"
    if (values.some((e) => e < 0)) bad("a negative expert id outside an all −1 entry");
  }
  return { shape, entries };
}

/**
 * SPEC table: "calls[].weight_version | integer, or array of integers | optional (v4): the policy
 * version that sampled the call's generation (each in [0, 2^31−1]); an array gives one version
 * per generated token"; Rejections: "invalid_weight_version | weight_version is not an integer in
 * [0, 2^31−1], nor an array of such integers with one per generated token".
 */
function readWeightVersion(
  value: unknown,
  generationLength: number,
  id: string,
  index: number,
): number | number[] | null {
  if (value === undefined || value === null) return null;
  const valid = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= MAX_TOKEN;
  if (valid(value)) return value;
  if (Array.isArray(value) || value instanceof Int32Array) {
    const versions = toPlain(value);
    if (versions.length === generationLength && versions.every(valid)) return versions as number[];
  }
  throw new Rejection("invalid_weight_version", id, index, `call ${id}: invalid weight_version`);
}

/**
 * SPEC table: "calls[].media | array of {id, offset, length} | optional, default []: ... id is a
 * non-empty string ...; offset >= 0 and length >= 1 are integers; spans are ascending, do not
 * overlap, and end inside the prompt". (`null` counts as none, as the README says.)
 */
function readMediaList(value: unknown, promptLength: number, id: string, index: number): RefMedia[] {
  const bad = (what: string): never => {
    throw new Rejection("invalid_media", id, index, `call ${id}: ${what}`);
  };
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) bad("media is not an array");
  const items: RefMedia[] = [];
  for (const item of value as unknown[]) {
    if (!isObject(item)) bad("media item not an object");
    const m = item as Record<string, unknown>;
    if (typeof m.id !== "string" || m.id.length === 0) bad("media id not a non-empty string");
    if (typeof m.offset !== "number" || !Number.isInteger(m.offset) || m.offset < 0)
      bad("media offset not an integer >= 0");
    if (typeof m.length !== "number" || !Number.isInteger(m.length) || m.length < 1)
      bad("media length not an integer >= 1");
    const span = { id: m.id as string, offset: m.offset as number, length: m.length as number };
    const before = items[items.length - 1];
    if (before && span.offset < before.offset + before.length) bad("media spans not ascending or overlapping");
    if (span.offset + span.length > promptLength) bad("media span past the prompt");
    items.push(span);
  }
  return items;
}

/** SPEC: "media(c) before n = its occurrences with offset < n" */
function mediaBefore(c: Call, n: number): RefMedia[] {
  return c.media.filter((m) => m.offset < n);
}

/** SPEC: "media(p) == media(c) before len(full(p)) (same ids, offsets and lengths, in order)" */
function mediaAgree(p: Call, c: Call): boolean {
  const before = mediaBefore(c, full(p).length);
  return (
    before.length === p.media.length &&
    before.every((m, i) => m.id === p.media[i].id && m.offset === p.media[i].offset && m.length === p.media[i].length)
  );
}

/**
 * SPEC "route": "route(c, i): the entry of c's routed_experts for token i of full(c) ..., or none
 * when c gives no routes or i = len(full(c)) − 1". None is null here.
 */
function route(c: Call, i: number): RouteBlock | null {
  if (c.routes === null || i === full(c).length - 1) return null;
  return c.routes[i];
}

/** Two L × K blocks are equal: every layer, every slot (the all −1 block is a value like any other). */
function sameBlock(a: RouteBlock, b: RouteBlock): boolean {
  if (a.length !== b.length) return false;
  for (let l = 0; l < a.length; l++) {
    if (a[l].length !== b[l].length) return false;
    for (let k = 0; k < a[l].length; k++) if (a[l][k] !== b[l][k]) return false;
  }
  return true;
}

/** "equal or at least one of them is none" */
function routesAgreeAt(a: RouteBlock | null, b: RouteBlock | null): boolean {
  return a === null || b === null || sameBlock(a, b);
}

/** The first layer where two blocks differ. */
function firstDifferingLayer(a: RouteBlock, b: RouteBlock): number {
  let l = 0;
  while (l < a.length && a[l].every((e, k) => e === b[l][k])) l++;
  return l;
}

/**
 * SPEC "path route": "R(c, i) for i < len(full(c)): route(c, i) if it is not none, else
 * R(parent(c), i) when i < len(full(parent(c))), else none".
 */
function pathRoute(c: Call, i: number, parentOf: Map<Call, Call | null>): RouteBlock | null {
  const own = route(c, i);
  if (own !== null) return own;
  const p = parentOf.get(c) ?? null;
  if (p !== null && i < full(p).length) return pathRoute(p, i, parentOf);
  return null;
}

/** "for every i < len(full(p)), route(c, i) and R(p, i) are equal or at least one of them is none" */
function routesAgree(p: Call, c: Call, parentOf: Map<Call, Call | null>): boolean {
  for (let i = 0; i < full(p).length; i++) if (!routesAgreeAt(route(c, i), pathRoute(p, i, parentOf))) return false;
  return true;
}

/**
 * SPEC "Linking": the parent of eligible call `c` among the earlier eligible calls (whose parents
 * are in `parentOf`), or null; whether SPEC's media_mismatch holds for c; and c's route_mismatch.
 */
function linkParent(
  c: Call,
  earlierEligible: Call[],
  agents: Agents,
  parentOf: Map<Call, Call | null>,
): { parent: Call | null; mediaMismatch: boolean; routeMismatch: RefDiagnostic | null } {
  // "When no earlier call of the longest token-prefix length agrees on media (so tokens alone
  // would have linked c elsewhere), the report gets a media_mismatch diagnostic for c."
  const byTokens = earlierEligible.filter((p) => isPrefix(full(p), c.prompt));
  const longestByTokens = Math.max(0, ...byTokens.map((p) => full(p).length));
  const mediaMismatch =
    byTokens.length > 0 && !byTokens.some((p) => full(p).length === longestByTokens && mediaAgree(p, c));
  const byTokensAndMedia = byTokens.filter((p) => mediaAgree(p, c));
  // "When tokens and media alone would have given c a parent of length m (the longest candidate
  // by tokens and media), and no such candidate of length m agrees on routes, the report gets
  // {code: "route_mismatch", call: c, near: p, at: i, layer: l} for c: p is the latest of those
  // candidates in ledger order, i the first token where route(c, i) and R(p, i) are both not none
  // and differ, and l the first layer where they differ at i."
  let routeMismatch: RefDiagnostic | null = null;
  if (byTokensAndMedia.length > 0) {
    const m = Math.max(...byTokensAndMedia.map((p) => full(p).length));
    const ofLengthM = byTokensAndMedia.filter((p) => full(p).length === m);
    if (!ofLengthM.some((p) => routesAgree(p, c, parentOf))) {
      const near = ofLengthM[ofLengthM.length - 1];
      for (let i = 0; i < full(near).length && routeMismatch === null; i++) {
        const mine = route(c, i);
        const theirs = pathRoute(near, i, parentOf);
        if (mine !== null && theirs !== null && !sameBlock(mine, theirs)) {
          routeMismatch = {
            code: "route_mismatch",
            call: c.id,
            near: near.id,
            at: i,
            layer: firstDifferingLayer(mine, theirs),
          };
        }
      }
    }
  }
  return {
    // "the candidates are the eligible calls p that come earlier in ledger order, whose full(p) is
    // a prefix of prompt(c) (equal length allowed), whose media agree ..., and whose routes agree"
    parent: linkAmong(
      c,
      byTokensAndMedia.filter((p) => routesAgree(p, c, parentOf)),
      agents,
    ),
    mediaMismatch,
    routeMismatch,
  };
}

/** Length of the longest common prefix of two token lists. */
function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

/**
 * SPEC "Prefix breaks": c's prefix_break diagnostic, or null. `parent` is c's parent (null for a
 * root); every earlier eligible call is compared with c, token by token.
 */
function prefixBreak(c: Call, parent: Call | null, earlierEligible: Call[]): RefDiagnostic | null {
  // "let d = len(full(parent(c))) (0 for a root)"
  const d = parent ? full(parent).length : 0;
  let near: Call | null = null;
  let at = -1;
  for (const p of earlierEligible) {
    // "L(p) the length of the longest common prefix of full(p) and prompt(c)"
    const L = commonPrefixLength(full(p), c.prompt);
    // "len(prompt(p)) ≤ L(p) < min(len(full(p)), len(prompt(c))) and L(p) > d"
    const isNear = p.prompt.length <= L && L < Math.min(full(p).length, c.prompt.length) && L > d;
    // "the near parent with the largest L(p) (ties: the latest in ledger order)": p runs in
    // ledger order, so >= keeps the latest of a tie.
    if (isNear && L >= at) {
      near = p;
      at = L;
    }
  }
  if (near === null) return null;
  // "expected is full(p)[at : at+8] and found is prompt(c)[at : at+8] (up to 8 tokens each)"
  return {
    code: "prefix_break",
    call: c.id,
    near: near.id,
    at,
    expected: full(near).slice(at, at + 8),
    found: c.prompt.slice(at, at + 8),
  };
}

function linkAmong(c: Call, candidates: Call[], agents: Agents): Call | null {
  // "the candidates are the eligible calls p that come earlier in ledger order, whose full(p) is
  // a prefix of prompt(c) (equal length allowed), and whose media agree" (filtered by the caller)
  // "No candidate: c is a root."
  if (candidates.length === 0) return null;
  // "Otherwise take the candidates with the longest full sequence. One left: that is the parent."
  const longest = Math.max(...candidates.map((p) => full(p).length));
  const tied = candidates.filter((p) => full(p).length === longest);
  if (tied.length === 1) return tied[0];
  // "Several left ...: keep those whose agent is c's agent; if exactly one, that is the parent."
  const sameAgent = tied.filter((p) => p.agent === c.agent);
  if (sameAgent.length === 1) return sameAgent[0];
  // "If none, keep those whose agent is the parent agent of c's agent (from agents); if exactly
  // one, that is the parent."
  if (sameAgent.length === 0) {
    const parentAgent = agents.parentOf.get(c.agent) ?? null;
    const inParentAgent = parentAgent === null ? [] : tied.filter((p) => p.agent === parentAgent);
    if (inParentAgent.length === 1) return inParentAgent[0];
  }
  // "Otherwise the rollout is rejected with ambiguous_parent."
  throw new Rejection("ambiguous_parent", c.id, c.index, `call ${c.id}: ${tied.length} candidate parents tie`);
}

/** A node of SPEC's token trie: "a run of tokens at consecutive positions, created by one call". */
interface TrieNode {
  creator: Call;
  /** Position (in full(creator)) of its first token. */
  start: number;
  length: number;
  parent: TrieNode | null;
  children: TrieNode[];
}

interface PackContext {
  rolloutId: string;
  reward: number;
  groupId: string | null;
  givesRoutes: boolean;
  givesVersions: boolean;
  noneBlock: () => RouteBlock;
  versionOf: (x: Call, k: number) => number;
}

/** The media occurrence of `c` that covers token `i`, or null. */
function occurrenceAt(c: Call, i: number): RefMedia | null {
  return c.media.find((m) => m.offset <= i && i < m.offset + m.length) ?? null;
}

function sameOccurrence(a: RefMedia | null, b: RefMedia | null): boolean {
  if (a === null || b === null) return a === b;
  return a.id === b.id && a.offset === b.offset && a.length === b.length;
}

/** SPEC "Packed trees", "The token trie (v4)": the eligible calls' trie, one record per tree. */
function packTrie(eligible: Call[], parentOf: Map<Call, Call | null>, ctx: PackContext): RefPacked[] {
  const trieRoots: TrieNode[] = [];
  /** Each inserted call's trie path, root node first (its full sequence). */
  const paths = new Map<Call, TrieNode[]>();
  const inserted: Call[] = [];
  const nodeEnd = (n: TrieNode): number => n.start + n.length;
  const byCreator = (a: TrieNode, b: TrieNode): number => a.creator.index - b.creator.index;

  // "comparing with each node's resolved routes (a token's route is the first one that is not
  // none among the calls that share it, in ledger order)"
  const resolvedRoute = (n: TrieNode, j: number): RouteBlock | null => {
    for (const x of inserted) {
      if (!paths.get(x)!.includes(n)) continue;
      const r = route(x, j);
      if (r !== null) return r;
    }
    return null;
  };
  // "Two sequences share token i when both have it, at the same position, with the same token id;
  // the same media: the same occurrence (id, offset, length) covers i in both, or none does;
  // agreeing routes: equal L × K blocks (the all −1 block included), or at least one of them none"
  const shares = (c: Call, n: TrieNode, j: number): boolean => {
    if (j >= full(c).length || j < n.start || j >= nodeEnd(n)) return false;
    if (full(c)[j] !== full(n.creator)[j]) return false;
    if (!sameOccurrence(occurrenceAt(c, j), occurrenceAt(n.creator, j))) return false;
    const mine = route(c, j);
    return mine === null || routesAgreeAt(mine, resolvedRoute(n, j));
  };
  // How many tokens c would share from n's start on, along the best path of n's subtree.
  const sharedAlong = (c: Call, n: TrieNode): number => {
    let j = n.start;
    while (j < nodeEnd(n) && shares(c, n, j)) j++;
    if (j < nodeEnd(n)) return j - n.start;
    return j - n.start + Math.max(0, ...n.children.map((child) => sharedAlong(c, child)));
  };
  // "If c stops inside a node, that node is split there into two nodes with the same creator, the
  // second a child of the first."
  const split = (n: TrieNode, at: number): void => {
    const second: TrieNode = {
      creator: n.creator,
      start: at,
      length: nodeEnd(n) - at,
      parent: n,
      children: n.children,
    };
    for (const child of second.children) child.parent = second;
    n.length = at - n.start;
    n.children = [second];
    // every call whose path holds n holds all of it, so its path goes on through the second half
    for (const path of paths.values()) {
      const k = path.indexOf(n);
      if (k >= 0) path.splice(k + 1, 0, second);
    }
  };

  // "The trie is built by inserting the eligible calls in ledger order."
  for (const c of eligible) {
    // "stop at the first token c does not share, at len(prompt(c)) at the latest"
    const limit = c.prompt.length;
    let pos = 0;
    let path: TrieNode[] = [];
    let next = trieRoots;
    while (pos < limit) {
      const sharing = next.filter((n) => shares(c, n, pos));
      if (sharing.length === 0) break;
      // "where several children (or trie roots) share c's next token, follow the one along which
      // c would share the most tokens (ties: the one created latest in ledger order)"
      let best = sharing[0];
      let bestCount = sharedAlong(c, best);
      for (const n of sharing.slice(1)) {
        const count = sharedAlong(c, n);
        if (count > bestCount || (count === bestCount && n.creator.index > best.creator.index)) {
          best = n;
          bestCount = count;
        }
      }
      // "follow the existing nodes while c shares their tokens"
      path.push(best);
      while (pos < nodeEnd(best) && pos < limit && shares(c, best, pos)) pos++;
      if (pos < nodeEnd(best)) break;
      next = best.children;
    }
    // "and never inside a media occurrence (if c would stop inside one, it stops at the
    // occurrence's start)"
    const inside = c.media.find((m) => m.offset < pos && pos < m.offset + m.length);
    if (inside) pos = inside.offset;
    path = path.filter((n) => n.start < pos);
    const last = path.length > 0 ? path[path.length - 1] : null;
    if (last !== null && pos < nodeEnd(last)) split(last, pos);
    // "A new node, created by c, holds full(c) from that position on and becomes a child of the
    // node where c stopped (a new root of the trie if c stopped at position 0)."
    const node: TrieNode = { creator: c, start: pos, length: full(c).length - pos, parent: last, children: [] };
    if (last === null) trieRoots.push(node);
    else last.children.push(node);
    paths.set(c, [...path, node]);
    inserted.push(c);
  }

  // The forest root whose tree a call is in.
  const forestRoot = (x: Call): Call => {
    let r = x;
    while (parentOf.get(r)) r = parentOf.get(r)!;
    return r;
  };
  const subtreeTokens = (n: TrieNode): number =>
    n.length + n.children.reduce((k, child) => k + subtreeTokens(child), 0);

  // "One packed record per tree of the trie, in the ledger order of their root nodes' creators."
  return [...trieRoots].sort(byCreator).map((root, tree): RefPacked => {
    // "Its segments are the tree's nodes in pre-order (a node, then the subtree of each child,
    // children in the ledger order of their creators ...)"
    const order: TrieNode[] = [];
    const visit = (n: TrieNode): void => {
      order.push(n);
      for (const child of [...n.children].sort(byCreator)) visit(child);
    };
    visit(root);
    const record: RefPacked = {
      rollout_id: ctx.rolloutId,
      tree,
      roots: [],
      calls: [],
      num_tokens: 0,
      token_ids: [],
      position_ids: [],
      logprobs: [],
      loss_mask: [],
      segments: [],
      media: [],
      reward: ctx.reward,
      group_id: ctx.groupId,
    };
    const routes: number[][][] = [];
    const versions: number[] = [];
    for (const n of order) {
      const x = n.creator;
      const start = record.token_ids.length;
      // "segments: one {call, parent, start, length, end} per node, in pre-order: call its creator,
      // parent the index of the parent node's segment (−1 for the root), [start, start+length) the
      // segment's packed tokens, and end the packed index just past the segment's whole subtree"
      record.segments.push({
        call: x.id,
        parent: n.parent === null ? -1 : order.indexOf(n.parent),
        start,
        length: n.length,
        end: start + subtreeTokens(n),
      });
      for (let j = n.start; j < nodeEnd(n); j++) {
        const generated = j >= x.prompt.length;
        // "token_ids: the segments' tokens, concatenated"
        record.token_ids.push(full(x)[j]);
        // "position_ids[k]: the token's position in the full sequence of its segment's creator"
        record.position_ids.push(j);
        // "logprobs: on a segment's tokens that are generated tokens of its creator, the creator's
        // generation logprobs; 0 elsewhere."
        record.logprobs.push(generated ? x.logprobs[j - x.prompt.length] : 0);
        // "loss_mask: 1 exactly on the segments' tokens that are generated tokens of their creator"
        record.loss_mask.push(generated ? 1 : 0);
        // "routed_experts (when given): per packed token, its resolved route, all −1 where none"
        const r = resolvedRoute(n, j);
        routes.push(r === null ? ctx.noneBlock() : r.map((chosen) => chosen.slice()));
        // "weight_versions (when given): per packed token, the version that sampled it for a
        // generated token of the segment's creator, −1 elsewhere"
        versions.push(generated ? ctx.versionOf(x, j - x.prompt.length) : -1);
      }
      // "media: the record's occurrences, each once, with offset a packed index, in packed order
      // (an occurrence never crosses a segment boundary)"
      for (const m of x.media) {
        const overlaps = m.offset < nodeEnd(n) && m.offset + m.length > n.start;
        const within = m.offset >= n.start && m.offset + m.length <= nodeEnd(n);
        if (overlaps && !within) throw new Error(`reference: occurrence ${m.id} of ${x.id} crosses a segment`);
        if (within) record.media.push({ id: m.id, offset: start + m.offset - n.start, length: m.length });
      }
      // "calls (the calls that created its segments, in the pre-order of their first segment)"
      if (!record.calls.includes(x.id)) record.calls.push(x.id);
    }
    record.num_tokens = record.token_ids.length;
    // "roots (the forest's roots whose calls the record holds, in ledger order)"
    const creators = order.map((n) => n.creator);
    record.roots = eligible
      .filter((r) => parentOf.get(r) === null && creators.some((x) => forestRoot(x) === r))
      .map((r) => r.id);
    if (ctx.givesRoutes) record.routed_experts = routes;
    if (ctx.givesVersions) record.weight_versions = versions;
    return record;
  });
}

function plan(rollout: unknown, options: RefOptions): RefAccepted {
  const { id: rolloutId, reward, groupId, agents, calls: rawCalls } = readRolloutFields(rollout);

  // Validation and linking per call in ledger order: a call can only continue an earlier one,
  // so linking call i needs only calls 0..i-1, which are already validated.
  const calls: Call[] = [];
  const eligible: Call[] = [];
  const parent = new Map<Call, Call | null>();
  const mismatched = new Set<Call>();
  const routeMismatches = new Map<Call, RefDiagnostic>();
  const breaks = new Map<Call, RefDiagnostic>();
  const seen = new Set<string>();
  for (let index = 0; index < rawCalls.length; index++) {
    const c = readCall(rawCalls[index], index, seen, agents); // a hole in the array is no call: invalid
    // SPEC: invalid_routed_experts when "its L or K differs from another call's; or some eligible
    // calls give it and others do not" (reported at the first call that breaks the rule)
    const earlierExperts = calls.find((x) => x.expertsShape !== null);
    const firstEligible = calls.find((x) => x.kept && x.generation.length > 0);
    const eligibleNow = c.kept && c.generation.length > 0;
    if (
      (c.expertsShape !== null && earlierExperts && earlierExperts.expertsShape !== c.expertsShape) ||
      (eligibleNow && firstEligible && firstEligible.givesExperts !== c.givesExperts)
    ) {
      throw new Rejection(
        "invalid_routed_experts",
        c.id,
        index,
        `call ${c.id}: routed experts disagree with an earlier call's`,
      );
    }
    calls.push(c);
    // SPEC: "eligible | kept (kept is not false) and with at least one generated token"
    if (c.kept && c.generation.length > 0) {
      const link = linkParent(c, eligible, agents, parent);
      parent.set(c, link.parent);
      if (link.mediaMismatch) mismatched.add(c);
      if (link.routeMismatch) routeMismatches.set(c, link.routeMismatch);
      const broken = prefixBreak(c, link.parent, eligible);
      if (broken) breaks.set(c, broken);
      eligible.push(c);
    }
  }
  // SPEC: "no_trainable_calls | no eligible call"
  if (eligible.length === 0) throw new Rejection("no_trainable_calls", null, null, "no eligible call");

  const children = new Map<Call, Call[]>(eligible.map((c) => [c, []]));
  for (const c of eligible) {
    const p = parent.get(c);
    if (p) children.get(p)!.push(c); // pushed in ledger order
  }
  // SPEC: "leaf | an eligible call that no eligible call names as parent"
  const leaves = eligible.filter((c) => children.get(c)!.length === 0);
  const roots = eligible.filter((c) => parent.get(c) === null);

  // SPEC "Ownership": "at each step go to the child in the same agent as the current call (the
  // earliest in ledger order if several), else to the earliest child in ledger order; the leaf
  // reached is the owner."
  const owner = new Map<Call, Call>();
  for (const c of eligible) {
    let current = c;
    while (children.get(current)!.length > 0) {
      const kids = children.get(current)!;
      current = kids.find((k) => k.agent === current.agent) ?? kids[0];
    }
    owner.set(c, current);
  }

  // SPEC "Rejections": "row_exceeds_capacity | only when bins are asked for: a leaf's full
  // sequence is longer than the capacity" (reported at the first such leaf in ledger order)
  const capacity = options.capacity;
  const tooLong = capacity === undefined ? undefined : leaves.find((l) => full(l).length > capacity);
  if (tooLong) {
    throw new Rejection(
      "row_exceeds_capacity",
      tooLong.id,
      tooLong.index,
      `call ${tooLong.id}: ${full(tooLong).length} tokens exceed the capacity ${capacity}`,
    );
  }

  // Rows: "routed_experts (only when the rollout gives them)"; Rows: "weight_versions (only when
  // some eligible call of the rollout gives weight_version)"
  const givesRoutes = eligible.some((c) => c.givesExperts);
  const givesVersions = eligible.some((c) => c.weightVersion !== null);
  const shape = calls.find((c) => c.expertsShape !== null)?.expertsShape ?? null;
  // "all −1 where that is none": an L × K block of −1
  const noneBlock = (): RouteBlock => {
    if (shape === null) return [];
    const [layers, topk] = shape.split("x").map(Number);
    return Array.from({ length: layers }, () => new Array<number>(topk).fill(-1));
  };
  const copyBlock = (b: RouteBlock): RouteBlock => b.map((chosen) => chosen.slice());
  /** The version that sampled generated token k of x: "x's single version, or its per-token array". */
  const versionOf = (x: Call, k: number): number =>
    x.weightVersion === null ? -1 : typeof x.weightVersion === "number" ? x.weightVersion : x.weightVersion[k];

  // SPEC "Rows": "One row per leaf, in the ledger order of the leaves."
  const rows: RefRow[] = leaves.map((leaf, index) => {
    const path: Call[] = [];
    for (let x: Call | null = leaf; x !== null; x = parent.get(x) ?? null) path.unshift(x);
    // "token_ids = full(l); num_tokens = len(full(l))."
    const tokenIds = full(leaf);
    const logprobs = tokenIds.map(() => 0);
    const mask = tokenIds.map(() => 0);
    for (const x of path) {
      // "Each call x on the path occupies the span [len(prompt(x)), len(full(x))) of the row with
      // its generated tokens. logprobs holds generation_log_probs(x) on that span ... 0 elsewhere."
      for (let k = 0; k < x.generation.length; k++) {
        logprobs[x.prompt.length + k] = x.logprobs[k];
        // "loss_mask is 1 exactly on the spans of the calls that this row owns (trained)"
        if (owner.get(x) === leaf) mask[x.prompt.length + k] = 1;
      }
    }
    const row: RefRow = {
      index,
      leaf: leaf.id,
      // Output: "agent (the leaf's)"
      agent: leaf.agent,
      // Output: "calls (root first)"
      calls: path.map((x) => x.id),
      trained: path.filter((x) => owner.get(x) === leaf).map((x) => x.id),
      // "the other calls of the path are context"
      context: path.filter((x) => owner.get(x) !== leaf).map((x) => x.id),
      num_tokens: tokenIds.length,
      token_ids: tokenIds,
      logprobs,
      loss_mask: mask,
      // "reward is the rollout's reward."
      reward,
      // "media is media(l): the leaf's occurrences, whose offsets index token_ids"
      media: leaf.media,
      // "group_id: the rollout's group_id, or null."
      group_id: groupId,
    };
    // "routed_experts (only when the rollout gives them): num_tokens entries, entry i being
    // R(l, i), or all −1 where that is none (the leaf's last token, always)"
    if (givesRoutes) {
      row.routed_experts = tokenIds.map((_, i) => {
        const r = pathRoute(leaf, i, parent);
        return r === null ? noneBlock() : copyBlock(r);
      });
    }
    // "weight_versions: one int32 per token: on the generated span of each call x on the path,
    // the version that sampled each token (x's single version, or its per-token array); −1 on
    // every other token, and on the tokens of a call that gives no version."
    if (givesVersions) {
      const versions = tokenIds.map(() => -1);
      for (const x of path)
        for (let k = 0; k < x.generation.length; k++) versions[x.prompt.length + k] = versionOf(x, k);
      row.weight_versions = versions;
    }
    return row;
  });
  const rowOf = new Map(leaves.map((l, i) => [l, i]));

  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const trees =
    options.trees || capacity !== undefined
      ? packTrie(eligible, parent, {
          rolloutId,
          reward,
          groupId,
          givesRoutes,
          givesVersions,
          noneBlock,
          versionOf,
        })
      : undefined;
  const result: RefAccepted = {
    status: "ok",
    rollout_id: rolloutId,
    reward,
    group_id: groupId,
    counts: {
      // Report: "calls (every call listed, kept or not)"
      calls: calls.length,
      eligible: eligible.length,
      roots: roots.length,
      leaves: leaves.length,
      rows: rows.length,
      // "captured_tokens (generated tokens of the eligible calls)"
      captured_tokens: sum(eligible.map((c) => c.generation.length)),
      trained_tokens: sum(rows.map((r) => sum(r.loss_mask))),
      // "row_tokens (sum of row lengths)"
      row_tokens: sum(rows.map((r) => r.num_tokens)),
      // "unique_tokens: for each eligible call, len(full(c)) − len(full(parent(c))), or len(full(c))
      // for a root"
      unique_tokens: sum(
        eligible.map((c) => {
          const p = parent.get(c);
          return full(c).length - (p ? full(p).length : 0);
        }),
      ),
    },
    // "at least empty_generation for each kept call that generated nothing, media_mismatch and
    // route_mismatch as defined under Linking, and prefix_break as defined under Prefix breaks"
    // (in ledger order; an eligible call may have media_mismatch, route_mismatch, prefix_break,
    // in that order)
    diagnostics: calls.flatMap((c): RefDiagnostic[] => {
      const out: RefDiagnostic[] = [];
      if (c.kept && c.generation.length === 0) out.push({ code: "empty_generation", call: c.id });
      if (mismatched.has(c)) out.push({ code: "media_mismatch", call: c.id });
      const misrouted = routeMismatches.get(c);
      if (misrouted) out.push(misrouted);
      const broken = breaks.get(c);
      if (broken) out.push(broken);
      return out;
    }),
    rows,
    forest: calls.map((c) => {
      const isEligible = parent.has(c);
      const p = parent.get(c) ?? null;
      return {
        id: c.id,
        agent: c.agent,
        index: c.index,
        kept: c.kept,
        eligible: isEligible,
        promptLength: c.prompt.length,
        generationLength: c.generation.length,
        parent: p ? p.id : null,
        children: isEligible ? children.get(c)!.map((k) => k.id) : [],
        root: isEligible && p === null,
        leaf: isEligible && children.get(c)!.length === 0,
        ownerRow: isEligible ? rowOf.get(owner.get(c)!)! : -1,
        media: c.media,
        mediaMismatch: mismatched.has(c),
        nearParent: breaks.get(c)?.near ?? null,
        breakAt: breaks.get(c)?.at ?? null,
        routeMismatch: routeMismatches.has(c),
      };
    }),
  };
  if (trees) {
    // Output: "trie_tokens (only when packed records were asked for: the sum of the packed trees'
    // num_tokens ...)"
    result.counts.trie_tokens = sum(trees.map((t) => t.num_tokens));
    result.trees = trees;
  }
  return result;
}

function validRolloutId(rollout: unknown): string | null {
  return isObject(rollout) && typeof rollout.rollout_id === "string" && rollout.rollout_id.length > 0
    ? rollout.rollout_id
    : null;
}

/**
 * Runs SPEC on one canonical rollout object: its report fields and rows (and with `trees` or
 * `capacity`, its packed records and trie_tokens), or its rejection.
 */
export function reference(rollout: unknown, options: RefOptions = {}): RefResult {
  try {
    return plan(rollout, options);
  } catch (error) {
    if (!(error instanceof Rejection)) throw error;
    return {
      status: "rejected",
      rollout_id: validRolloutId(rollout),
      reason: error.reason,
      call: error.call,
      callIndex: error.callIndex,
      message: error.message,
    };
  }
}

/** SPEC's packed records (the token trie) of an accepted rollout; throws when SPEC rejects it. */
export function referenceTrie(rollout: unknown): RefPacked[] {
  const result = reference(rollout, { trees: true });
  if (result.status !== "ok") throw new Error(`reference: rejected (${result.reason}): ${result.message}`);
  return result.trees!;
}
