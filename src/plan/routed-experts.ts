// MoE routed experts (SPEC `calls[].routed_experts`): for each token of a call's full sequence,
// the experts its router chose in each MoE layer. Read from NeMo RL's envelope (its codec is
// src/codecs/routed-experts.ts) or nested lists [S][L][K], kept as one typed array per call (never
// a JS array per token).
import { decodeEnvelope } from "../codecs/routed-experts.js";
import { describeValue } from "../messages.js";
import type { RoutedExperts } from "../types.js";

/** Nested integer lists [S][L][K] as one Int32Array, or what is wrong with them. */
function decodeLists(value: unknown[]): RoutedExperts | string {
  const tokens = value.length;
  const first: unknown = value[0];
  const layers = Array.isArray(first) ? first.length : 0;
  const topk = layers > 0 && Array.isArray((first as unknown[])[0]) ? ((first as unknown[])[0] as unknown[]).length : 0;
  if (tokens > 0 && (layers === 0 || topk === 0))
    return "routed_experts must be an [S][L][K] array of integers (L, K >= 1)";
  const data = new Int32Array(tokens * layers * topk);
  let at = 0;
  for (let t = 0; t < tokens; t++) {
    const perToken: unknown = value[t];
    if (!Array.isArray(perToken) || perToken.length !== layers)
      return `routed_experts[${t}] must hold ${layers} layers, as routed_experts[0] does`;
    for (let l = 0; l < layers; l++) {
      const chosen: unknown = perToken[l];
      if (!Array.isArray(chosen) || chosen.length !== topk)
        return `routed_experts[${t}][${l}] must hold ${topk} experts, as routed_experts[0][0] does`;
      for (let k = 0; k < topk; k++) {
        const expert: unknown = chosen[k];
        if (typeof expert !== "number" || (expert | 0) !== expert)
          return `routed_experts[${t}][${l}][${k}] must be an int32, got ${describeValue(expert)}`;
        data[at++] = expert;
      }
    }
  }
  return { tokens, layers, topk, data };
}

/**
 * A call's routed experts (null when absent or null), or what is wrong with them for SPEC's
 * `invalid_routed_experts`: they must cover the call's tokens but its last (vLLM's `S = len(full)
 * − 1`: the last sampled token never passed through the model), and each entry of those tokens
 * holds ids >= 0 or is all -1 (not routed). Entries past the call's tokens are ignored.
 */
export function readRoutedExperts(value: unknown, fullLength: number): RoutedExperts | null | string {
  if (value === undefined || value === null) return null;
  const experts =
    typeof value === "string"
      ? (decodeEnvelope(value) ??
        `routed_experts must be an nrlre1:<int8|int16|int32>:<S>x<L>x<K>:<base64> envelope, ` +
          `got ${describeValue(value.length > 60 ? value.slice(0, 60) + "…" : value)}`)
      : Array.isArray(value)
        ? decodeLists(value)
        : `routed_experts must be an nrlre1 envelope string or an [S][L][K] array, got ${describeValue(value)}`;
  if (typeof experts === "string") return experts;
  if (experts.tokens < fullLength - 1)
    return `routed_experts covers ${experts.tokens} tokens, fewer than the call's ${fullLength} (prompt + generation) less its last`;
  const bad = firstBadEntry(experts, Math.min(experts.tokens, fullLength));
  if (bad >= 0)
    return `routed_experts[${bad}] mixes negative ids with others (only an all -1 entry, not routed, may hold them)`;
  return experts;
}

/** The first of the first `tokens` entries with a negative id that is not all -1, or -1. */
function firstBadEntry(experts: RoutedExperts, tokens: number): number {
  const width = experts.layers * experts.topk;
  const data = experts.data;
  for (let t = 0; t < tokens; t++) {
    const from = t * width;
    let negative = 0;
    let unrouted = 0;
    for (let i = from; i < from + width; i++) {
      if (data[i] < 0) {
        negative++;
        if (data[i] === -1) unrouted++;
      }
    }
    if (negative > 0 && unrouted !== width) return t;
  }
  return -1;
}

/** Copies the entries of tokens [from, to) of `experts` into `into`, from element `at`. */
export function copyTokens(
  experts: RoutedExperts,
  from: number,
  to: number,
  into: Int16Array | Int32Array,
  at: number,
): void {
  const width = experts.layers * experts.topk;
  into.set(experts.data.subarray(from * width, to * width), at);
}

/** Entries of `tokens` × L × K, to fill with copyTokens; int16 unless some entry needs int32. */
export function expertArray(tokens: number, layers: number, topk: number, wide: boolean): Int16Array | Int32Array {
  return wide ? new Int32Array(tokens * layers * topk) : new Int16Array(tokens * layers * topk);
}

/** Whether any entry of tokens [from, to) is outside int16. */
export function needsInt32(experts: RoutedExperts, from: number, to: number): boolean {
  if (!(experts.data instanceof Int32Array)) return false;
  const width = experts.layers * experts.topk;
  for (let i = from * width; i < to * width; i++) if (experts.data[i] < -32768 || experts.data[i] > 32767) return true;
  return false;
}
