// `gym-rollout`: a NeMo Gym rollout row (`response`, `reward`, `_ng_task_index`, ...) or a bare
// Responses object (`"object": "response"`, reward 0). Each output item with a non-empty
// `generation_token_ids` is one call, in output order, all in one agent.
import type { CanonicalCall, Diagnostic, Rollout } from "../types.js";
import {
  FormatError,
  field,
  gymRolloutId,
  isArrayLike,
  isNonEmptyString,
  isObject,
  requireArray,
  requireObject,
  requireReward,
  requireTokenArray,
  show,
  type JsonObject,
} from "./values.js";

export function isBareResponse(value: JsonObject): boolean {
  return field(value, "object") === "response";
}

export function fromGymRollout(value: JsonObject): { rollout: Rollout; diagnostics: Diagnostic[] } {
  const bare = isBareResponse(value);
  const response = bare ? value : requireObject(value, "response", "");
  const where = bare ? "" : "response.";
  const responseId = field(response, "id");
  const rolloutId = (bare ? null : gymRolloutId(value)) ?? (isNonEmptyString(responseId) ? responseId : null);
  if (rolloutId === null) {
    throw new FormatError(
      "missing_field",
      bare
        ? `id is ${show(responseId)}, expected the response id`
        : `no rollout id: _ng_task_index/_ng_rollout_index absent and response.id is ${show(responseId)}`,
    );
  }
  const reward = bare ? 0 : requireReward(value, "");
  return { rollout: { rollout_id: rolloutId, reward, calls: responseCalls(response, where) }, diagnostics: [] };
}

/** The calls of one Responses object, in output order. `where` prefixes paths in messages. */
function responseCalls(response: JsonObject, where: string): CanonicalCall[] {
  const output = requireArray(response, "output", where);
  const calls: CanonicalCall[] = [];
  const used = new Set<string>();
  output.forEach((item, i) => {
    if (!isObject(item)) return;
    const generated = field(item, "generation_token_ids");
    if (generated === undefined || generated === null) return;
    const itemWhere = `${where}output[${i}]`;
    if (!isArrayLike(generated)) {
      throw new FormatError(
        "missing_field",
        `${itemWhere}.generation_token_ids is ${show(generated)}, expected an array`,
      );
    }
    if (generated.length === 0) return;
    const itemId = field(item, "id");
    // Output item ids are the natural call ids; an item without one (or a repeated one) gets its
    // path, and `#2`, `#3`, ... after it in the odd case that an earlier item's id is that path.
    let id = isNonEmptyString(itemId) && !used.has(itemId) ? itemId : itemWhere;
    for (let n = 2; used.has(id); n++) id = `${itemWhere}#${n}`;
    used.add(id);
    const label = `${itemWhere} (call ${id}): `;
    calls.push({
      id,
      prompt_token_ids: requireTokenArray(item, "prompt_token_ids", label) as CanonicalCall["prompt_token_ids"],
      generation_token_ids: generated as CanonicalCall["generation_token_ids"],
      generation_log_probs: requireTokenArray(
        item,
        "generation_log_probs",
        label,
      ) as CanonicalCall["generation_log_probs"],
    });
  });
  return calls;
}
