// Types shared by the format adapters: what goes in (one parsed JSON value plus a context) and
// what comes out (a canonical rollout with import diagnostics, or one rejection).
import type { Diagnostic, RejectionCode, Rollout } from "../types.js";

/** The formats an adapter exists for. */
export type FormatName = "callforest" | "gym-rollout" | "gym-observed" | "gym-compaction" | "atif";
/** What `--from` accepts: a format, or `auto` (detect per value). */
export type FromOption = FormatName | "auto";

export const FORMAT_NAMES: readonly FormatName[] = [
  "callforest",
  "gym-rollout",
  "gym-observed",
  "gym-compaction",
  "atif",
];
export const FROM_OPTIONS: readonly FromOption[] = [...FORMAT_NAMES, "auto"];

/** A token file's line: its value, or why it is not JSON (`not JSON at byte N: ...`, as every reader says it). */
export type TokenLine = { line: number; value: unknown } | { line: number; error: string };

/** The token entries of one rollout (gym-observed): a `<rollout_id>.tokens.jsonl` file. */
export interface TokenEntries {
  /** Name to use in messages (the file's path). */
  file: string;
  lines: TokenLine[];
}

/**
 * Where gym-observed finds token entries. `load` returns null when the rollout has none (no file).
 * Token arrays inside the values may be plain arrays or typed arrays: adapters read only `.length`.
 */
export interface TokenSource {
  /** Names the place searched, for messages ("tokens/<id>.tokens.jsonl"). */
  describe(rolloutId: string): string;
  load(rolloutId: string): TokenEntries | null;
  /** Why load() found nothing, in the words of where the source came from (default: "<describe> not found"). */
  notFound?(rolloutId: string): string;
}

/**
 * Where atif finds the trajectory files an input references (`trajectory_path`,
 * `continued_trajectory_ref`): beside the input, by the input's reader (src/ingest for files).
 */
export interface TrajectoryFiles {
  /** Names the file a path stands for, for messages. */
  describe(path: string): string;
  /** The file's parsed JSON value; null when there is no such file. Throws a FormatError when it cannot be read. */
  load(path: string): unknown;
  /** Harbor's verifier reward for the trial the input belongs to, when its result is beside it. */
  reward?(): { reward: number; where: string } | null;
}

export interface FormatContext {
  /** Token entries for gym-observed (`--tokens DIR`). */
  tokens?: TokenSource;
  /**
   * The model's media placeholder token ids (`--media-token ID[,ID...]`): gym-compaction places
   * each media occurrence on a maximal run of them in the prompt, when the capture gives no span.
   */
  mediaTokens?: readonly number[];
  /** atif: the trajectory files beside the input (subagents, continuations) and its trial's reward. */
  trajectories?: TrajectoryFiles;
  /** atif: the reward of every rollout read (`--reward`), over what the trial's result says. */
  reward?: number;
}

/** An accepted value: SPEC's canonical rollout plus notes to add to its report. */
export interface Converted {
  ok: true;
  format: FormatName;
  rollout: Rollout;
  /** Import notes (`unowned_call`, observation gaps, other record kinds, ...), never failures. */
  diagnostics: Diagnostic[];
  /**
   * Where each call's token arrays were read, by call id, when that is not the input line itself
   * (gym-observed: `token-file:line`). A rejection naming the call then names that place too.
   */
  sources?: ReadonlyMap<string, string>;
  /**
   * The parents the capture recorded, by call id (gym-observed: Gym's `parent_call_id`), with
   * where. Evidence only: withImport compares them with the forest's exact-prefix parents.
   */
  recordedParents?: ReadonlyMap<string, { parent: string; where: string }>;
}

/** A value that could not be turned into a canonical rollout. */
export interface FormatRejection {
  ok: false;
  /** The format tried; null when auto detection matched none. */
  format: FormatName | null;
  /** SPEC's code for the report (`invalid_rollout`, `duplicate_call_id`, `malformed_json`). */
  reason: RejectionCode;
  /** Finer code for tools and tests: `missing_field`, `unknown_model_call`, `unknown_format`, ... */
  code: string;
  /** One line naming what and where inside the value (or token file:line). */
  detail: string;
  /** The rollout id when it was known before the failure. */
  rolloutId: string | null;
}

export type ConvertResult = Converted | FormatRejection;
