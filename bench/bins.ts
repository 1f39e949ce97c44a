// Bins on many small trees (issue 31): N one-token roots at capacity 3, so about N / 3 bins for
// first-fit decreasing to search. plan() with bins on each backend, and the packer alone; median
// of a few runs (one at the largest sizes).
//   npm run prebench && node build/bench-out/bench/bins.js [N ...]   (also part of npm run bench)
import { pathToFileURL } from "node:url";
import { init } from "callforest";
import { layOutBins } from "../src/plan/packing.js";
import type { Rollout } from "../src/types.js";
import { median } from "./rows-process.js";

const SIZES = [10_000, 100_000, 1_000_000];
const CAPACITY = 3;

/** N calls with an empty prompt and one distinct generated token: N one-token trees. */
function oneTokenRoots(n: number): Rollout {
  const calls = Array.from({ length: n }, (_, i) => ({
    id: `c${i}`,
    prompt_token_ids: [],
    generation_token_ids: [i + 1],
    generation_log_probs: [-1],
  }));
  return { rollout_id: `roots-${n}`, reward: 1, calls } as unknown as Rollout;
}

function time(runs: number, work: () => void): number {
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    work();
    ms.push(performance.now() - start);
  }
  return median(ms);
}

export async function runBinsBench(sizes = SIZES, log: (line: string) => void = console.log): Promise<string> {
  const backends = [
    { name: "wasm", cf: await init() },
    { name: "ts", cf: await init({ backend: "ts" }) },
  ];
  const table = [
    `| roots | bins | layOutBins ms | ${backends.map((b) => `plan() ${b.name} ms`).join(" | ")} |`,
    `|---:|---:|---:|${backends.map(() => "---:").join("|")}|`,
  ];
  for (const n of sizes) {
    log(`${n} one-token roots at capacity ${CAPACITY} ...`);
    const runs = n >= 500_000 ? 1 : 3;
    const shape = { parents: new Int32Array(n).fill(-1), fullLengths: new Int32Array(n).fill(1) };
    let bins = 0;
    const packer = time(runs, () => {
      bins = layOutBins(shape, CAPACITY).length;
    });
    const rollout = oneTokenRoots(n);
    const planMs = backends.map(({ cf }) =>
      time(runs, () => {
        const plan = cf.plan(rollout, { capacity: CAPACITY });
        if (plan.report.status !== "ok" || plan.bins.length !== bins) throw new Error(`bins of ${n} roots failed`);
        plan.release();
      }),
    );
    table.push(`| ${n} | ${bins} | ${packer.toFixed(0)} | ${planMs.map((ms) => ms.toFixed(0)).join(" | ")} |`);
  }
  return table.join("\n");
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const sizes = process.argv.slice(2).map(Number);
  const table = await runBinsBench(sizes.length > 0 ? sizes : SIZES, (line) => process.stderr.write(`${line}\n`));
  process.stdout.write(table + "\n");
}
