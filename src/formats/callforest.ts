// `callforest`: SPEC's canonical rollout, passed through as the same object. Only the top-level
// shape is checked here (the core validates calls, tokens and agents with SPEC's codes).
import type { Diagnostic, Rollout } from "../types.js";
import { FormatError, field, isNonEmptyString, isObject, requireArray, requireReward, show, type JsonObject } from "./values.js";

export function fromCallforest(value: JsonObject): { rollout: Rollout; diagnostics: Diagnostic[] } {
  const id = field(value, "rollout_id");
  if (!isNonEmptyString(id)) throw new FormatError("missing_field", `rollout_id is ${show(id)}, expected a non-empty string`);
  requireReward(value, "");
  requireArray(value, "calls", "");
  return { rollout: value as unknown as Rollout, diagnostics: carriedDiagnostics(value) };
}

/** `convert` writes import diagnostics into a `diagnostics` field; reading them back keeps them. */
function carriedDiagnostics(value: JsonObject): Diagnostic[] {
  const list = field(value, "diagnostics");
  if (!Array.isArray(list)) return [];
  const out: Diagnostic[] = [];
  for (const item of list) {
    const code = isObject(item) ? field(item, "code") : undefined;
    if (!isObject(item) || !isNonEmptyString(code)) continue;
    const call = field(item, "call");
    const detail = field(item, "detail");
    const d: Diagnostic = { code, call: typeof call === "string" ? call : null };
    if (typeof detail === "string") d.detail = detail;
    out.push(d);
  }
  return out;
}
