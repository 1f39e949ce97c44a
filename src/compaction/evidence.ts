// Versioned evidence records: what each generation consumed and produced, exactly as the server
// reported it, plus the compaction decisions around it. A canonical callforest rollout is built
// from these records alone.
import type { Rollout } from "../types.js";
import { EvidenceError } from "./errors.js";
import { mediaSpans } from "./media-spans.js";
import type { OutputItem, ResponsesResponse } from "./responses.js";
import { firstBad, isFloat32Logprob, isTokenId } from "./token-rules.js";
import { expandEvidence, isPackedEvidence } from "./evidence-packing.js";

import { EVIDENCE_SCHEMA_VERSION } from "./evidence-types.js";
export { EVIDENCE_SCHEMA_VERSION };
export type { AttemptRecord, CallEvidence, EvidenceRecord, GenerationEvidence, StopReason } from "./evidence-types.js";
import type { CallEvidence, EvidenceRecord, GenerationEvidence } from "./evidence-types.js";

export { isTokenId } from "./token-rules.js";

/** A logprob's value as the message shows it, and why the planner would refuse it. */
function badLogprob(value: unknown): string {
  if (typeof value === "number" && Number.isFinite(value)) return `${value} overflows float32`;
  return `${JSON.stringify(value) ?? String(value)} is not a finite number`;
}

/**
 * The planner's rules (token ids in [0, 2^31-1], logprobs finite as float32), with the index and
 * value of the first break.
 */
function checkGeneration(where: string, g: Partial<Record<keyof GenerationEvidence, unknown>>): GenerationEvidence {
  for (const key of ["prompt_token_ids", "generation_token_ids"] as const) {
    const ids = g[key];
    if (ids === undefined) throw new EvidenceError(`${where}: ${key} is missing`);
    if (!Array.isArray(ids)) throw new EvidenceError(`${where}: ${key} must be an array of integers in [0, 2^31-1]`);
    const bad = firstBad(ids, isTokenId);
    if (bad >= 0)
      throw new EvidenceError(
        `${where}: ${key} must be an array of integers in [0, 2^31-1] ` +
          `(${key}[${bad}] is ${JSON.stringify(ids[bad]) ?? String(ids[bad])})`,
      );
  }
  const lps = g.generation_log_probs;
  if (lps === undefined) throw new EvidenceError(`${where}: generation_log_probs is missing`);
  if (!Array.isArray(lps))
    throw new EvidenceError(`${where}: generation_log_probs must be an array of finite numbers in float32 range`);
  const bad = firstBad(lps, isFloat32Logprob);
  if (bad >= 0)
    throw new EvidenceError(
      `${where}: generation_log_probs must be an array of finite numbers in float32 range ` +
        `(generation_log_probs[${bad}]: ${badLogprob(lps[bad])})`,
    );
  const ids = g.generation_token_ids as number[];
  if (lps.length !== ids.length) {
    throw new EvidenceError(`${where}: ${lps.length} generation_log_probs for ${ids.length} generation_token_ids`);
  }
  if (ids.length === 0) throw new EvidenceError(`${where}: generation_token_ids is empty`);
  return {
    prompt_token_ids: g.prompt_token_ids as number[],
    generation_token_ids: ids,
    generation_log_probs: lps as number[],
  };
}

/**
 * The generation evidence of one response: the output items that carry token fields must all
 * agree, and at least one must carry them. Throws EvidenceError naming the call and the field.
 */
export function extractGeneration(callId: string, response: ResponsesResponse): GenerationEvidence {
  const where = `call ${callId} (response ${response?.id ?? "?"})`;
  if (!response || !Array.isArray(response.output)) throw new EvidenceError(`${where}: response has no output array`);
  // The evidence names the response it came from (and a rollout's default id is built from them).
  if (typeof response.id !== "string" || response.id === "") throw new EvidenceError(`${where}: response has no id`);
  response.output.forEach((item, i) => checkOutputItem(`${where}: output[${i}]`, item));
  const carriers = response.output.filter(
    (o: OutputItem) =>
      o.prompt_token_ids !== undefined || o.generation_token_ids !== undefined || o.generation_log_probs !== undefined,
  );
  if (carriers.length === 0)
    throw new EvidenceError(
      `${where}: no output item carries prompt_token_ids / generation_token_ids / generation_log_probs`,
    );
  const first = checkGeneration(where, carriers[0]);
  for (const other of carriers.slice(1)) {
    const g = checkGeneration(where, other);
    if (JSON.stringify(g) !== JSON.stringify(first))
      throw new EvidenceError(`${where}: output items carry different token evidence`);
  }
  return first;
}

/** The fields the runtime reads from an output item (before anything goes into history). */
function checkOutputItem(where: string, item: unknown): void {
  if (!item || typeof item !== "object" || Array.isArray(item))
    throw new EvidenceError(`${where} is ${JSON.stringify(item)}, expected an object`);
  const o = item as Record<string, unknown>;
  const texts = (field: string) => {
    // Text parts: absent means none (a reasoning item may carry only a summary).
    if (o[field] === undefined) return;
    if (
      !Array.isArray(o[field]) ||
      !(o[field] as unknown[]).every((c) => typeof (c as { text?: unknown } | null)?.text === "string")
    ) {
      throw new EvidenceError(`${where}.${field} must be an array of parts with a string text`);
    }
  };
  switch (o.type) {
    case "reasoning":
    case "message":
      texts("content");
      return;
    case "function_call":
      for (const field of ["name", "arguments", "call_id"]) {
        if (typeof o[field] !== "string")
          throw new EvidenceError(
            `${where} (function_call).${field} is ${JSON.stringify(o[field])}, expected a string`,
          );
      }
      return;
    default:
      throw new EvidenceError(`${where}: unsupported output item type ${JSON.stringify(o.type)}`);
  }
}

function fail(path: string, what: string): never {
  throw new EvidenceError(`evidence ${path}: ${what}`);
}

function obj(path: string, v: unknown): Record<string, unknown> {
  if (!v || typeof v !== "object" || Array.isArray(v)) fail(path, "must be an object");
  return v as Record<string, unknown>;
}

function str(path: string, v: unknown): string {
  if (typeof v !== "string" || v === "") fail(path, "must be a non-empty string");
  return v;
}

function arr(path: string, v: unknown): unknown[] {
  if (!Array.isArray(v)) fail(path, "must be an array");
  return v;
}

/**
 * Where `observed` first differs from `prefix` ("first difference at token i" or "is shorter"), or
 * null when it starts with it.
 */
function prefixBreak(prefix: readonly number[], observed: readonly number[]): string | null {
  const n = Math.min(prefix.length, observed.length);
  for (let i = 0; i < n; i++) if (prefix[i] !== observed[i]) return `first difference at token ${i}`;
  return observed.length < prefix.length ? "it is shorter" : null;
}

/**
 * Checks an evidence record read back from anywhere (a packed one is expanded first); throws
 * EvidenceError naming the first bad field. Beyond shapes it holds the record to what the planner
 * will assume: token and logprob values in the planner's ranges, every continuation starting with
 * its parent's exact tokens (and as many as it recorded), media ids from the media table, and
 * boundary and chunk records that name recorded calls. Returns the (expanded) record.
 */
export function validateEvidence(value: unknown): EvidenceRecord {
  if (isPackedEvidence(value)) value = expandEvidence(value);
  const e = obj("record", value);
  if (e.schema_version !== EVIDENCE_SCHEMA_VERSION) {
    fail(
      "schema_version",
      `unsupported ${JSON.stringify(e.schema_version)} (this reader knows ${EVIDENCE_SCHEMA_VERSION})`,
    );
  }
  str("rollout_id", e.rollout_id);
  if (typeof e.reward !== "number" || !Number.isFinite(e.reward)) fail("reward", "must be a finite number");
  const agent = str("agent", e.agent);
  const mediaTable = new Set(arr("media", e.media).map((raw, i) => str(`media[${i}].id`, obj(`media[${i}]`, raw).id)));
  const calls = arr("calls", e.calls);
  const byId = new Map<string, CallEvidence>();
  calls.forEach((raw, i) => {
    const c = obj(`calls[${i}]`, raw);
    const id = str(`calls[${i}].call_id`, c.call_id);
    if (byId.has(id)) fail(`calls[${i}].call_id`, `duplicate call id ${id}`);
    // (The id joins the earlier ones only after its parent is checked: a call is not its own parent.)
    if (c.agent !== agent)
      fail(`calls[${i}].agent`, `is ${JSON.stringify(c.agent)}, not the record's agent ${JSON.stringify(agent)}`);
    if (!Number.isInteger(c.segment)) fail(`calls[${i}].segment`, "must be an integer");
    let g: GenerationEvidence;
    try {
      g = checkGeneration(`calls[${i}] (${id})`, c);
    } catch (error) {
      throw new EvidenceError(`evidence ${(error as Error).message}`);
    }
    checkLineage(i, id, c, g.prompt_token_ids, byId);
    arr(`calls[${i}].media`, c.media).forEach((m, j) => {
      const mediaId = str(`calls[${i}].media[${j}]`, m);
      if (!mediaTable.has(mediaId)) fail(`calls[${i}] (${id}).media[${j}]`, `${mediaId} is not in the media table`);
    });
    byId.set(id, c as unknown as CallEvidence);
  });
  arr("boundaries", e.boundaries).forEach((raw, i) => {
    const b = obj(`boundaries[${i}]`, raw);
    for (const key of ["first_call", "previous_call"] as const) {
      const named = str(`boundaries[${i}].${key}`, b[key]);
      if (!byId.has(named)) fail(`boundaries[${i}].${key}`, `names ${named}, not a recorded call`);
    }
  });
  arr("chunks", e.chunks).forEach((raw, i) => {
    const c = obj(`chunks[${i}]`, raw);
    for (const key of ["first_call", "last_call"] as const) {
      if (c[key] === null) continue;
      const named = str(`chunks[${i}].${key}`, c[key]);
      if (!byId.has(named)) fail(`chunks[${i}].${key}`, `names ${named}, not a recorded call`);
    }
  });
  arr("attempts", e.attempts);
  arr("guards", e.guards);
  const token = e.image_placeholder_token;
  if (token !== undefined && token !== null && !isTokenId(token))
    fail("image_placeholder_token", "must be null or an integer in [0, 2^31-1]");
  return value as EvidenceRecord;
}

/**
 * A continuation (a call with a parent) must start with its parent's prompt + generation, and
 * record exactly that many tokens as its required prefix; a call without one required none.
 */
function checkLineage(
  i: number,
  id: string,
  c: Record<string, unknown>,
  prompt: readonly number[],
  earlier: ReadonlyMap<string, CallEvidence>,
): void {
  const required = c.required_prefix_length;
  if (!Number.isSafeInteger(required) || (required as number) < 0)
    fail(`calls[${i}] (${id}).required_prefix_length`, "must be a non-negative integer");
  if (c.parent_call === null) {
    if (required !== 0)
      fail(`calls[${i}] (${id}).required_prefix_length`, `is ${required} but the call has no parent_call`);
    return;
  }
  const parent = earlier.get(c.parent_call as string);
  if (!parent) fail(`calls[${i}].parent_call`, `names ${String(c.parent_call)}, not an earlier call`);
  const full = parent.prompt_token_ids.length + parent.generation_token_ids.length;
  if (required !== full)
    fail(
      `calls[${i}] (${id}).required_prefix_length`,
      `is ${required}, but parent_call ${parent.call_id} holds ${full} tokens`,
    );
  const why = prefixBreak([...parent.prompt_token_ids, ...parent.generation_token_ids], prompt);
  if (why !== null)
    fail(
      `calls[${i}] (${id}).prompt_token_ids`,
      `does not start with parent_call ${parent.call_id}'s ${full} tokens (${why})`,
    );
}

/**
 * SPEC's canonical rollout, built from the evidence alone (validated first). Every call gives its
 * `media` (`[]` when it showed none, or when the evidence names no image placeholder token).
 */
export function rolloutFromEvidence(value: unknown): Rollout {
  const e = validateEvidence(value);
  const token = e.image_placeholder_token ?? null;
  return {
    rollout_id: e.rollout_id,
    reward: e.reward,
    agents: [{ id: e.agent, parent: null, mode: "leader" }],
    calls: e.calls.map((c, i) => ({
      id: c.call_id,
      agent: c.agent,
      prompt_token_ids: c.prompt_token_ids,
      generation_token_ids: c.generation_token_ids,
      generation_log_probs: c.generation_log_probs,
      media:
        token === null ? [] : mediaSpans(`evidence calls[${i}] (${c.call_id})`, c.prompt_token_ids, c.media, token),
    })),
  };
}
