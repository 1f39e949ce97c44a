// Turning one parsed JSON value into SPEC's canonical rollout, whatever format it came in:
//   const result = toCanonical(value, from, { tokens, mediaTokens });   // from: FromOption, default "auto"
// Planning the result is src/plan-imported.ts's (usePlan, reportOfImportRejection); the Node
// readers are in src/ingest (readRollouts() in read.ts) and src/files (tokenDirectory(), trajectoryFiles()).
// Like all of src/formats, free of Node APIs and of planning, so the browser build can use it.
import { fromAtif, isAtif } from "./atif.js";
import { fromCallforest } from "./callforest.js";
import { contractRolloutId, fromGymCompaction, isGymCompaction } from "./gym-compaction.js";
import { fromGymObserved, isGymObserved } from "./gym-observed.js";
import { fromGymRollout, isBareResponse } from "./gym-rollout.js";
import {
  FROM_OPTIONS,
  type ConvertResult,
  type FormatContext,
  type FormatName,
  type FormatRejection,
  type FromOption,
} from "./types.js";
import { FormatError, field, gymIndexId, gymRolloutId, isNonEmptyString, isObject, show } from "./values.js";

export * from "./types.js";

/**
 * Which format a value is in, or null. A value shaped like SPEC's canonical rollout (a rollout_id
 * and a calls[] array) is canonical whatever else it carries, since SPEC ignores unknown fields;
 * then the most specific Gym shape first (an observed row also has a response, and a compaction
 * response is a Responses object too).
 */
export function detectFormat(value: unknown): FormatName | null {
  if (!isObject(value)) return null;
  if (isNonEmptyString(field(value, "rollout_id")) && Array.isArray(field(value, "calls"))) return "callforest";
  if (isGymObserved(value)) return "gym-observed";
  // A `calls` field means a canonical rollout, however broken (the planner then names what is
  // wrong); neither Gym format has one, so a stray `response` cannot turn it into other data.
  // (`calls: null` is read as no calls.)
  const calls = field(value, "calls");
  if (calls !== undefined && calls !== null) return "callforest";
  if (isGymCompaction(value)) return "gym-compaction";
  if (isAtif(value)) return "atif";
  if (isBareResponse(value) || isObject(field(value, "response"))) return "gym-rollout";
  return null;
}

/** Checks a `--from` value; null when it is not one of FROM_OPTIONS. */
export function parseFrom(text: string): FromOption | null {
  return (FROM_OPTIONS as readonly string[]).includes(text) ? (text as FromOption) : null;
}

/** One parsed JSON value (a line or a .json file) to a canonical rollout, or one rejection. */
export function toCanonical(value: unknown, from: FromOption = "auto", context: FormatContext = {}): ConvertResult {
  const format = from === "auto" ? detectFormat(value) : from;
  if (format === null) {
    return rejection(
      null,
      value,
      new FormatError(
        "unknown_format",
        isObject(value)
          ? `not a known format: no calls[] (callforest), no response or "object": "response" (gym-rollout), ` +
              `no ng_agent_observations.records[] (gym-observed), no steps[] (atif)`
          : `the value is ${show(value)}, expected a JSON object`,
      ),
    );
  }
  try {
    if (!isObject(value)) throw new FormatError("invalid_value", `the value is ${show(value)}, expected a JSON object`);
    if (format === "gym-observed") {
      const { rollout, diagnostics, sources, recordedParents } = fromGymObserved(value, context);
      return { ok: true, format, rollout, diagnostics, sources, recordedParents };
    }
    if (format === "gym-compaction") {
      const { rollout, diagnostics } = fromGymCompaction(value, context);
      return { ok: true, format, rollout, diagnostics };
    }
    if (format === "atif") {
      const { rollout, diagnostics } = fromAtif(value, context);
      return { ok: true, format, rollout, diagnostics };
    }
    const { rollout, diagnostics } = format === "callforest" ? fromCallforest(value) : fromGymRollout(value);
    return { ok: true, format, rollout, diagnostics };
  } catch (error) {
    if (error instanceof FormatError) return rejection(format, value, error);
    throw error;
  }
}

function rejection(format: FormatName | null, value: unknown, error: FormatError): FormatRejection {
  return {
    ok: false,
    format,
    reason: error.reason,
    code: error.code,
    detail: format === null || error.code === "invalid_value" ? error.detail : `${format}: ${error.detail}`,
    rolloutId: knownRolloutId(value),
  };
}

/** The rollout id a rejected value would have had, when it can be told. */
function knownRolloutId(value: unknown): string | null {
  if (!isObject(value)) return null;
  const own = field(value, "rollout_id");
  if (isNonEmptyString(own)) return own;
  // The compaction runtime's own id comes first, as fromGymCompaction reads it (runRolloutId).
  const runtime = field(value, "context_compaction_rollout_id");
  if (isNonEmptyString(runtime)) return runtime;
  let indexed: string | null;
  try {
    indexed = gymRolloutId(value);
  } catch {
    indexed = gymIndexId(value); // the attempt index is what was wrong
  }
  if (indexed !== null) return indexed;
  const capture = field(value, "ng_model_call_capture");
  const captured = isObject(capture) ? field(capture, "rollout_id") : undefined;
  if (isNonEmptyString(captured)) return captured;
  const trajectory = field(value, "trajectory_id") ?? field(value, "session_id");
  if (isAtif(value) && isNonEmptyString(trajectory)) return trajectory;
  const logical = contractRolloutId(value);
  if (logical !== null) return logical;
  const response = isBareResponse(value) ? value : field(value, "response");
  const responseId = isObject(response) ? field(response, "id") : undefined;
  return isNonEmptyString(responseId) ? responseId : null;
}
