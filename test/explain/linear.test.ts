// explain's analysis and cost touch a number of tokens linear in the input, counted (never
// timed): on a sliding window (every call a root), a delta chain (prompts that add up to the
// square of the calls while the input holds twice the calls) and one-agent conversations with
// breaks, doubling the input at most doubles the tokens touched (a quadratic algorithm would
// quadruple them), and they stay within a small multiple of the input's own tokens.
import { beforeAll, describe, expect, it } from "vitest";
import { init } from "../../src/index.js";
import { analyzeRollout } from "../../src/explain/analyze.js";
import type { Callforest, Rollout } from "../../src/types.js";
import { deltaChainRollout, oneAgentRollouts, slidingWindowRollout } from "../../bench/explain-inputs.js";

let cf: Callforest;
beforeAll(async () => {
  cf = await init({ backend: "ts" });
});

/** Tokens explain touched on the rollouts, and how many it explained. */
function work(rollouts: readonly Rollout[]): { tokens: number; explained: number } {
  const counter = { tokens: 0 };
  let explained = 0;
  for (const rollout of rollouts) {
    const plan = cf.plan(rollout);
    try {
      expect(plan.report.status).toBe("ok");
      const options = { reasoning: [{ open: [50], close: [51] }] };
      explained += analyzeRollout(rollout, plan.forest, plan.agents.length > 0, options, counter).explained.length;
    } finally {
      plan.release();
    }
  }
  return { tokens: counter.tokens, explained };
}

const cases: [string, (n: number) => Rollout[], (n: number) => number][] = [
  // input tokens: what the file holds (prompt and generation of every call; a delta holds one)
  ["a sliding window", (n) => [slidingWindowRollout(n)], (n) => n * (200 + 500 + 40)],
  ["a delta chain", (n) => [deltaChainRollout(n * 4)], (n) => n * 4 * 2],
  ["one-agent conversations", (n) => oneAgentRollouts(n / 10, 10), (n) => (n / 10) * 10 * (60 + 4.5 * 21 + 11)],
];

describe("explain's work", () => {
  it.each(cases)("on %s grows linearly: twice the input, at most 2.2× the tokens touched", (_, make, input) => {
    const small = work(make(300));
    const large = work(make(600));
    expect(large.explained).toBeGreaterThanOrEqual(small.explained);
    expect(large.tokens / small.tokens).toBeLessThan(2.2);
    // and a small multiple of the input's own tokens
    expect(large.tokens).toBeLessThan(12 * input(600));
  });

  it("on a sliding window explains every root but the first, with the cost of one chain", () => {
    const rollout = slidingWindowRollout(100);
    const plan = cf.plan(rollout);
    try {
      const analysis = analyzeRollout(rollout, plan.forest, false);
      // Until the window is full, each call resends the history: one tree of 9 calls, then roots.
      expect(plan.report.roots).toBe(92);
      expect(analysis.explained).toHaveLength(91);
      expect(new Set(analysis.explained.map((call) => call.cause))).toEqual(new Set(["rewritten_prompt"]));
      expect(analysis.tito).toMatchObject({ trees: 1, rows: 1 });
      // The chain's one row holds the system prompt, then every turn once.
      expect(analysis.tito.row_tokens).toBe(200 + 100 * (20 + 40));
      expect(analysis.tito.trie_tokens).toBe(analysis.tito.row_tokens);
    } finally {
      plan.release();
    }
  });
});
