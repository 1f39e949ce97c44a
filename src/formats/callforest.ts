// `callforest`: SPEC's canonical rollout, passed through as the same object. Nothing is checked
// here: the planner checks every field with SPEC's codes, so the CLI and the API report a bad
// rollout the same way.
import type { Diagnostic, Rollout } from "../types.js";
import { field, isNonEmptyString, isObject, type JsonObject } from "./values.js";

export function fromCallforest(value: JsonObject): { rollout: Rollout; diagnostics: Diagnostic[] } {
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
