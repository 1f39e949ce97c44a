// A rollout's identity as Gym's compaction agent reads it from the run body (PR #2616,
// `SimpleAgentWithCompactionRunRequest` and `nemo_gym/rollout_correlation.py`): the rollout id is
// `context_compaction_rollout_id`, else `<_ng_task_index>-<_ng_rollout_index>` (with `-a<attempt>`
// when `_ng_attempt_index` > 0), so GRPO still groups a task's rollouts; the contract's group,
// task, rollout and attempt come from the `context_compaction_*` fields.
import { laxIndex } from "../formats/values.js";
import { CompactionError } from "./errors.js";

export interface RunIdentity {
  /** Null: the body names none (the runtime derives one from its responses). */
  rolloutId: string | null;
  /** The ContextCompactionContract's identity fields, as `/run` returns them. */
  contract: {
    group_id: string | null;
    task_id: string | null;
    rollout_index: number | null;
    attempt_index: number | null;
  };
}

export const NO_IDENTITY: RunIdentity = Object.freeze({
  rolloutId: null,
  contract: Object.freeze({ group_id: null, task_id: null, rollout_index: null, attempt_index: null }),
});

const where = (field: string) => `resources run body: ${field}`;

function optionalString(body: Record<string, unknown>, field: string): string | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== "string") throw new CompactionError(`${where(field)} must be a string (got ${JSON.stringify(v)})`);
  return v;
}

/** Gym's `Field(ge=0)` int: a non-negative integer (a whole-number string, as pydantic's lax mode takes). */
function optionalIndex(body: Record<string, unknown>, field: string): number | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  const n = laxIndex(v);
  if (n === null)
    throw new CompactionError(`${where(field)} must be a non-negative integer (got ${JSON.stringify(v)})`);
  return n;
}

/** Python's f-string of a task or rollout index: an int as digits, a string as it is. */
function indexText(v: unknown, field: string): string {
  if (typeof v === "number" && Number.isSafeInteger(v)) return String(v);
  if (typeof v === "string" && v !== "") return v;
  throw new CompactionError(`${where(field)} must be an integer or a non-empty string (got ${JSON.stringify(v)})`);
}

export function runIdentity(body: Readonly<Record<string, unknown>>): RunIdentity {
  const b = body as Record<string, unknown>;
  const explicit = optionalString(b, "context_compaction_rollout_id");
  if (explicit === "") throw new CompactionError(`${where("context_compaction_rollout_id")} must not be empty`);
  let rolloutId = explicit;
  const task = b._ng_task_index;
  const rollout = b._ng_rollout_index;
  if (rolloutId === null && task !== undefined && task !== null && rollout !== undefined && rollout !== null) {
    rolloutId = `${indexText(task, "_ng_task_index")}-${indexText(rollout, "_ng_rollout_index")}`;
    const attempt = optionalIndex(b, "_ng_attempt_index");
    if (attempt !== null && attempt > 0) rolloutId += `-a${attempt}`;
  }
  return {
    rolloutId,
    contract: {
      group_id: optionalString(b, "context_compaction_group_id"),
      task_id: optionalString(b, "context_compaction_task_id"),
      rollout_index: optionalIndex(b, "context_compaction_rollout_index"),
      attempt_index: optionalIndex(b, "context_compaction_attempt_index"),
    },
  };
}
