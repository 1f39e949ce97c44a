// A small, obviously-correct reference implementation of SPEC.md (spec v3: media-aware linking,
// prefix breaks), for tests only.
// Quadratic on purpose: every pair of calls is compared token by token, plain arrays
// everywhere, no hashing, no tries. Each rule quotes the SPEC sentence it implements.
//
// Choices where SPEC's text leaves room (tests avoid relying on them):
// - an optional field given as `null` (agents, agent, kept) counts as "of the wrong type";
// - an agent's `parent` that names no listed agent, or a duplicate agent id, is invalid_rollout;
// - an agent without a `parent` field is a top-level agent (parent null), as the README says;
// - token arrays are plain arrays or Int32Array, logprob arrays plain, Float32Array or Float64Array
//   (types.ts); any other container is "of the wrong type";
// - `trained` and `context` list call ids in path order (root first), like `calls`.
import type { RejectionCode } from "../../src/types.js";

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
}

export interface RefAccepted {
  status: "ok";
  rollout_id: string;
  reward: number;
  /** The report's counts, as SPEC's "Output" defines them. */
  counts: RefCounts;
  /** SPEC: "at least `empty_generation` for each kept call that generated nothing", ... */
  diagnostics: RefDiagnostic[];
  rows: RefRow[];
  forest: RefCall[];
}

export interface RefRejected {
  status: "rejected";
  /** The rollout's id when it is a valid one, else null. */
  rollout_id: string | null;
  reason: RejectionCode;
  /** Id of the call the rejection is about, when there is one with a usable id. */
  call: string | null;
  /** Ledger index of that call, when the rejection is about one call. */
  callIndex: number | null;
  message: string;
}

export type RefResult = RefAccepted | RefRejected;

/** A report diagnostic: `{code, call}`, and for prefix_break `near, at, expected, found`. */
export interface RefDiagnostic {
  code: string;
  call: string | null;
  near?: string;
  at?: number;
  expected?: number[];
  found?: number[];
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
}

const MAX_TOKEN = 2 ** 31 - 1;

class Rejection extends Error {
  constructor(
    readonly reason: RejectionCode,
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

function readRolloutFields(rollout: unknown): { id: string; reward: number; agents: Agents; calls: unknown[] } {
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
  return { id: r.rollout_id as string, reward: r.reward as number, agents, calls: r.calls as unknown[] };
}

/** A call's own checks, in the order: structure, duplicate id, agent, tokens, lengths, logprobs. */
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
  const media = readMediaList(raw.media, prompt.length, callId, index);
  return {
    id: callId,
    agent,
    index,
    media,
    givesExperts: experts !== null,
    expertsShape: experts?.shape ?? null,
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
 * nrlre1:<dtype>:<S>x<L>x<K>:<base64> (dtype int8, int16 or int32; S >= len(full(c)) tokens ...;
 * little-endian C-order bytes) or as nested integer lists [S][L][K] ...; an array with no entries
 * ([], or S = 0) states no L and K". Base64 is standard: padded, no stray bits before the
 * padding (Buffer re-encodes the decoded bytes to the same text). (One call's own rules: the
 * rules across calls are checked by tests of their own.)
 */
function checkRoutedExperts(
  value: unknown,
  fullLength: number,
  id: string,
  index: number,
): { shape: string | null } | null {
  const bad = (what: string): never => {
    throw new Rejection("invalid_routed_experts", id, index, `call ${id}: ${what}`);
  };
  if (value === undefined || value === null) return null;
  if (typeof value === "string") {
    const m = /^nrlre1:(int8|int16|int32):(\d+)x(\d+)x(\d+):([A-Za-z0-9+/]*={0,2})$/.exec(value);
    if (!m) bad("not an nrlre1 envelope");
    const [, type, s, l, k, payload] = m as RegExpExecArray;
    const size = { int8: 1, int16: 2, int32: 4 }[type as "int8"];
    if (Number(s) > 0 && (Number(l) < 1 || Number(k) < 1)) bad("L or K is 0");
    const bytes = Buffer.from(payload, "base64");
    if (bytes.toString("base64") !== payload) bad("not standard base64");
    if (bytes.length !== Number(s) * Number(l) * Number(k) * size) bad("payload length");
    if (Number(s) < fullLength) bad("covers too few tokens");
    return { shape: Number(s) === 0 ? null : `${l}x${k}` };
  }
  if (!Array.isArray(value)) bad("neither a string nor an array");
  const lists = value as unknown[];
  if (lists.length < fullLength) bad("covers too few tokens");
  const layers = (lists[0] as unknown[] | undefined)?.length ?? 0;
  const topk = ((lists[0] as unknown[][] | undefined)?.[0] as unknown[] | undefined)?.length ?? 0;
  for (const perToken of lists) {
    if (!Array.isArray(perToken) || perToken.length !== layers || layers === 0) bad("ragged layers");
    for (const chosen of perToken as unknown[]) {
      if (!Array.isArray(chosen) || chosen.length !== topk || topk === 0) bad("ragged top-k");
      for (const e of chosen as unknown[])
        if (typeof e !== "number" || !Number.isInteger(e) || e < -(2 ** 31) || e >= 2 ** 31) bad("not an int32");
    }
  }
  return { shape: lists.length === 0 ? null : `${layers}x${topk}` };
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
 * SPEC "Linking": the parent of eligible call `c` among the earlier eligible calls, or null; and
 * whether SPEC's media_mismatch holds for c.
 */
function linkParent(c: Call, earlierEligible: Call[], agents: Agents): { parent: Call | null; mediaMismatch: boolean } {
  // "When no earlier call of the longest token-prefix length agrees on media (so tokens alone
  // would have linked c elsewhere), the report gets a media_mismatch diagnostic for c."
  const byTokens = earlierEligible.filter((p) => isPrefix(full(p), c.prompt));
  const longestByTokens = Math.max(0, ...byTokens.map((p) => full(p).length));
  const mediaMismatch =
    byTokens.length > 0 && !byTokens.some((p) => full(p).length === longestByTokens && mediaAgree(p, c));
  return {
    parent: linkAmong(
      c,
      byTokens.filter((p) => mediaAgree(p, c)),
      agents,
    ),
    mediaMismatch,
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

function plan(rollout: unknown): RefAccepted {
  const { id: rolloutId, reward, agents, calls: rawCalls } = readRolloutFields(rollout);

  // Validation and linking per call in ledger order: a call can only continue an earlier one,
  // so linking call i needs only calls 0..i-1, which are already validated.
  const calls: Call[] = [];
  const eligible: Call[] = [];
  const parent = new Map<Call, Call | null>();
  const mismatched = new Set<Call>();
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
      const link = linkParent(c, eligible, agents);
      parent.set(c, link.parent);
      if (link.mediaMismatch) mismatched.add(c);
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
    return {
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
    };
  });
  const rowOf = new Map(leaves.map((l, i) => [l, i]));

  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  return {
    status: "ok",
    rollout_id: rolloutId,
    reward,
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
    // "at least empty_generation for each kept call that generated nothing, media_mismatch as
    // defined under Linking, and prefix_break as defined under Prefix breaks" (in ledger order;
    // an eligible call may have media_mismatch, then prefix_break)
    diagnostics: calls.flatMap((c): RefDiagnostic[] => {
      const out: RefDiagnostic[] = [];
      if (c.kept && c.generation.length === 0) out.push({ code: "empty_generation", call: c.id });
      if (mismatched.has(c)) out.push({ code: "media_mismatch", call: c.id });
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
      };
    }),
  };
}

function validRolloutId(rollout: unknown): string | null {
  return isObject(rollout) && typeof rollout.rollout_id === "string" && rollout.rollout_id.length > 0
    ? rollout.rollout_id
    : null;
}

/** Runs SPEC on one canonical rollout object: its report fields and rows, or its rejection. */
export function reference(rollout: unknown): RefResult {
  try {
    return plan(rollout);
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
