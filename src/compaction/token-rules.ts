// The planner's value rules (SPEC: token ids, float32 logprobs), applied when evidence is taken so
// a bad value names its call at the moment it arrives instead of rejecting the whole rollout later.

/** An integer in [0, 2^31-1], SPEC's token id range. */
export function isTokenId(v: unknown): v is number {
  return Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 0x7fffffff;
}

/** A number that stays finite as a float32 (the planner stores logprobs as float32: -1e39 becomes -Infinity). */
export function isFloat32Logprob(v: unknown): v is number {
  return typeof v === "number" && Number.isFinite(Math.fround(v));
}

/** Index of the first value that breaks `rule`, or -1. */
export function firstBad(values: readonly unknown[], rule: (v: unknown) => boolean): number {
  for (let i = 0; i < values.length; i++) if (!rule(values[i])) return i;
  return -1;
}
