// Turning one parsed JSON value into SPEC's canonical rollout, whatever format it came in.
//
// The `rows` command (and any reader) calls, per input value:
//   const result = toCanonical(value, from, { tokens, mediaTokens });   // from: FromOption, default "auto"
//   if (result.ok) report = usePlan(cf, result, line, (plan, report) => ...)   // report: withImport's
//   else report = reportOfImportRejection(result, line);
// Node readers: readRollouts() in ./read.ts yields { where, line, result } per input value,
// tokenDirectory(dir) in ./tokens-dir.ts is the `--tokens DIR` source. This module stays free of
// Node APIs so the browser build can use it.
import type { Callforest, ForestCall, Plan, PlanOptions, Report } from "../types.js";
import { reportOfRejection } from "../plan/report.js";
import { callAtFault } from "../messages.js";
import { fromCallforest } from "./callforest.js";
import { contractRolloutId, fromGymCompaction, isGymCompaction } from "./gym-compaction.js";
import { fromGymObserved, isGymObserved } from "./gym-observed.js";
import { recordedParentNotes } from "./gym-capture/recorded-lineage.js";
import { fromGymRollout, isBareResponse } from "./gym-rollout.js";
import {
  FROM_OPTIONS,
  type ConvertResult,
  type Converted,
  type FormatContext,
  type FormatName,
  type FormatRejection,
  type FromOption,
} from "./types.js";
import { FormatError, field, gymIndexId, isNonEmptyString, isObject, show } from "./values.js";

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
              `no ng_agent_observations.records[] (gym-observed)`
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
  const indexed = gymIndexId(value);
  if (indexed !== null) return indexed;
  const capture = field(value, "ng_model_call_capture");
  const captured = isObject(capture) ? field(capture, "rollout_id") : undefined;
  if (isNonEmptyString(captured)) return captured;
  const logical = contractRolloutId(value);
  if (logical !== null) return logical;
  const response = isBareResponse(value) ? value : field(value, "response");
  const responseId = isObject(response) ? field(response, "id") : undefined;
  return isNonEmptyString(responseId) ? responseId : null;
}

/** The report of a value rejected before planning (SPEC's report with zero counts). */
export function reportOfImportRejection(rejection: FormatRejection, line?: number): Report {
  return reportOfRejection(rejection.rolloutId, 0, rejection.reason, rejection.detail, line);
}

/**
 * Plans an imported rollout: the plan (the caller releases it) and its report, withImport's (the
 * import's diagnostics and token sources in).
 */
export function planImported(
  cf: Callforest,
  imported: Converted,
  line: number | undefined,
  layout: Omit<PlanOptions, "line"> = {},
): { plan: Plan; report: Report } {
  const plan = cf.plan(imported.rollout, line === undefined ? layout : { ...layout, line });
  try {
    // The forest is built on first access: only a capture that recorded parents asks for it.
    const forest = imported.recordedParents?.size ? plan.forest : undefined;
    return { plan, report: withImport(plan.report, imported, forest) };
  } catch (error) {
    plan.release();
    throw error;
  }
}

/** planImported, handing `use` the plan and its report, then releasing the plan. */
export function usePlan<T>(
  cf: Callforest,
  imported: Converted,
  line: number | undefined,
  use: (plan: Plan, report: Report) => T,
  layout: Omit<PlanOptions, "line"> = {},
): T {
  const { plan, report } = planImported(cf, imported, line, layout);
  try {
    return use(plan, report);
  } finally {
    plan.release();
  }
}

/**
 * The core's report for an imported rollout: the import diagnostics in front of its own (with,
 * given the forest, `recorded_parent_differs` where a recorded parent is not the exact-prefix
 * one), and a rejection that names a call also names where that call's tokens were read
 * (gym-observed).
 */
export function withImport(
  report: Report,
  imported: Pick<Converted, "diagnostics" | "sources" | "recordedParents">,
  forest?: readonly ForestCall[],
): Report {
  const { sources, recordedParents } = imported;
  const lineage =
    recordedParents !== undefined && forest !== undefined && report.status === "ok"
      ? recordedParentNotes(recordedParents, forest)
      : [];
  const diagnostics = lineage.length === 0 ? imported.diagnostics : [...imported.diagnostics, ...lineage];
  let out = diagnostics.length === 0 ? report : { ...report, diagnostics: [...diagnostics, ...report.diagnostics] };
  const fault = report.status === "rejected" && report.detail !== undefined ? callAtFault(report.detail) : null;
  const source = fault?.id != null ? sources?.get(fault.id) : undefined;
  if (source !== undefined) out = { ...out, detail: `${report.detail} (token entry ${source})` };
  return out;
}
