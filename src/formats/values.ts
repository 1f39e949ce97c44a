// Small checks on parsed JSON values, and the error adapters throw to reject a value.
import type { RejectionCode } from "../types.js";
import { shortened } from "../messages.js";

export type JsonObject = Record<string, unknown>;

/** Thrown inside an adapter; toCanonical turns it into a FormatRejection. */
export class FormatError extends Error {
  constructor(
    readonly code: string,
    readonly detail: string,
    readonly reason: RejectionCode = "invalid_rollout",
  ) {
    super(detail);
  }
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !ArrayBuffer.isView(value);
}

/** A token or logprob array as any reader may hand it over: number[] or a typed array. */
export function isArrayLike(value: unknown): value is ArrayLike<unknown> {
  return Array.isArray(value) || (ArrayBuffer.isView(value) && !(value instanceof DataView));
}

export function isNonEmptyString(value: unknown): value is string {
  return typeof value === "string" && value.length > 0;
}

/** Own property only: keys like `__proto__` or `constructor` never reach the prototype chain. */
export function field(object: JsonObject, key: string): unknown {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}

/** Quotes an id or name for a one-line message (a newline in the data must not split it). */
export const q = (value: unknown): string => JSON.stringify(value) ?? String(value);

/** A short rendering of a value for messages (never the whole value). */
export function show(value: unknown): string {
  if (value === undefined) return "missing";
  if (Array.isArray(value)) return "an array";
  if (ArrayBuffer.isView(value)) return "a typed array";
  if (value === null) return "null";
  if (typeof value === "object") return "an object";
  if (typeof value === "number") return showNumber(value);
  return shortened(JSON.stringify(value) ?? String(value));
}

/**
 * A number as JSON.parse read it, saying so when that is not what the text held: past ±1.8e308
 * (`1e400`) it reads as Infinity, which JSON.stringify writes as null; an integer past 2^53 reads
 * as the nearest double (`9007199254740993` as 9007199254740992).
 */
function showNumber(value: number): string {
  if (!Number.isFinite(value)) return "a number out of range (such as 1e400)";
  if (Number.isInteger(value) && !Number.isSafeInteger(value))
    return `an integer past 2^53, read as ${BigInt(value)} (its last digits are not exact)`;
  return String(value);
}

export function requireObject(object: JsonObject, key: string, where: string): JsonObject {
  const value = field(object, key);
  if (!isObject(value)) throw new FormatError("missing_field", `${where}${key} is ${show(value)}, expected an object`);
  return value;
}

export function requireArray(object: JsonObject, key: string, where: string): unknown[] {
  const value = field(object, key);
  if (!Array.isArray(value))
    throw new FormatError("missing_field", `${where}${key} is ${show(value)}, expected an array`);
  return value;
}

export function requireTokenArray(object: JsonObject, key: string, where: string): ArrayLike<unknown> {
  const value = field(object, key);
  if (!isArrayLike(value))
    throw new FormatError("missing_field", `${where}${key} is ${show(value)}, expected an array`);
  return value;
}

export function requireReward(object: JsonObject, where: string): number {
  const value = field(object, "reward");
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new FormatError("missing_field", `${where}reward is ${show(value)}, expected a finite number`);
  }
  return value;
}

/**
 * A non-negative integer as pydantic's lax mode takes one (an int, or a string of its digits),
 * else null; `undefined` and `null` give null too, so callers tell those apart first.
 */
export function laxIndex(v: unknown): number | null {
  const n = typeof v === "string" && /^\s*\d+\s*$/.test(v) ? Number(v) : v;
  return typeof n === "number" && Number.isSafeInteger(n) && n >= 0 ? n : null;
}

/** `<_ng_task_index>-<_ng_rollout_index>` when both are there, else null (no attempt: see gymRolloutId). */
export function gymIndexId(row: JsonObject): string | null {
  const task = field(row, "_ng_task_index");
  const rollout = field(row, "_ng_rollout_index");
  const ok = (v: unknown) => (typeof v === "number" && Number.isInteger(v)) || isNonEmptyString(v);
  return ok(task) && ok(rollout) ? `${task}-${rollout}` : null;
}

/**
 * Gym's rollout id of a row (`maybe_rollout_id_from_run_body` in `nemo_gym/rollout_correlation.py`):
 * `<_ng_task_index>-<_ng_rollout_index>`, with `-a<attempt>` when `_ng_attempt_index` is above 0.
 * Gym's collector stamps that index on a resumed retry and copies it onto the rollout row, and
 * keys the retry's token capture by this id, so two attempts of one rollout stay apart. The
 * index is an int or a string of its ASCII digits; anything else (`" 1"`, `1e400`, `2^53 + 1`) is
 * an error that says what was given.
 */
export function gymRolloutId(row: JsonObject): string | null {
  const id = gymIndexId(row);
  if (id === null) return null;
  const raw = field(row, "_ng_attempt_index");
  if (raw === undefined || raw === null) return id;
  // An int, or a string of its digits alone: " 1" and "1\n" are not taken for 1.
  const attempt = typeof raw === "string" && !/^[0-9]+$/.test(raw) ? null : laxIndex(raw);
  if (attempt === null)
    throw new FormatError("missing_field", `_ng_attempt_index is ${show(raw)}, expected a non-negative integer`);
  return attempt > 0 ? `${id}-a${attempt}` : id;
}
