// What a failed run had recorded: runAgent attaches it to the error it throws (`error.partial`),
// so a caller can keep or inspect the good calls' evidence instead of losing the episode.
import type { Rollout } from "../types.js";
import type { EvidenceRecord } from "./evidence-types.js";

export interface PartialRun {
  complete: false;
  /** The call that was being made when the run failed (null: before or between calls). */
  failed_call: string | null;
  /** The evidence of the calls that completed, with `stop_reason: "failed"`. */
  evidence: EvidenceRecord;
  /** Their rollout, or null when even the recorded calls do not make one (the reason is in `rollout_error`). */
  rollout: Rollout | null;
  rollout_error: string | null;
}

/** The error runAgent threw, with what the run had recorded before it (see `partialRunOf`). */
export interface ErrorWithPartialRun extends Error {
  partial: PartialRun;
}

/** The partial run attached to an error runAgent threw, if any. */
export function partialRunOf(error: unknown): PartialRun | undefined {
  const partial = (error as { partial?: PartialRun } | null)?.partial;
  return partial && partial.complete === false ? partial : undefined;
}

/** Attaches `partial` to `error` (an Error gets a `partial` property; anything else is wrapped in one). */
export function withPartialRun(error: unknown, partial: PartialRun): Error {
  const target = error instanceof Error ? error : new Error(String(error));
  Object.defineProperty(target, "partial", { value: partial, enumerable: false, configurable: true, writable: true });
  return target;
}
