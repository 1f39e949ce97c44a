// What LineScanner must make of a line: JSON.parse, then each array at a token key typed
// (Int32Array) when all its items are valid token ids, and each logprob array typed
// (Float32Array) when all its items are finite float32 values; other arrays stay JSON arrays.

export const TOKEN_KEYS = ["prompt_token_ids", "generation_token_ids"];
export const LOGPROB_KEY = "generation_log_probs";

export function typedLikeOracle(text: string): unknown {
  return JSON.parse(text, (key, value) => {
    if (!Array.isArray(value)) return value;
    if (
      TOKEN_KEYS.includes(key) &&
      value.every((v) => Number.isInteger(v) && v >= 0 && v < 2 ** 31 && !Object.is(v, -0))
    )
      return Int32Array.from(value);
    if (key === LOGPROB_KEY && value.every((v) => typeof v === "number" && Number.isFinite(Math.fround(v))))
      return Float32Array.from(value);
    return value;
  });
}
