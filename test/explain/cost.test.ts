// What a break costs (docs/breaks.md): the trie and row tokens of the rollout as sent and
// token-in/token-out, on the worked example and on a fork; the sizes as sent against the
// planner's own report; and the work, counted, growing linearly with the input.
import fc from "fast-check";
import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { init } from "../../src/index.js";
import { analyzeRollout, type Analysis } from "../../src/explain/analyze.js";
import type { Callforest, Rollout } from "../../src/types.js";
import { acceptedRolloutArb, prefixSoupArb } from "../support/arbitraries.js";
import { brokenArb } from "./broken.js";

let cf: Callforest;
beforeAll(async () => {
  cf = await init({ backend: "ts" });
});

function analyze(rollout: Rollout, reasoning = true) {
  const plan = cf.plan(rollout);
  try {
    expect(plan.report.status).toBe("ok");
    const options = reasoning ? { reasoning: [{ open: [50], close: [51] }] } : {};
    const work = { tokens: 0 };
    return { ...analyzeRollout(rollout, plan.forest, plan.agents.length > 0, options, work), work, plan };
  } finally {
    plan.release();
  }
}

const call = (id: string, agent: string, prompt: number[], generation: number[]) => ({
  id,
  agent,
  prompt_token_ids: prompt,
  generation_token_ids: generation,
  generation_log_probs: generation.map(() => -0.5),
});

describe("what a break costs", () => {
  it("the worked example: 5 trie tokens (26 → 21) and 18 row tokens (39 → 21)", () => {
    const rollout = JSON.parse(readFileSync("examples/reasoning-dropped.json", "utf8")) as Rollout;
    const { sent, tito, dropped } = analyze(rollout);
    expect(sent).toEqual({ trees: 3, rows: 3, row_tokens: 39, trie_tokens: 26 });
    expect(tito).toEqual({ trees: 1, rows: 1, row_tokens: 21, trie_tokens: 21 });
    expect(dropped).toBe(7); // the two reasoning blocks: 50 11 12 51 and 50 13 51
  });

  it("a fork: rows repeat what token-in/token-out resends (negative, by the dropped tokens); the trie does not", () => {
    // N's reasoning (50 7 51) is dropped by C; F, a fork, continues N exactly.
    const rollout: Rollout = {
      rollout_id: "fork",
      reward: 1,
      agents: [
        { id: "L", parent: null },
        { id: "F", parent: "L", mode: "fork" },
      ],
      calls: [
        call("N", "L", [1, 2, 3], [50, 7, 51, 8, 99]),
        call("F1", "F", [1, 2, 3, 50, 7, 51, 8, 99, 40, 41], [42, 99]),
        call("C", "L", [1, 2, 3, 8, 99, 20, 21], [22, 99]),
      ],
    };
    const { explained, sent, tito, dropped } = analyze(rollout);
    expect(explained.map((e) => [e.call, e.near, e.at, e.cause])).toEqual([["C", "N", 3, "reasoning_dropped"]]);
    expect(sent).toEqual({ trees: 2, rows: 2, row_tokens: 21, trie_tokens: 18 });
    expect(tito).toEqual({ trees: 1, rows: 2, row_tokens: 24, trie_tokens: 16 });
    expect(dropped).toBe(3);
    expect(sent.row_tokens - tito.row_tokens).toBe(-dropped); // one more row holds N's whole turn
  });

  it("as sent, equals the planner's report: trees, rows, row_tokens and trie_tokens (media too)", () => {
    let media = 0;
    fc.assert(
      fc.property(fc.oneof(prefixSoupArb(), acceptedRolloutArb()), (generated) => {
        // The cost's trie compares tokens and media, not routes.
        const rollout = { ...generated, calls: generated.calls.map(({ routed_experts: _r, ...rest }) => rest) };
        const plan = cf.plan(rollout, { trees: true });
        try {
          fc.pre(plan.report.status === "ok");
          const { sent } = analyzeRollout(rollout, plan.forest, plan.agents.length > 0);
          media += rollout.calls.some((c) => (c.media?.length ?? 0) > 0) ? 1 : 0;
          const { roots, rows, row_tokens, trie_tokens } = plan.report;
          expect(sent).toEqual({ trees: roots, rows, row_tokens, trie_tokens });
        } finally {
          plan.release();
        }
      }),
      { numRuns: 400 },
    );
    expect(media).toBeGreaterThan(20);
  });

  it("token-in/token-out: its trie is the planner's trie of its sequences, built out", () => {
    let relinked = 0;
    fc.assert(
      fc.property(brokenArb, (rollout) => {
        const plan = cf.plan(rollout);
        let analysis: Analysis;
        try {
          fc.pre(plan.report.status === "ok");
          analysis = analyzeRollout(rollout, plan.forest, plan.agents.length > 0);
          const eligible = plan.forest.filter((c) => c.eligible).map((c) => rollout.calls[c.index]!);
          // The version's sequences, written out: tito(parent) ++ full(c)[cut:].
          const { parent, cut } = analysis.titoLinks;
          const full: number[][] = [];
          const calls = eligible.map((c, i) => {
            const base = parent[i]! < 0 ? [] : full[parent[i]!]!;
            const from = parent[i]! < 0 ? 0 : cut[i]!;
            const prompt = [...base, ...Array.from(c.prompt_token_ids).slice(from)];
            full.push([...prompt, ...c.generation_token_ids]);
            return { ...c, prompt_token_ids: prompt };
          });
          relinked += analysis.explained.filter((e) => e.near !== null && e.cause !== "fresh").length;
          const built = cf.plan({ ...rollout, calls }, { trees: true });
          try {
            fc.pre(built.report.status === "ok"); // twins the version makes may be ambiguous_parent
            expect(analysis.tito.trie_tokens).toBe(built.report.trie_tokens);
          } finally {
            built.release();
          }
        } finally {
          plan.release();
        }
      }),
      { numRuns: 300 },
    );
    expect(relinked).toBeGreaterThan(30);
  });
});
