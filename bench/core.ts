// Benchmark of the core (issue 2): plan() plus reading every row's three arrays, per backend,
// against a memcpy reference over the same tokens, all in one run.
import { pathToFileURL } from "node:url";
import { Bench } from "tinybench";
import { init, type Callforest } from "callforest";
import type { Rollout } from "../src/types.js";
import {
  eligibleTokens,
  generateDeepRollout,
  generateMediaRollout,
  generateSmallRollouts,
  typedRollout as typed,
} from "./generate.js";
import { loadExampleRollout } from "./example.js";
import { ReplayCore, recordForests } from "./replay-core.js";
import { planRollout } from "../src/plan/plan-rollout.js";
import type { Plan } from "../src/types.js";

interface Workload {
  name: string;
  rollouts: Rollout[];
  tokens: number;
  /** tinybench iterations for this workload (few for the big ones). */
  iterations: number;
}

/** The consumer side: copies each row's arrays out, as a trainer packing a batch would. */
function makeReader(maxTokens: number) {
  const tokens = new Int32Array(maxTokens);
  const logprobs = new Float32Array(maxTokens);
  const mask = new Uint8Array((maxTokens + 7) >> 3);
  return (planOf: (rollout: Rollout) => Plan, rollouts: Rollout[]) => {
    for (const rollout of rollouts) {
      const plan = planOf(rollout);
      if (plan.report.status !== "ok") throw new Error(`${rollout.rollout_id}: ${plan.report.detail}`);
      for (const row of plan.rows) {
        tokens.set(row.tokenIds);
        logprobs.set(row.logprobs);
        mask.set(row.lossMask);
      }
      plan.release();
    }
  };
}

/** The token arrays (prompt, generation) of every eligible call. */
function eligibleArrays(rollouts: Rollout[]): Int32Array[] {
  const arrays: Int32Array[] = [];
  for (const r of rollouts) {
    for (const c of r.calls) {
      if (c.kept === false || c.generation_token_ids.length === 0) continue;
      arrays.push(c.prompt_token_ids as Int32Array, c.generation_token_ids as Int32Array);
    }
  }
  return arrays;
}

/**
 * memcpy reference: Int32Array.prototype.set of the same tokens (prompt + generation) into one
 * array that holds them all (allocated once, reused from run to run).
 */
function makeMemcpy(rollouts: Rollout[], total: number) {
  const dest = new Int32Array(total);
  const arrays = eligibleArrays(rollouts);
  return () => {
    let at = 0;
    for (const a of arrays) {
      dest.set(a, at);
      at += a.length;
    }
  };
}

/**
 * A tighter reference: each call's arrays copied into one call-sized buffer, again and again. It
 * reads every token once but writes only what stays in cache, much as a core that keeps each
 * distinct token once does.
 */
function makeCachedCopy(rollouts: Rollout[]) {
  const arrays = eligibleArrays(rollouts);
  const dest = new Int32Array(maxRowTokens(rollouts));
  return () => {
    for (let i = 0; i < arrays.length; i += 2) {
      dest.set(arrays[i], 0);
      dest.set(arrays[i + 1], arrays[i].length);
    }
  };
}

function maxRowTokens(rollouts: Rollout[]): number {
  let max = 0;
  for (const r of rollouts)
    for (const c of r.calls) max = Math.max(max, c.prompt_token_ids.length + c.generation_token_ids.length);
  return max;
}

export interface CoreBenchRow {
  workload: string;
  tokens: number;
  medianMs: Record<string, number>;
}

export async function runCoreBench(log: (line: string) => void = console.log): Promise<CoreBenchRow[]> {
  const example = loadExampleRollout();
  log("generating workloads ...");
  const deep = generateDeepRollout({ targetTokens: 10_000_000 });
  const small = generateSmallRollouts(1000, 1);
  const media = generateMediaRollout();
  const workloads: Workload[] = [
    { name: "(a) worked example", rollouts: [typed(example)], tokens: eligibleTokens(example), iterations: 20_000 },
    { name: "(b) deep rollout", rollouts: [deep], tokens: eligibleTokens(deep), iterations: 30 },
    {
      name: "(c) 1,000 small rollouts",
      rollouts: small,
      tokens: small.reduce((n, r) => n + eligibleTokens(r), 0),
      iterations: 40,
    },
    {
      name: "(d) media-heavy rollout (150 turns, a screenshot each)",
      rollouts: [media],
      tokens: eligibleTokens(media),
      iterations: 200,
    },
  ];
  const backends: [string, Callforest][] = [
    ["wasm", await init({ backend: "wasm", simd: true })],
    ["wasm-scalar", await init({ backend: "wasm", simd: false })],
    ["ts", await init({ backend: "ts" })],
  ];

  const results: CoreBenchRow[] = [];
  for (const w of workloads) {
    const read = makeReader(maxRowTokens(w.rollouts));
    // Warm up long enough for the JIT to settle on the tiny workload too (a tenth of the runs).
    const warmupIterations = Math.max(3, Math.round(w.iterations / 10));
    const bench = new Bench({ iterations: w.iterations, time: 0, warmupIterations, warmupTime: 0 });
    for (const [name, cf] of backends) bench.add(name, () => read((rollout) => cf.plan(rollout), w.rollouts));
    bench.add("memcpy", makeMemcpy(w.rollouts, w.tokens));
    bench.add("cached copy", makeCachedCopy(w.rollouts));
    const replay = new ReplayCore(recordForests(w.rollouts));
    bench.add("shared", () => read((rollout) => planRollout(() => replay, rollout), w.rollouts));
    await bench.run();
    const medianMs: Record<string, number> = {};
    for (const task of bench.tasks) {
      if (task.result.state !== "completed") throw new Error(`${w.name} / ${task.name}: ${task.result.state}`);
      medianMs[task.name] = task.result.latency.p50;
    }
    results.push({ workload: w.name, tokens: w.tokens, medianMs });
    log(`${w.name}: ${w.tokens.toLocaleString("en-US")} tokens done`);
  }
  return results;
}

const rate = (tokens: number, ms: number) => `${(((tokens / ms) * 1000) / 1e6).toFixed(1)} M/s`;

export function coreTable(rows: CoreBenchRow[]): string {
  const out = [
    "| workload | tokens | wasm (SIMD) | wasm scalar | ts | memcpy | cached copy | all but linking | wasm ÷ ts | " +
      "wasm time ÷ memcpy time | wasm time ÷ cached copy time | ts ÷ all but linking (ceiling) |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const r of rows) {
    const m = r.medianMs;
    out.push(
      `| ${r.workload} | ${r.tokens.toLocaleString("en-US")} | ${rate(r.tokens, m.wasm)} | ` +
        `${rate(r.tokens, m["wasm-scalar"])} | ` +
        `${rate(r.tokens, m.ts)} | ${rate(r.tokens, m.memcpy)} | ${rate(r.tokens, m["cached copy"])} | ` +
        `${rate(r.tokens, m.shared)} | ${(m.ts / m.wasm).toFixed(2)}× | ` +
        `${(m.wasm / m.memcpy).toFixed(2)}× | ${(m.wasm / m["cached copy"]).toFixed(2)}× | ` +
        `${(m.ts / m.shared).toFixed(2)}× |`,
    );
  }
  return out.join("\n");
}

// `npm run bench:core`: this table alone.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await runCoreBench((line) => process.stderr.write(`${line}\n`));
  process.stdout.write(coreTable(rows) + "\n");
}
