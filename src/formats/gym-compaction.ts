// `gym-compaction`: what NeMo Gym's compaction agent (`simple_agent_with_compaction`, Gym PR
// #2616) returns, bare (reward 0) or as a rollout row's `response` (the row's reward). Calls are
// its completions in ledger order: `completion_evidence[]` of a ContextCompactedResponse, or, in
// the transport response a verified row carries instead, the token-carrying `output` items
// paired in order with `model_call_metadata[]`. Each completion's `media_occurrences` become
// canonical `media`: placed by `placeholder_span_or_position`, or (Gym's capture leaves it null)
// on the runs of the `--media-token` ids in the prompt. Media that cannot be placed reject the
// rollout (`media_unlocated`): tokens alone would link histories that showed different images.
import type { CanonicalCall, Diagnostic, MediaItem, Rollout } from "../types.js";
import type { FormatContext } from "./types.js";
import { countOf } from "../messages.js";
import { placeholderRuns, showSpan, type TokenSpan } from "./media-spans.js";
import {
  FormatError,
  field,
  gymRolloutId,
  isNonEmptyString,
  isObject,
  requireArray,
  requireObject,
  requireReward,
  requireTokenArray,
  q,
  show,
  type JsonObject,
} from "./values.js";

/** The keys of a completion's token arrays where they are read. */
interface TokenKeys {
  prompt: string;
  generation: string;
  logprobs: string;
}

const EVIDENCE_KEYS: TokenKeys = {
  prompt: "prompt_token_ids",
  generation: "sampled_token_ids",
  logprobs: "sampled_logprobs",
};
const OUTPUT_KEYS: TokenKeys = {
  prompt: "prompt_token_ids",
  generation: "generation_token_ids",
  logprobs: "generation_log_probs",
};

/** One model call: its record (ObservedCompletion, or ModelCallMetadata) and where its tokens are. */
interface Completion {
  record: JsonObject;
  where: string;
  tokens: JsonObject;
  tokensWhere: string;
  keys: TokenKeys;
}

/** A media occurrence as listed, with the span the capture gave (null: none). */
interface Occurrence {
  id: string;
  span: TokenSpan | null;
}

/** A compaction response: internal (completion_evidence[]) or transport (model_call_metadata[]). */
function isCompactedResponse(value: unknown): value is JsonObject {
  return (
    isObject(value) &&
    (Array.isArray(field(value, "completion_evidence")) || Array.isArray(field(value, "model_call_metadata")))
  );
}

/** A compaction response, bare or as a row's `response`. */
export function isGymCompaction(value: JsonObject): boolean {
  return isCompactedResponse(value) || isCompactedResponse(field(value, "response"));
}

/** The logical rollout id of the compaction contract (bare, or in a row's response), or null. */
export function contractRolloutId(value: JsonObject): string | null {
  const response = isCompactedResponse(value) ? value : field(value, "response");
  const contract = isObject(response) ? field(response, "context_compaction_contract") : undefined;
  const id = isObject(contract) ? field(contract, "rollout_id") : undefined;
  return isNonEmptyString(id) ? id : null;
}

/**
 * The rollout id the compaction runtime gave a row (src/compaction/run-identity.ts, as Gym's agent):
 * `context_compaction_rollout_id`, else `<task>-<rollout>` with `-a<attempt>` after the first
 * attempt; null when the row names neither (then the contract's id is read).
 */
export function runRolloutId(row: JsonObject): string | null {
  const explicit = field(row, "context_compaction_rollout_id");
  if (isNonEmptyString(explicit)) return explicit;
  return gymRolloutId(row);
}

export function fromGymCompaction(
  value: JsonObject,
  context: FormatContext,
): { rollout: Rollout; diagnostics: Diagnostic[] } {
  const bare = isCompactedResponse(value);
  const response = bare ? value : requireObject(value, "response", "");
  const where = bare ? "" : "response.";
  const responseId = field(response, "id");
  const rolloutId =
    (bare ? null : runRolloutId(value)) ??
    contractRolloutId(value) ??
    (isNonEmptyString(responseId) ? responseId : null);
  if (rolloutId === null) {
    throw new FormatError(
      "missing_field",
      bare
        ? "no rollout id: context_compaction_contract.rollout_id and id both absent"
        : "no rollout id: _ng_task_index/_ng_rollout_index, response.context_compaction_contract.rollout_id " +
            "and response.id all absent",
    );
  }
  const reward = bare ? 0 : requireReward(value, "");
  const placeholders = context.mediaTokens === undefined ? null : new Set(context.mediaTokens);
  const boundaries = boundaryNotes(response);
  const diagnostics: Diagnostic[] = [];
  const calls = completionsOf(response, where).map((completion) =>
    toCall(completion, placeholders, boundaries, diagnostics),
  );
  return { rollout: { rollout_id: rolloutId, reward, calls }, diagnostics };
}

function completionsOf(response: JsonObject, where: string): Completion[] {
  const evidence = field(response, "completion_evidence");
  if (evidence === undefined || evidence === null) return transportCompletions(response, where);
  if (!Array.isArray(evidence))
    throw new FormatError("missing_field", `${where}completion_evidence is ${show(evidence)}, expected an array`);
  return evidence.map((record, i) => {
    const at = `${where}completion_evidence[${i}]`;
    if (!isObject(record)) throw new FormatError("missing_field", `${at} is ${show(record)}, expected an object`);
    return { record, where: at, tokens: record, tokensWhere: at, keys: EVIDENCE_KEYS };
  });
}

/**
 * The transport response has no completion_evidence: each call's tokens stay on the one output
 * item that carried them, and its record is the model_call_metadata[] entry at the same position.
 */
function transportCompletions(response: JsonObject, where: string): Completion[] {
  const metadata = field(response, "model_call_metadata");
  if (!Array.isArray(metadata)) {
    throw new FormatError(
      "missing_field",
      `${where}completion_evidence is missing and ${where}model_call_metadata is ${show(metadata)}, expected an array`,
    );
  }
  const output = requireArray(response, "output", where);
  const carriers: number[] = [];
  output.forEach((item, i) => {
    const generated = isObject(item) ? field(item, "generation_token_ids") : undefined;
    if (generated !== undefined && generated !== null) carriers.push(i);
  });
  if (carriers.length !== metadata.length) {
    throw new FormatError(
      "evidence_mismatch",
      `${where}output has ${countOf(carriers.length, "item")} with generation_token_ids, ` +
        `but ${where}model_call_metadata has ${countOf(metadata.length, "entry", "entries")}`,
    );
  }
  return metadata.map((record, k) => {
    const at = `${where}model_call_metadata[${k}]`;
    if (!isObject(record)) throw new FormatError("missing_field", `${at} is ${show(record)}, expected an object`);
    const i = carriers[k];
    return {
      record,
      where: at,
      tokens: output[i] as JsonObject,
      tokensWhere: `${where}output[${i}]`,
      keys: OUTPUT_KEYS,
    };
  });
}

function toCall(
  completion: Completion,
  placeholders: ReadonlySet<number> | null,
  boundaries: ReadonlyMap<string, string>,
  diagnostics: Diagnostic[],
): CanonicalCall {
  const { record, tokens, keys } = completion;
  const id = field(record, "completion_id");
  if (!isNonEmptyString(id))
    throw new FormatError(
      "missing_field",
      `${completion.where}.completion_id is ${show(id)}, expected a non-empty string`,
    );
  const label = `${completion.tokensWhere} (call ${q(id)}): `;
  const call: CanonicalCall = {
    id,
    prompt_token_ids: requireTokenArray(tokens, keys.prompt, label) as CanonicalCall["prompt_token_ids"],
    generation_token_ids: requireTokenArray(tokens, keys.generation, label) as CanonicalCall["generation_token_ids"],
    generation_log_probs: requireTokenArray(tokens, keys.logprobs, label) as CanonicalCall["generation_log_probs"],
  };
  if (tokens !== record) checkPairing(completion, id, call.generation_token_ids.length);
  const event = field(record, "compaction_event_id");
  if (isNonEmptyString(event)) {
    const what = boundaries.get(event);
    diagnostics.push({
      code: "context_compaction",
      call: id,
      detail: `boundary ${event}${what === undefined ? "" : `: ${what}`}`,
    });
  }
  if (field(record, "eligible") === false) {
    // Not for training, by the agent's own word: SPEC's try nobody kept (never trained, never a
    // parent), so its media do not matter either.
    call.kept = false;
    diagnostics.push({ code: "ineligible_completion", call: id, detail: `${completion.where}: eligible is false` });
    return call;
  }
  const media = mediaOf(completion, id, call.prompt_token_ids, placeholders);
  if (media.length > 0) call.media = media;
  return call;
}

/**
 * Transport pairs records and items by position only: the record's output span must end where the
 * item's generation does.
 */
function checkPairing(completion: Completion, id: string, generated: number): void {
  const spans = field(completion.record, "policy_output_spans");
  const last = Array.isArray(spans) && spans.length > 0 ? spans[spans.length - 1] : undefined;
  const end = isObject(last) ? field(last, "end") : undefined;
  if (typeof end === "number" && end !== generated) {
    throw new FormatError(
      "evidence_mismatch",
      `${completion.where} (call ${q(id)}): its policy output span ends at ${end}, ` +
        `but ${completion.tokensWhere} has ${countOf(generated, "generated token")}`,
    );
  }
}

/**
 * The completion's media as canonical items. Without placeholder ids every occurrence needs its
 * own span; with them, the runs in the prompt place the occurrences in order, their count must
 * match, and a span the capture did give must be its run.
 */
function mediaOf(
  completion: Completion,
  id: string,
  prompt: ArrayLike<unknown>,
  placeholders: ReadonlySet<number> | null,
): MediaItem[] {
  const label = `${completion.where} (call ${q(id)}): `;
  const occurrences = occurrencesOf(completion.record, completion.where, label);
  if (placeholders === null) {
    const unplaced = occurrences.filter((o) => o.span === null).length;
    if (unplaced > 0) {
      throw new FormatError(
        "media_unlocated",
        `${label}${countOf(unplaced, "media occurrence")} without placeholder_span_or_position: ` +
          `give --media-token ID (the model's media placeholder token ids) to place them`,
      );
    }
    return occurrences.map((o) => ({ id: o.id, offset: o.span!.offset, length: o.span!.length }));
  }
  const runs = placeholderRuns(prompt, placeholders);
  if (runs.length !== occurrences.length) {
    throw new FormatError(
      "media_unlocated",
      `${label}${countOf(occurrences.length, "media occurrence")} but ${countOf(runs.length, "run")} ` +
        `of placeholder ${tokensWord(placeholders)} in ${completion.tokensWhere}.prompt_token_ids`,
    );
  }
  return occurrences.map((o, k) => {
    const run = runs[k];
    if (o.span !== null && (o.span.offset !== run.offset || o.span.length !== run.length)) {
      throw new FormatError(
        "media_unlocated",
        `${label}media_occurrences[${k}].placeholder_span_or_position is ${showSpan(o.span)}, ` +
          `but run ${k + 1} of placeholder ${tokensWord(placeholders)} is ${showSpan(run)}`,
      );
    }
    return { id: o.id, offset: run.offset, length: run.length };
  });
}

/**
 * The occurrences in list order, which is request (so prompt) order: each `occurrence_ordinal`
 * counts the earlier ones of its media id, and together they list `media_ids`. A list that breaks
 * either cannot be placed in order.
 */
function occurrencesOf(record: JsonObject, where: string, label: string): Occurrence[] {
  const list = field(record, "media_occurrences") ?? [];
  if (!Array.isArray(list))
    throw new FormatError("missing_field", `${where}.media_occurrences is ${show(list)}, expected an array`);
  const seen = new Map<string, number>();
  const occurrences = list.map((occurrence, k): Occurrence => {
    const at = `${where}.media_occurrences[${k}]`;
    if (!isObject(occurrence))
      throw new FormatError("missing_field", `${at} is ${show(occurrence)}, expected an object`);
    const mediaId = field(occurrence, "media_id");
    if (!isNonEmptyString(mediaId))
      throw new FormatError("missing_field", `${at}.media_id is ${show(mediaId)}, expected a non-empty string`);
    const expected = seen.get(mediaId) ?? 0;
    seen.set(mediaId, expected + 1);
    const ordinal = field(occurrence, "occurrence_ordinal");
    if (ordinal !== expected) {
      throw new FormatError(
        "media_unlocated",
        `${label}media_occurrences[${k}] (media ${q(mediaId)}) has occurrence_ordinal ${show(ordinal)}, ` +
          `expected ${expected}: the occurrences are not in prompt order`,
      );
    }
    return { id: mediaId, span: givenSpan(occurrence, at) };
  });
  const ids = field(record, "media_ids");
  if (
    Array.isArray(ids) &&
    (ids.length !== occurrences.length || ids.some((mediaId, k) => mediaId !== occurrences[k].id))
  ) {
    throw new FormatError(
      "media_unlocated",
      `${label}media_occurrences (${countOf(occurrences.length, "occurrence")}) ` +
        `do not list media_ids (${countOf(ids.length, "id")}) in order`,
    );
  }
  return occurrences;
}

/** `placeholder_span_or_position`: `[start, end]` (half-open, as Gym's other spans), one position, or null. */
function givenSpan(occurrence: JsonObject, where: string): TokenSpan | null {
  const value = field(occurrence, "placeholder_span_or_position");
  if (value === undefined || value === null) return null;
  if (Number.isSafeInteger(value)) return { offset: value as number, length: 1 };
  if (Array.isArray(value) && value.length === 2 && value.every((x) => Number.isSafeInteger(x))) {
    return { offset: value[0] as number, length: (value[1] as number) - (value[0] as number) };
  }
  // The offsets' range (inside the prompt, ascending) is SPEC's invalid_media, checked by the planner.
  throw new FormatError(
    "missing_field",
    `${where}.placeholder_span_or_position is ${show(value)}, expected [start, end], a position or null`,
  );
}

/** What each rewrite boundary was, by event_id, for the note on the call that first used it. */
function boundaryNotes(response: JsonObject): Map<string, string> {
  const notes = new Map<string, string>();
  const events = field(response, "boundary_events");
  if (!Array.isArray(events)) return notes;
  for (const event of events) {
    const id = isObject(event) ? field(event, "event_id") : undefined;
    if (!isObject(event) || !isNonEmptyString(id)) continue;
    const reason = field(event, "reason");
    const policy = field(event, "policy_name");
    const parts = [
      isNonEmptyString(reason) ? reason : "rewrite",
      ...(isNonEmptyString(policy) ? [`policy ${policy}`] : []),
    ];
    notes.set(id, parts.join(", "));
  }
  return notes;
}

/** `token 900` or `tokens 900, 901`. */
function tokensWord(placeholders: ReadonlySet<number>): string {
  return `${placeholders.size === 1 ? "token" : "tokens"} ${[...placeholders].join(", ")}`;
}
