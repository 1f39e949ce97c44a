// Model-call references (gym-formats README §2.4, `ModelCallRef`) to model_call_ids: by
// `model_call_id`, or by `(model_ref, response_id)` through `ng_model_call_capture.calls[]`, as
// Gym's own join does. A ref that gives both must agree with the captured call.
import { FormatError, field, isNonEmptyString, isObject, show, type JsonObject } from "../values.js";
import { q } from "../values.js";

/** Resolves one ref (`where` names it in messages) to a model_call_id, or throws. */
export type RefResolver = (ref: unknown, where: string) => string;

/**
 * A model_ref as a key: a string as it is, `{ type, name }` as "type/name" (strings, either may
 * be missing); null when it is anything else.
 */
function refKey(ref: unknown): string | null {
  if (isNonEmptyString(ref)) return ref;
  if (!isObject(ref)) return null;
  const type = field(ref, "type") ?? "";
  const name = field(ref, "name") ?? "";
  return typeof type === "string" && typeof name === "string" ? `${type}/${name}` : null;
}

/** The ref's model_ref as a key; null when it has none; throws when it is malformed. */
function modelKeyOf(ref: JsonObject, where: string): string | null {
  const modelRef = field(ref, "model_ref");
  if (modelRef === undefined || modelRef === null) return null;
  const key = refKey(modelRef);
  if (key === null)
    throw new FormatError(
      "missing_field",
      `${where}: model_ref is ${show(modelRef)}, expected a name or { type, name } strings`,
    );
  return key;
}

/** `tokenIds` are the ids with token entries; `tokenFile` names their file in messages. */
export function refResolver(
  captureCalls: readonly unknown[],
  tokenIds: ReadonlySet<string>,
  tokenFile: string,
): RefResolver {
  const byId = new Map<string, { index: number; call: JsonObject }>();
  const byResponse = new Map<string, { index: number; call: JsonObject }[]>();
  captureCalls.forEach((call, index) => {
    if (!isObject(call)) return;
    const id = field(call, "model_call_id");
    if (isNonEmptyString(id) && !byId.has(id)) byId.set(id, { index, call });
    const responseId = field(call, "response_id");
    if (isNonEmptyString(responseId)) {
      const list = byResponse.get(responseId) ?? [];
      list.push({ index, call });
      byResponse.set(responseId, list);
    }
  });

  return (ref, where) => {
    if (!isObject(ref))
      throw new FormatError("missing_field", `${where} is ${show(ref)}, expected a model-call ref object`);
    const id = field(ref, "model_call_id");
    const responseId = field(ref, "response_id");
    const model = modelKeyOf(ref, where);
    if (isNonEmptyString(id)) {
      const captured = byId.get(id);
      if (captured === undefined && !tokenIds.has(id)) {
        throw new FormatError(
          "unknown_model_call",
          `${where}: model_call_id ${q(id)} is in neither ng_model_call_capture.calls nor ${tokenFile}`,
        );
      }
      if (captured !== undefined)
        checkAgrees(captured, id, isNonEmptyString(responseId) ? responseId : null, model, where);
      return id;
    }
    if (!isNonEmptyString(responseId)) {
      throw new FormatError("missing_field", `${where}: needs model_call_id, or model_ref and response_id`);
    }
    const matches = (byResponse.get(responseId) ?? []).filter(
      (m) => model === null || refKey(field(m.call, "model_ref")) === model,
    );
    const named = model === null ? "" : ` (model_ref ${q(model)})`;
    if (matches.length === 0) {
      throw new FormatError(
        "unknown_model_call",
        `${where}: response_id ${q(responseId)}${named} matches no ng_model_call_capture.calls entry`,
      );
    }
    if (matches.length > 1) {
      const at = matches.map((m) => m.index).join(", ");
      throw new FormatError(
        "ambiguous_model_call",
        `${where}: response_id ${q(responseId)}${named} matches ng_model_call_capture.calls[${at}]`,
      );
    }
    const resolved = field(matches[0].call, "model_call_id");
    if (!isNonEmptyString(resolved)) {
      throw new FormatError(
        "missing_field",
        `${where}: ng_model_call_capture.calls[${matches[0].index}].model_call_id is ${show(resolved)}`,
      );
    }
    return resolved;
  };
}

/** A ref with a model_call_id and a response_id or model_ref: the captured call must have them. */
function checkAgrees(
  captured: { index: number; call: JsonObject },
  id: string,
  responseId: string | null,
  model: string | null,
  where: string,
): void {
  const at = `ng_model_call_capture.calls[${captured.index}]`;
  const theirs = field(captured.call, "response_id");
  if (responseId !== null && isNonEmptyString(theirs) && theirs !== responseId) {
    throw new FormatError(
      "model_call_ref_conflict",
      `${where}: model_call_id ${q(id)} is ${at}, whose response_id is ${q(theirs)}, not ${q(responseId)}`,
    );
  }
  const theirModel = refKey(field(captured.call, "model_ref"));
  if (model !== null && theirModel !== null && theirModel !== model) {
    throw new FormatError(
      "model_call_ref_conflict",
      `${where}: model_call_id ${q(id)} is ${at}, whose model_ref is ${q(theirModel)}, not ${q(model)}`,
    );
  }
}
