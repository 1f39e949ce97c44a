// Benchmark of the packed layouts (issue 16): what packing saves (tokens, attention cost) at a
// trainer's capacities, and what it costs plan() on each backend, all in one run.
import { pathToFileURL } from "node:url";
import { Bench } from "tinybench";
import { init, type Callforest } from "callforest";
import { packedTokensLowerBound, type ForestShape } from "../src/plan/packing.js";
import type { Plan, Rollout } from "../src/types.js";
import { generateDeepRollout, generateForkHeavyRollout, generateSmallRollouts } from "./generate.js";

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
  /** Per capacity: packed tokens, or null when some leaf is longer (row_exceeds_capacity). */
  packedTokens: (number | null)[];
  /** Per capacity: the fewest packed tokens any packer could reach (packedTokensLowerBound). */
  lowerBounds: (number | null)[];
  /** Σ over rows of the keys each token sees (causal): n(n+1)/2 a row. */
  rowAttention: number;
  /** Σ over packed tree tokens of the keys each sees (k ≤ q < end(segment(k))): position + 1. */
  packedAttention: number;
  /** Median ms of plan() alone and with trees, per backend. */
  planMs: Record<string, { plain: number; trees: number }>;
}

/** The linked forest of a plan as the packer sees it (eligible calls, in ledger order). */
function shapeOf(plan: Plan): ForestShape {
  const eligible = plan.forest.filter((c) => c.eligible);
  const index = new Map(eligible.map((c, i) => [c.id, i]));
  return {
    parents: eligible.map((c) => (c.parent === null ? -1 : index.get(c.parent)!)),
    fullLengths: eligible.map((c) => c.promptLength + c.generationLength),
  };
}

function sums(cf: Callforest, rollouts: Rollout[]) {
  let rowTokens = 0;
  let uniqueTokens = 0;
  let rowAttention = 0;
  let packedAttention = 0;
  for (const rollout of rollouts) {
    const plan = cf.plan(rollout, { trees: true });
    rowTokens += plan.report.row_tokens;
    uniqueTokens += plan.report.unique_tokens;
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
    const plan = cf.plan(rollout);
    const shape = shapeOf(plan);
    plan.release();
    return shape;
  });
  const lowerBounds = CAPACITIES.map((capacity, i) =>
    packedTokens[i] === null ? null : shapes.reduce((n, shape) => n + packedTokensLowerBound(shape, capacity), 0),
  );
  return { rowTokens, uniqueTokens, rowAttention, packedAttention, packedTokens, lowerBounds };
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
    out.push({ workload: w.name, ...measured, planMs });
    log(`${w.name}: done`);
  }
  return out;
}

const ratio = (a: number, b: number) => `${(a / b).toFixed(3)}`;

export function packedTable(rows: PackedBenchRow[]): string {
  const head =
    "| workload | row tokens | unique tokens | " +
    CAPACITIES.map((c) => `packed ÷ unique at ${c / 1024}K (bound)`).join(" | ") +
    " | attention: rows ÷ packed | plan + trees ÷ plan, wasm | plan + trees ÷ plan, ts |";
  const out = [head, `|---|${"---:|".repeat(5 + CAPACITIES.length)}`];
  for (const r of rows) {
    const packed = r.packedTokens.map((p, i) =>
      p === null ? "leaf > C" : `${ratio(p, r.uniqueTokens)} (≥ ${ratio(r.lowerBounds[i]!, r.uniqueTokens)})`,
    );
    const tokens = [r.rowTokens, r.uniqueTokens].map((n) => n.toLocaleString("en-US"));
    const attention = `${(r.rowAttention / r.packedAttention).toFixed(2)}×`;
    const cost = (name: string) => ratio(r.planMs[name].trees, r.planMs[name].plain);
    const cells = [r.workload, ...tokens, ...packed, attention, cost("wasm"), cost("ts")];
    out.push(`| ${cells.join(" | ")} |`);
  }
  return out.join("\n");
}

// `npm run bench:packed`: this table alone.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await runPackedBench((line) => process.stderr.write(`${line}\n`));
  process.stdout.write(packedTable(rows) + "\n");
}
