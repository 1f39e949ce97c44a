// Observation records and gaps that do not decide ownership, as diagnostics: a compaction names
// its summary call (and the calls around it), other record kinds are counted, and every gap
// (gym-formats README §2.3: a free `code`, e.g. Claude Code's `invalid_transcript_record`)
// passes through under its own code. None of them ever rejects a rollout.
import type { Diagnostic } from "../../types.js";
import { field, isNonEmptyString, isObject, show, type JsonObject } from "../values.js";
import type { RefResolver } from "./model-call-refs.js";

/** A ref's model_call_id, or null: an unresolved ref is a gap in the evidence, not a broken rollout. */
function tryResolve(resolve: RefResolver, ref: unknown, where: string): string | null {
  if (ref === undefined || ref === null) return null;
  try {
    return resolve(ref, where);
  } catch {
    return null;
  }
}

/**
 * `context_compaction` on the summary call (the first of `model_calls` that resolves; null when
 * none does), with the invocation, trigger, outcome, the calls before and after, token counts.
 */
export function compactionNote(record: JsonObject, where: string, resolve: RefResolver): Diagnostic {
  const refs = field(record, "model_calls");
  const summaries = (Array.isArray(refs) ? refs : [])
    .map((ref, i) => tryResolve(resolve, ref, `${where}.model_calls[${i}]`))
    .filter((id): id is string => id !== null);
  const invocation = field(record, "invocation_id");
  const parts = [`invocation ${isNonEmptyString(invocation) ? invocation : "unknown"}`];
  const trigger = field(record, "trigger");
  if (isNonEmptyString(trigger)) parts.push(`trigger ${trigger}`);
  const outcome = field(record, "outcome");
  if (isNonEmptyString(outcome) && outcome !== "unknown") parts.push(`outcome ${outcome}`);
  if (summaries.length > 1) parts.push(`summary calls ${summaries.join(" ")}`);
  for (const key of ["before_model_call", "after_model_call"]) {
    const id = tryResolve(resolve, field(record, key), `${where}.${key}`);
    if (id !== null) parts.push(`${key} ${id}`);
  }
  const before = field(record, "tokens_before");
  const after = field(record, "tokens_after");
  if (typeof before === "number" && typeof after === "number") parts.push(`tokens ${before} -> ${after}`);
  return { code: "context_compaction", call: summaries[0] ?? null, detail: parts.join(", ") };
}

/** Records of kinds that say nothing about calls (`tool_call`, `sandbox`, ...), counted by kind. */
export function recordCountsNote(counts: ReadonlyMap<string, number>): Diagnostic[] {
  if (counts.size === 0) return [];
  return [
    { code: "observation_records", call: null, detail: [...counts].map(([kind, n]) => `${kind}: ${n}`).join(", ") },
  ];
}

/** Each `gaps[]` entry under its own code (`observation_gap` for one without a code). */
export function gapNotes(holder: JsonObject, where: string): Diagnostic[] {
  const gaps = field(holder, "gaps");
  if (!Array.isArray(gaps)) return [];
  return gaps.map((gap, i) => {
    const code = isObject(gap) ? field(gap, "code") : undefined;
    if (!isObject(gap) || !isNonEmptyString(code)) {
      return { code: "observation_gap", call: null, detail: `${where}.gaps[${i}] is ${show(gap)}` };
    }
    const parts: string[] = [];
    const invocation = field(gap, "invocation_id");
    const detail = field(gap, "detail");
    if (isNonEmptyString(invocation)) parts.push(`invocation ${invocation}`);
    if (isNonEmptyString(detail)) parts.push(detail);
    const note: Diagnostic = { code, call: null };
    if (parts.length > 0) note.detail = parts.join(": ");
    return note;
  });
}
