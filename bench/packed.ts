// Benchmark of the packed layouts (issues 16, 35): what packing saves (tokens, attention cost) at a
// trainer's capacities, the token trie against the forest's links (trie ÷ unique tokens), and what
// it costs plan() on each backend, all in one run. The twins workloads check that the trie's walk
// stays linear where many children share a call's next token: its cost a token must not grow with
// the number of twins.
import { pathToFileURL } from "node:url";
import { Bench } from "tinybench";
import { init, type Callforest } from "callforest";
import { packedTokensLowerBound, type ForestShape } from "../src/plan/packing.js";
import type { Plan, Rollout } from "../src/types.js";
import { eligibleTokens, generateDeepRollout, generateForkHeavyRollout, generateSmallRollouts } from "./generate.js";

const CAPACITIES = [2048, 8192, 32768, 131072];

interface Workload {
  name: string;
  rollouts: Rollout[];
  iterations: number;
}

export interface PackedBenchRow {
  workload: string;
  rowTokens: number;
  uniqueTokens: number;
  /** SPEC v4's trie_tokens: the packed trees' tokens. */
  trieTokens: number;
  /** Per capacity: packed tokens, or null when some leaf is longer (row_exceeds_capacity). */
  packedTokens: (number | null)[];
  /** Per capacity: the fewest packed tokens any packer could reach (packedTokensLowerBound). */
  lowerBounds: (number | null)[];
  /** Σ over rows of the keys each token sees (causal): n(n+1)/2 a row. */
  rowAttention: number;
  /** Σ over packed tree tokens of the keys each sees (k ≤ q < end(segment(k))): position + 1. */
  packedAttention: number;
  /** Tokens of the eligible calls' full sequences (what planning reads). */
  inputTokens: number;
  /** Median ms of plan() alone and with trees, per backend. */
  planMs: Record<string, { plain: number; trees: number }>;
}

/** The token trie of a plan as the packer sees it: its trees' segments, a node each. */
function shapeOf(plan: Plan): ForestShape {
  const parents: number[] = [];
  const fullLengths: number[] = [];
  for (const tree of plan.trees) {
    const base = parents.length;
    for (const s of tree.segments) {
      parents.push(s.parent < 0 ? -1 : base + s.parent);
      fullLengths.push(tree.positionIds[s.start + s.length - 1] + 1);
    }
  }
  return { parents, fullLengths };
}

function sums(cf: Callforest, rollouts: Rollout[]) {
  let rowTokens = 0;
  let uniqueTokens = 0;
  let trieTokens = 0;
  let rowAttention = 0;
  let packedAttention = 0;
  for (const rollout of rollouts) {
    const plan = cf.plan(rollout, { trees: true });
    rowTokens += plan.report.row_tokens;
    uniqueTokens += plan.report.unique_tokens;
    trieTokens += plan.report.trie_tokens!;
    for (const row of plan.rows) rowAttention += (row.numTokens * (row.numTokens + 1)) / 2;
    for (const tree of plan.trees) for (const p of tree.positionIds) packedAttention += p + 1;
    plan.release();
  }
  const packedTokens = CAPACITIES.map((capacity) => {
    let total = 0;
    for (const rollout of rollouts) {
      const plan = cf.plan(rollout, { capacity });
      if (plan.report.status !== "ok") return null;
      total += plan.report.packed_tokens!;
      plan.release();
    }
    return total;
  });
  const shapes = rollouts.map((rollout) => {
    const plan = cf.plan(rollout, { trees: true });
    const shape = shapeOf(plan);
    plan.release();
    return shape;
  });
  const lowerBounds = CAPACITIES.map((capacity, i) =>
    packedTokens[i] === null ? null : shapes.reduce((n, shape) => n + packedTokensLowerBound(shape, capacity), 0),
  );
  return { rowTokens, uniqueTokens, trieTokens, rowAttention, packedAttention, packedTokens, lowerBounds };
}

/** plan() and reading what it gives: the rows, or the trees. */
function planAll(cf: Callforest, rollouts: Rollout[], trees: boolean): void {
  let sink = 0;
  for (const rollout of rollouts) {
    const plan: Plan = cf.plan(rollout, trees ? { trees: true } : {});
    for (const row of plan.rows) sink += row.tokenIds.length;
    for (const tree of plan.trees) sink += tree.tokenIds.length;
    plan.release();
  }
  if (sink < 0) throw new Error("unreachable");
}

export async function runPackedBench(log: (line: string) => void = console.log): Promise<PackedBenchRow[]> {
  log("generating packed workloads ...");
  const workloads: Workload[] = [
    { name: "(b) deep rollout", rollouts: [generateDeepRollout({ targetTokens: 10_000_000 })], iterations: 15 },
    { name: "(c) 1,000 small rollouts", rollouts: generateSmallRollouts(1000, 1), iterations: 20 },
    { name: "fork-heavy rollout", rollouts: [generateForkHeavyRollout()], iterations: 30 },
    { name: "16 twins", rollouts: [twinsRollout(16)], iterations: 30 },
    { name: "256 twins", rollouts: [twinsRollout(256)], iterations: 10 },
  ];
  const backends: [string, Callforest][] = [
    ["wasm", await init()],
    ["ts", await init({ backend: "ts" })],
  ];
  const out: PackedBenchRow[] = [];
  for (const w of workloads) {
    const measured = sums(backends[0][1], w.rollouts);
    const bench = new Bench({ iterations: w.iterations, time: 0, warmupIterations: 3, warmupTime: 0 });
    for (const [name, cf] of backends) {
      bench.add(`${name} plain`, () => planAll(cf, w.rollouts, false));
      bench.add(`${name} trees`, () => planAll(cf, w.rollouts, true));
    }
    await bench.run();
    const planMs: PackedBenchRow["planMs"] = {};
    for (const [name] of backends) {
      const median = (name: string) => {
        const result = bench.tasks.find((t) => t.name === name)!.result;
        if (result.state !== "completed") throw new Error(`${w.name} / ${name}: ${result.state}`);
        return result.latency.p50;
      };
      planMs[name] = { plain: median(`${name} plain`), trees: median(`${name} trees`) };
    }
    out.push({
      workload: w.name,
      ...measured,
      inputTokens: w.rollouts.reduce((n, r) => n + eligibleTokens(r), 0),
      planMs,
    });
    log(`${w.name}: done`);
  }
  return out;
}

/**
 * `k` twin subagents (identical prompts and generations, a fork each of one leader), each then
 * continued by its own agent: at the twins' prompt end, k children share every continuation's next
 * token, and the trie's walk must pick among them.
 */
export function twinsRollout(k: number): Rollout {
  const system = Array.from({ length: 2000 }, (_, i) => 1000 + (i % 500));
  const answer = Array.from({ length: 400 }, (_, i) => 2000 + (i % 300));
  const lp = (n: number) => Array.from({ length: n }, () => -0.5);
  const calls: Rollout["calls"] = [];
  const agents: NonNullable<Rollout["agents"]> = [{ id: "L", parent: null }];
  for (let t = 0; t < k; t++) {
    agents.push({ id: `T${t}`, parent: "L" });
    calls.push({
      id: `twin${t}`,
      agent: `T${t}`,
      prompt_token_ids: system,
      generation_token_ids: answer,
      generation_log_probs: lp(answer.length),
    });
  }
  for (let t = 0; t < k; t++) {
    const tool = Array.from({ length: 300 }, (_, i) => 5000 + t * 7 + i);
    const generation = Array.from({ length: 200 }, (_, i) => 9000 + ((t + i) % 400));
    calls.push({
      id: `next${t}`,
      agent: `T${t}`,
      prompt_token_ids: [...system, ...answer, ...tool],
      generation_token_ids: generation,
      generation_log_probs: lp(generation.length),
    });
  }
  return { rollout_id: `twins-${k}`, reward: 1, agents, calls };
}

const ratio = (a: number, b: number) => `${(a / b).toFixed(3)}`;

export function packedTable(rows: PackedBenchRow[]): string {
  const head =
    "| workload | row tokens | unique tokens | trie ÷ unique | " +
    CAPACITIES.map((c) => `packed ÷ trie at ${c / 1024}K (bound)`).join(" | ") +
    " | attention: rows ÷ packed | plan + trees ÷ plan, wasm | plan + trees ÷ plan, ts | plan + trees, wasm, ns a token |";
  const out = [head, `|---|${"---:|".repeat(7 + CAPACITIES.length)}`];
  for (const r of rows) {
    const packed = r.packedTokens.map((p, i) =>
      p === null ? "leaf > C" : `${ratio(p, r.trieTokens)} (≥ ${ratio(r.lowerBounds[i]!, r.trieTokens)})`,
    );
    const tokens = [r.rowTokens, r.uniqueTokens].map((n) => n.toLocaleString("en-US"));
    const attention = `${(r.rowAttention / r.packedAttention).toFixed(2)}×`;
    const cost = (name: string) => ratio(r.planMs[name].trees, r.planMs[name].plain);
    const perToken = ((r.planMs.wasm.trees * 1e6) / r.inputTokens).toFixed(1);
    const trie = ratio(r.trieTokens, r.uniqueTokens);
    const cells = [r.workload, ...tokens, trie, ...packed, attention, cost("wasm"), cost("ts"), perToken];
    out.push(`| ${cells.join(" | ")} |`);
  }
  return out.join("\n");
}

// `npm run bench:packed`: this table alone.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await runPackedBench((line) => process.stderr.write(`${line}\n`));
  process.stdout.write(packedTable(rows) + "\n");
}
