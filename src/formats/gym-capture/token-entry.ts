// One line of a `<rollout_id>.tokens.jsonl` file as Gym's TokenEntry, schema versions 1 to 5
// (gym-formats README §1.2). Fields are read where present, as Gym's newest (v5) reader reads
// them: a version only bounds what is accepted, since every field is optional past v1's.
import {
  FormatError,
  field,
  isNonEmptyString,
  isObject,
  q,
  requireTokenArray,
  show,
  type JsonObject,
} from "../values.js";
import type { Time } from "./created-at.js";
import { timeOf } from "./created-at.js";

/** The schema versions callforest reads; a later one is refused, not guessed at. */
export const NEWEST_SCHEMA_VERSION = 5;

export type ParentResolution = "root" | "resolved" | "unresolved";
const RESOLUTIONS: readonly string[] = ["root", "resolved", "unresolved"];
const HEX_DIGEST = /^[0-9a-f]{64}$/;

export interface TokenEntry {
  id: string;
  /** 1-based line in the token file. */
  line: number;
  /** `file:line`. */
  where: string;
  /** `file:line (call "id"): `, the start of every message about this entry. */
  label: string;
  /** `schema_version`, or null when the entry has none (Gym's first drafts). */
  version: number | null;
  createdAt: Time;
  /** The prompt as stored: in a delta entry, only the suffix after the parent's full sequence. */
  storedPrompt: ArrayLike<unknown>;
  generation: ArrayLike<unknown>;
  logprobs: ArrayLike<unknown>;
  /** The value as given (any non-null value; the planner validates it). */
  routedExperts: unknown;
  /** Gym's recorded lineage: evidence to compare with, never what links calls. */
  parentCallId: string | null;
  resolution: ParentResolution | null;
  resolutionReason: string;
  promptIsDelta: boolean;
  /** `len(full prompt) + len(generation)` and the token digest, as recorded; null when absent. */
  cumLen: number | null;
  digest: string | null;
}

/** Reads and checks one parsed line; `rolloutId` is the file's rollout (an entry naming another is misfiled). */
export function readTokenEntry(value: unknown, where: string, line: number, rolloutId: string): TokenEntry {
  if (!isObject(value))
    throw new FormatError("missing_field", `${where}: token entry is ${show(value)}, expected an object`);
  const id = field(value, "model_call_id");
  if (!isNonEmptyString(id))
    throw new FormatError("missing_field", `${where}: model_call_id is ${show(id)}, expected a non-empty string`);
  const label = `${where} (call ${q(id)}): `;
  const version = schemaVersion(value, label);
  const owner = field(value, "rollout_id");
  if (owner !== undefined && owner !== rolloutId) {
    throw new FormatError(
      "token_entry_rollout_mismatch",
      `${label}rollout_id is ${show(owner)}, but the file holds rollout ${q(rolloutId)}`,
    );
  }
  const entry: TokenEntry = {
    id,
    line,
    where,
    label,
    version,
    storedPrompt: requireTokenArray(value, "prompt_token_ids", label),
    generation: requireTokenArray(value, "generation_token_ids", label),
    logprobs: requireTokenArray(value, "generation_log_probs", label),
    createdAt: timeOf(field(value, "created_at"), label),
    routedExperts: field(value, "routed_experts") ?? null,
    parentCallId: optionalString(value, "parent_call_id", label),
    resolution: resolutionOf(value, label),
    resolutionReason: optionalString(value, "parent_resolution_reason", label) ?? "",
    promptIsDelta: optionalBoolean(value, "prompt_is_delta", label),
    cumLen: optionalCount(value, "cum_len", label),
    digest: digestOf(value, label),
  };
  return entry;
}

function schemaVersion(value: JsonObject, label: string): number | null {
  const version = field(value, "schema_version");
  if (version === undefined) return null;
  if (typeof version !== "number" || !Number.isInteger(version)) {
    throw new FormatError("missing_field", `${label}schema_version is ${show(version)}, expected an integer`);
  }
  if (version < 1 || version > NEWEST_SCHEMA_VERSION) {
    throw new FormatError(
      "unsupported_schema_version",
      `${label}schema_version ${version} is not one callforest reads (TokenEntry 1 to ${NEWEST_SCHEMA_VERSION})`,
    );
  }
  return version;
}

/** A string field that may be absent or null; "" reads as absent (Gym requires ids non-empty). */
function optionalString(value: JsonObject, key: string, label: string): string | null {
  const got = field(value, key);
  if (got === undefined || got === null || got === "") return null;
  if (typeof got !== "string")
    throw new FormatError("missing_field", `${label}${key} is ${show(got)}, expected a string or null`);
  return got;
}

function optionalBoolean(value: JsonObject, key: string, label: string): boolean {
  const got = field(value, key);
  if (got === undefined || got === null) return false;
  if (typeof got !== "boolean")
    throw new FormatError("missing_field", `${label}${key} is ${show(got)}, expected true or false`);
  return got;
}

function optionalCount(value: JsonObject, key: string, label: string): number | null {
  const got = field(value, key);
  if (got === undefined || got === null) return null;
  if (typeof got !== "number" || !Number.isSafeInteger(got) || got < 0) {
    throw new FormatError("missing_field", `${label}${key} is ${show(got)}, expected a non-negative integer or null`);
  }
  return got;
}

function resolutionOf(value: JsonObject, label: string): ParentResolution | null {
  const got = field(value, "parent_resolution");
  if (got === undefined || got === null) return null;
  if (typeof got !== "string" || !RESOLUTIONS.includes(got)) {
    throw new FormatError(
      "missing_field",
      `${label}parent_resolution is ${show(got)}, expected "root", "resolved", "unresolved" or null`,
    );
  }
  return got as ParentResolution;
}

function digestOf(value: JsonObject, label: string): string | null {
  const got = field(value, "digest");
  if (got === undefined || got === null) return null;
  if (typeof got !== "string" || !HEX_DIGEST.test(got)) {
    throw new FormatError("missing_field", `${label}digest is ${show(got)}, expected 64 lowercase hex digits or null`);
  }
  return got;
}
