// SPEC "Packed trees", invariant: a model computes the same per-token outputs from a packed record
// as from each row, so the summed loss is the same. Checked with a tiny deterministic attention
// model in float64: every trained token's log-probability, keyed by (call, position in that call's
// generation), from the rows (causal attention, positions 0..n-1, token i predicted from output
// i-1) and from plan.trees and plan.bins (SPEC's attention and prediction rules over the segments).
// examples/pytorch/check_packed.py checks the same with a real transformer in PyTorch.
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { beforeAll, describe, expect, test } from "vitest";
import { init, maskBit, type Callforest } from "../../src/index.js";
import type { PackedBin, PackedTree, Rollout, Row } from "../../src/types.js";
import { mulberry32 } from "../../src/random.js";
import { acceptedRolloutArb } from "../support/arbitraries.js";
import { LOGIN_BUG } from "../support/fixtures.js";

const SEED = 20261201;
const TOLERANCE = 1e-9;

// ---------------------------------------------------------------------------------------------
// The toy model: h = E[token % V] + P[position]; one attention layer (query/key/value
// projections, softmax over the visible keys); out = tanh(h + attention) W; log-softmax over V.

const V = 11;
const D = 6;

class ToyModel {
  private readonly rand = mulberry32(SEED);
  private readonly tokenEmb = this.matrix(V, D);
  private readonly wq = this.matrix(D, D);
  private readonly wk = this.matrix(D, D);
  private readonly wv = this.matrix(D, D);
  private readonly wout = this.matrix(D, V);
  /** Position embeddings, drawn on demand from a seed of their own (rows are any length). */
  private readonly posEmb: Float64Array[] = [];

  private matrix(rows: number, cols: number): Float64Array {
    const m = new Float64Array(rows * cols);
    for (let i = 0; i < m.length; i++) m[i] = this.rand() * 2 - 1;
    return m;
  }

  private position(p: number): Float64Array {
    let e = this.posEmb[p];
    if (e === undefined) {
      const r = mulberry32((SEED ^ Math.imul(p + 1, 0x9e3779b1)) >>> 0);
      e = Float64Array.from({ length: D }, () => r() * 2 - 1);
      this.posEmb[p] = e;
    }
    return e;
  }

  private static times(x: Float64Array, w: Float64Array, cols: number): Float64Array {
    const y = new Float64Array(cols);
    for (let i = 0; i < x.length; i++) for (let j = 0; j < cols; j++) y[j] += x[i] * w[i * cols + j];
    return y;
  }

  /** One sequence's embeddings and projections, to evaluate queries on. */
  encode(tokenIds: ArrayLike<number>, positionIds: ArrayLike<number>): Encoded {
    const n = tokenIds.length;
    const h: Float64Array[] = [];
    const k: Float64Array[] = [];
    const v: Float64Array[] = [];
    for (let i = 0; i < n; i++) {
      const e = new Float64Array(D);
      const t = this.tokenEmb.subarray((tokenIds[i] % V) * D, (tokenIds[i] % V) * D + D);
      const p = this.position(positionIds[i]);
      for (let j = 0; j < D; j++) e[j] = t[j] + p[j];
      h.push(e);
      k.push(ToyModel.times(e, this.wk, D));
      v.push(ToyModel.times(e, this.wv, D));
    }
    return { h, k, v };
  }

  /** Log-probabilities over V at query `q`, attending to `keys` (ascending: the row's order). */
  logProbs(enc: Encoded, q: number, keys: readonly number[]): Float64Array {
    const query = ToyModel.times(enc.h[q], this.wq, D);
    const scores = keys.map((k) => {
      let s = 0;
      for (let j = 0; j < D; j++) s += query[j] * enc.k[k][j];
      return s / Math.sqrt(D);
    });
    const max = Math.max(...scores);
    const weights = scores.map((s) => Math.exp(s - max));
    let total = 0;
    for (const w of weights) total += w;
    const x = new Float64Array(D);
    keys.forEach((k, i) => {
      for (let j = 0; j < D; j++) x[j] += (weights[i] / total) * enc.v[k][j];
    });
    for (let j = 0; j < D; j++) x[j] = Math.tanh(enc.h[q][j] + x[j]);
    const logits = ToyModel.times(x, this.wout, V);
    const m = Math.max(...logits);
    let z = 0;
    for (const l of logits) z += Math.exp(l - m);
    return logits.map((l) => l - m - Math.log(z));
  }
}

interface Encoded {
  h: Float64Array[];
  k: Float64Array[];
  v: Float64Array[];
}

const model = new ToyModel();
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

// ---------------------------------------------------------------------------------------------
// Per trained token: the model's log-probability (null when nothing predicts it: a root's first
// token at position 0), the sampler's logprob the record carries, and the token.

interface Trained {
  model: number | null;
  sampled: number;
  token: number;
}

/** What the checks need of the input: each call's prompt and full length. */
function lengthsOf(rollout: Rollout): Map<string, { prompt: number; full: number }> {
  return new Map(
    rollout.calls.map((c) => [
      c.id,
      { prompt: c.prompt_token_ids.length, full: c.prompt_token_ids.length + c.generation_token_ids.length },
    ]),
  );
}

type Lengths = ReturnType<typeof lengthsOf>;
const keyOf = (call: string, genPos: number) => `${call}#${genPos}`;

function put(out: Map<string, Trained>, key: string, value: Trained): void {
  if (out.has(key)) throw new Error(`token ${key} trained twice`);
  out.set(key, value);
}

/** Rows: causal attention over 0..i-1, positions 0..n-1, token i predicted from output i-1. */
function fromRows(rows: readonly Row[], lengths: Lengths): { tokens: Map<string, Trained>; loss: number } {
  const tokens = new Map<string, Trained>();
  let loss = 0;
  for (const row of rows) {
    const enc = model.encode(row.tokenIds, range(row.numTokens));
    let maskOnes = 0;
    for (let i = 0; i < row.numTokens; i++) maskOnes += maskBit(row.lossMask, i);
    let spans = 0;
    for (const call of row.trained) {
      const { prompt, full } = lengths.get(call)!;
      spans += full - prompt;
      for (let i = prompt; i < full; i++) {
        expect(maskBit(row.lossMask, i), `row ${row.index} mask at ${i} (${call})`).toBe(1);
        const lp = i === 0 ? null : model.logProbs(enc, i - 1, range(i))[row.tokenIds[i] % V];
        if (lp !== null) loss -= lp;
        put(tokens, keyOf(call, i - prompt), { model: lp, sampled: row.logprobs[i], token: row.tokenIds[i] });
      }
    }
    expect(maskOnes, `row ${row.index}: mask 1 only on its trained calls`).toBe(spans);
  }
  return { tokens, loss };
}

/** Packed records: SPEC's attention rule (k ≤ q < end(segment(k))) and prediction rule. */
function fromPacked(
  records: readonly (PackedTree | PackedBin)[],
  lengths: Lengths,
): { tokens: Map<string, Trained>; loss: number } {
  const tokens = new Map<string, Trained>();
  let loss = 0;
  for (const rec of records) {
    const enc = model.encode(rec.tokenIds, rec.positionIds);
    const segmentOf = new Int32Array(rec.numTokens);
    rec.segments.forEach((s, i) => segmentOf.fill(i, s.start, s.start + s.length));
    const end = (k: number) => rec.segments[segmentOf[k]].end;
    rec.segments.forEach((s) => {
      const { prompt } = lengths.get(s.call)!;
      for (let k = s.start; k < s.start + s.length; k++) {
        if (maskBit(rec.lossMask, k) === 0) continue;
        const genPos = rec.positionIds[k] - prompt;
        expect(genPos, `record ${rec.index}: mask 1 on a prompt token of ${s.call}`).toBeGreaterThanOrEqual(0);
        // prediction rule: k - 1 inside the segment; a segment's first token from its parent's last
        let source = k - 1;
        if (k === s.start) {
          const p = s.parent >= 0 ? rec.segments[s.parent] : null;
          source = p === null ? -1 : p.start + p.length - 1;
        }
        let lp: number | null = null;
        if (source >= 0) {
          // attention rule: the source query sees every key k' <= source with source < end(segment(k'))
          const keys = range(source + 1).filter((kk) => source < end(kk));
          lp = model.logProbs(enc, source, keys)[rec.tokenIds[k] % V];
          loss -= lp;
        }
        put(tokens, keyOf(s.call, genPos), { model: lp, sampled: rec.logprobs[k], token: rec.tokenIds[k] });
      }
    });
  }
  return { tokens, loss };
}

function expectSame(what: string, rows: ReturnType<typeof fromRows>, packed: ReturnType<typeof fromPacked>): void {
  expect([...packed.tokens.keys()].sort(), `${what}: the same trained tokens`).toEqual([...rows.tokens.keys()].sort());
  for (const [key, r] of rows.tokens) {
    const p = packed.tokens.get(key)!;
    expect(p.token, `${what} ${key}: token`).toBe(r.token);
    expect(p.sampled, `${what} ${key}: sampled logprob`).toBe(r.sampled);
    if (r.model === null || p.model === null)
      expect(p.model, `${what} ${key}: predicted in both or neither`).toBe(r.model);
    else
      expect(Math.abs(p.model - r.model), `${what} ${key}: model logprob ${p.model} vs ${r.model}`).toBeLessThanOrEqual(
        TOLERANCE,
      );
  }
  expect(Math.abs(packed.loss - rows.loss), `${what}: summed loss ${packed.loss} vs ${rows.loss}`).toBeLessThanOrEqual(
    TOLERANCE * Math.max(1, Math.abs(rows.loss)),
  );
}

/**
 * Rows against trees, against bins at a capacity that fits every tree, and against bins at the
 * longest row's length (the smallest capacity that takes the rollout: trees are split).
 */
function checkRollout(cf: Callforest, rollout: Rollout): void {
  const lengths = lengthsOf(rollout);
  const plan = cf.plan(rollout, { trees: true });
  expect(plan.report.status).toBe("ok");
  const rows = fromRows(plan.rows, lengths);
  expect(rows.tokens.size).toBe(plan.report.captured_tokens);
  expectSame("trees", rows, fromPacked(plan.trees, lengths));
  const longestRow = Math.max(...plan.rows.map((r) => r.numTokens));
  const largestTree = Math.max(...plan.trees.map((t) => t.numTokens));
  plan.release();
  for (const capacity of new Set([largestTree, longestRow])) {
    const binned = cf.plan(rollout, { capacity });
    expect(binned.report.status, `capacity ${capacity}`).toBe("ok");
    const packed = fromPacked(binned.bins, lengths);
    for (const bin of binned.bins) expect(bin.numTokens).toBeLessThanOrEqual(capacity);
    expectSame(`bins at capacity ${capacity}`, rows, packed);
    binned.release();
  }
}

let backends: { name: string; cf: Callforest }[] = [];
beforeAll(async () => {
  backends = [
    { name: "wasm", cf: await init() },
    { name: "ts", cf: await init({ backend: "ts" }) },
  ];
});

describe("a model computes the same from packed records as from rows", () => {
  test("SPEC's worked example (examples/login-bug.json)", () => {
    const rollout = JSON.parse(readFileSync(LOGIN_BUG, "utf8")) as Rollout;
    for (const { cf } of backends) checkRollout(cf, rollout);
  });

  test("generated call forests, both backends", () => {
    fc.assert(
      fc.property(acceptedRolloutArb(), (rollout) => {
        for (const { cf } of backends) checkRollout(cf, rollout);
      }),
      { numRuns: 40, seed: SEED },
    );
  });

  test("the check sees a wrong mask: a sibling's tokens change the answer", () => {
    // Guards the test itself: ignoring `end` (plain causal attention over the packed record) must
    // disagree with the rows on the worked example, whose trees branch.
    const rollout = JSON.parse(readFileSync(LOGIN_BUG, "utf8")) as Rollout;
    const plan = backends[0].cf.plan(rollout, { trees: true });
    const rows = fromRows(plan.rows, lengthsOf(rollout));
    const causal = plan.trees.map((t) => ({ ...t, segments: t.segments.map((s) => ({ ...s, end: t.numTokens })) }));
    const wrong = fromPacked(causal, lengthsOf(rollout));
    plan.release();
    const differs = [...rows.tokens].some(
      ([key, r]) => r.model !== null && Math.abs(wrong.tokens.get(key)!.model! - r.model) > 1e-6,
    );
    expect(differs).toBe(true);
  });
});
