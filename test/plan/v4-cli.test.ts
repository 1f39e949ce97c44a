// SPEC v4 through the CLI: generated rollouts with routes, versions and groups, written by `rows`
// as rows, packed trees and bins, in JSONL and Parquet, from both backends: byte-identical
// between backends, and equal to the reference (rows field by field, trees exactly, bins by
// SPEC's invariants). Also SPEC's routes example, and what a route mismatch costs.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { beforeAll, describe, expect, test } from "vitest";
import { init } from "../../src/index.js";
import { rolloutToJson } from "../../src/ingest/read.js";
import type { Callforest, Rollout } from "../../src/types.js";
import { jsonlRecords, parquetRecords } from "../columnar/support.js";
import { cli } from "../ingest/cli.js";
import { acceptedV4RolloutArb } from "../support/arbitraries.js";
import { checkBins, checkTrees } from "../support/reference-check.js";
import { reference } from "../support/reference.js";
import { tempDirs } from "../support/temp-dirs.js";

const tempDir = tempDirs("v4-cli");
const ROUTES = new URL("../../examples/routes-refit.json", import.meta.url).pathname;
const CAPACITY = 64;

/** Rollouts the reference accepts, all of whose leaves fit CAPACITY. */
function sample(): Rollout[] {
  return fc
    .sample(acceptedV4RolloutArb({ maxActions: 12 }), { seed: 42, numRuns: 60 })
    .map((r, i) => ({ ...r, rollout_id: `${i}:${r.rollout_id}` }))
    .filter((r) => reference(r, { capacity: CAPACITY }).status === "ok");
}

async function run(input: string, output: string, ...argv: string[]): Promise<void> {
  const done = await cli("rows", input, "-o", output, "--quiet", "--jobs", "1", ...argv);
  expect(done, output).toMatchObject({ code: 0, stderr: "" });
}

describe("generated v4 rollouts through the CLI", () => {
  const layouts = [
    { name: "rows", argv: [] },
    { name: "trees", argv: ["--layout", "packed"] },
    { name: "bins", argv: ["--capacity", String(CAPACITY)] },
  ];
  test.each(layouts)("$name: both backends, JSONL and Parquet, equal to the reference", async ({ name, argv }) => {
    const dir = tempDir();
    const rollouts = sample();
    expect(rollouts.length).toBeGreaterThan(20);
    const input = join(dir, "in.jsonl");
    writeFileSync(input, rollouts.map((r) => rolloutToJson(r)).join("\n") + "\n");
    const outputs: string[] = [];
    for (const backend of ["wasm", "ts"]) {
      const jsonl = join(dir, `${backend}.jsonl`);
      await run(input, jsonl, "--backend", backend, ...argv);
      outputs.push(readFileSync(jsonl, "utf8"));
    }
    expect(outputs[1]).toBe(outputs[0]);
    const records = jsonlRecords(join(dir, "wasm.jsonl"));
    const byRollout = new Map<string, Record<string, unknown>[]>();
    for (const r of records)
      byRollout.set(r.rollout_id as string, [...(byRollout.get(r.rollout_id as string) ?? []), r]);
    for (const rollout of rollouts) {
      const mine = byRollout.get(rollout.rollout_id) ?? [];
      if (name === "trees") checkTrees(rollout, mine);
      else if (name === "bins") checkBins(rollout, mine, CAPACITY);
      else {
        const ref = reference(rollout);
        if (ref.status !== "ok") throw new Error("rejected");
        expect(
          mine.map((r) => [
            r.leaf,
            r.token_ids,
            (r.loss_mask as boolean[]).map(Number),
            r.group_id,
            r.weight_versions ?? null,
          ]),
        ).toEqual(ref.rows.map((r) => [r.leaf, r.token_ids, r.loss_mask, r.group_id, r.weight_versions ?? null]));
      }
    }
    // Parquet holds what the JSONL holds.
    const parquet = join(dir, "out.parquet");
    await run(input, parquet, ...argv);
    expect((await parquetRecords(parquet)).records).toEqual(records);
  });
});

describe("SPEC's routes example (examples/routes-refit.json)", () => {
  let backends: Callforest[] = [];
  beforeAll(async () => {
    backends = [await init({ backend: "ts" }), await init({ simd: true }), await init({ simd: false })];
  });
  const example = (): Rollout => JSON.parse(readFileSync(ROUTES, "utf8")) as Rollout;

  test("two rows, a route_mismatch at token 3 in layer 1, one packed record of 15 tokens", () => {
    for (const cf of backends) {
      const plan = cf.plan(example(), { trees: true });
      expect(plan.report.diagnostics).toEqual([{ code: "route_mismatch", call: "C3", near: "C2", at: 3, layer: 1 }]);
      expect(plan.rows.map((r) => [r.calls, r.numTokens, Array.from(r.weightVersions!), r.groupId])).toEqual([
        [["C1", "C2"], 8, [-1, -1, -1, 7, 7, -1, 7, 8], "task-42"],
        [["C3"], 10, [-1, -1, -1, -1, -1, -1, -1, -1, -1, 8], "task-42"],
      ]);
      // "routes of token 7 all −1"
      const row0 = plan.rows[0].routedExperts!;
      expect(Array.from(row0.data.subarray(14, 16))).toEqual([-1, -1]);
      expect([plan.report.trie_tokens, plan.report.unique_tokens]).toEqual([15, 18]);
      expect(plan.trees).toHaveLength(1);
      expect(plan.trees[0].segments.map((s) => [s.call, s.parent, s.start, s.length, s.end])).toEqual([
        ["C1", -1, 0, 3, 15],
        ["C1", 0, 3, 2, 8],
        ["C2", 1, 5, 3, 8],
        ["C3", 0, 8, 7, 15],
      ]);
      // "token 4's route from C2's prefill": C2 routed token 4 to experts 8 and 9.
      expect(Array.from(plan.trees[0].routedExperts!.data.subarray(8, 10))).toEqual([8, 9]);
      plan.release();
    }
  });

  test("a mismatched route costs packed output only the tokens from the mismatch on", () => {
    // A chain of calls; one call's prefill re-routes token `at` of what it resends (a cache miss,
    // which the later calls' prefix cache then reuses). Packed, it repeats only
    // [at, len(full(parent))); in rows it is a new tree of its whole length.
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 6 }),
        fc.nat(),
        fc.nat(),
        fc.integer({ min: 1, max: 4 }),
        (calls, pick, where, step) => {
          const rollout = chain(calls, step);
          const c = 1 + (pick % (calls - 1));
          const parentFull =
            rollout.calls[c - 1].prompt_token_ids.length + rollout.calls[c - 1].generation_token_ids.length;
          const at = where % (parentFull - 1);
          const agreeing = backends[0].plan(rollout, { trees: true });
          const baseline = agreeing.report.trie_tokens!;
          agreeing.release();
          for (const later of rollout.calls.slice(c)) (later.routed_experts as number[][][])[at][0][0] += 1000;
          for (const cf of backends) {
            const plan = cf.plan(rollout, { trees: true });
            const mismatch = plan.report.diagnostics.find((d) => d.code === "route_mismatch");
            expect(mismatch).toMatchObject({ call: `c${c}`, near: `c${c - 1}`, at, layer: 0 });
            expect(plan.report.trie_tokens).toBe(baseline + parentFull - at);
            plan.release();
          }
        },
      ),
      { seed: 9, numRuns: 40 },
    );
  });
});

/** `calls` calls of one agent, each resending the last one's tokens and adding `step` + a generation. */
function chain(calls: number, step: number): Rollout {
  const out: Rollout["calls"] = [];
  let prompt = [1, 2, 3];
  for (let i = 0; i < calls; i++) {
    const generation = [100 + i, 200 + i];
    const full = [...prompt, ...generation];
    out.push({
      id: `c${i}`,
      prompt_token_ids: prompt,
      generation_token_ids: generation,
      generation_log_probs: generation.map(() => -0.5),
      // Every call routes token t alike (a prefix cache that hit), vLLM's shape.
      routed_experts: full.slice(0, -1).map((_, t) => [[t % 50], [(t * 7) % 50]]),
    });
    prompt = [...full, ...Array.from({ length: step }, (_, k) => 300 + 10 * i + k)];
  }
  return { rollout_id: "chain", reward: 1, calls: out };
}
