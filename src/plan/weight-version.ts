// SPEC v4's `calls[].weight_version`: the policy version that sampled a call's generation, one for
// all its tokens or one per generated token (a generation that spanned a weight update).
import { describeValue } from "../messages.js";

/** A call's version(s): one number, or one per generated token. */
export type WeightVersion = number | Int32Array;

const MAX_VERSION = 2 ** 31 - 1;

function isVersion(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= MAX_VERSION;
}

/**
 * The call's version(s) (null when absent or null), or what is wrong with them for SPEC's
 * `invalid_weight_version`. `generated` is the call's generated tokens.
 */
export function readWeightVersion(value: unknown, generated: number): WeightVersion | null | string {
  if (value === undefined || value === null) return null;
  if (isVersion(value)) return value;
  if (!Array.isArray(value))
    return `weight_version must be an integer in [0, 2^31-1] or an array of them, got ${describeValue(value)}`;
  if (value.length !== generated)
    return `weight_version has ${value.length} versions for ${generated} generated tokens (one each)`;
  const versions = new Int32Array(value.length);
  for (let i = 0; i < value.length; i++) {
    const v: unknown = value[i];
    if (!isVersion(v)) return `weight_version[${i}] must be an integer in [0, 2^31-1], got ${describeValue(v)}`;
    versions[i] = v;
  }
  return versions;
}

/** Writes the version of each of a call's `generated` tokens at `into[at…]`. */
export function fillVersions(version: WeightVersion, generated: number, into: Int32Array, at: number): void {
  if (typeof version === "number") into.fill(version, at, at + generated);
  else into.set(version.subarray(0, generated), at);
}
