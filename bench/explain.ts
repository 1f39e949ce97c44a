// `callforest explain` against `callforest rows` on the inputs that once made explain grow with
// the square of the calls (issue 37; bench/explain-inputs.ts): each command as its own process,
// three runs each, medians of wall time and peak RSS, and explain's ratio to rows (the goal: at
// most 3× in both).
//   npm run prebench && node build/bench-out/bench/explain.js
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Rollout } from "../src/types.js";
import { writeChain } from "./delta-chain.js";
import { oneAgentRollouts, slidingWindowRollout } from "./explain-inputs.js";
import { median, root, runNode, type Run } from "./rows-process.js";

const RUNS = 3;

export interface ExplainBenchRow {
  workload: string;
  mb: number;
  rows: { seconds: number; rssMb: number };
  explain: { seconds: number; rssMb: number };
}

/** A rollout as a JSONL line (typed arrays written as lists). */
function line(rollout: Rollout): string {
  return JSON.stringify(rollout, (_, value: unknown) =>
    ArrayBuffer.isView(value) ? Array.from(value as unknown as ArrayLike<number>) : value,
  );
}

function writeJsonl(path: string, rollouts: readonly Rollout[]): string {
  writeFileSync(path, rollouts.map(line).join("\n") + "\n");
  return path;
}

async function medianRun(argv: string[]): Promise<{ seconds: number; rssMb: number }> {
  const runs: Run[] = [];
  for (let i = 0; i < RUNS; i++) runs.push(await runNode(join(root(), "bin", "callforest.js"), argv));
  return { seconds: median(runs.map((r) => r.seconds)), rssMb: median(runs.map((r) => r.rssMb)) };
}

export async function runExplainBench(log: (line: string) => void): Promise<ExplainBenchRow[]> {
  const dir = mkdtempSync(join(tmpdir(), "callforest-explain-bench-"));
  try {
    const window = writeJsonl(join(dir, "window.jsonl"), [slidingWindowRollout(3000)]);
    const oneAgent = writeJsonl(join(dir, "one-agent.jsonl"), oneAgentRollouts(10_000, 10));
    const chainDir = join(dir, "chain");
    mkdirSync(chainDir);
    const chain = writeChain(chainDir, 16_000);
    const chainArgs = ["--from", "gym-observed", "--tokens", chainDir];
    const workloads: [string, string, string[], number][] = [
      ["sliding window, 3,000 calls", window, [], statSync(window).size],
      [
        "delta chain, 16,000 entries",
        chain,
        chainArgs,
        statSync(chain).size + statSync(join(chainDir, "r-0.tokens.jsonl")).size,
      ],
      ["10⁵ one-agent calls (10,000 rollouts)", oneAgent, [], statSync(oneAgent).size],
    ];
    const out: ExplainBenchRow[] = [];
    for (const [workload, input, extra, bytes] of workloads) {
      log(`${workload}: rows ...`);
      const rowsOut = join(dir, "rows.jsonl");
      const rows = await medianRun(["rows", input, ...extra, "--jobs", "1", "-o", rowsOut, "--quiet"]);
      log(`${workload}: explain ...`);
      const explain = await medianRun(["explain", input, ...extra, "--json"]);
      out.push({ workload, mb: bytes / 2 ** 20, rows, explain });
    }
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function explainTable(rows: ExplainBenchRow[]): string {
  const out = [
    "| input | MB | `rows --jobs 1` | `explain --json` | time ratio | `rows` peak RSS | `explain` peak RSS | RSS ratio |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const r of rows) {
    out.push(
      `| ${r.workload} | ${r.mb.toFixed(1)} | ${r.rows.seconds.toFixed(2)} s | ${r.explain.seconds.toFixed(2)} s | ` +
        `${(r.explain.seconds / r.rows.seconds).toFixed(2)}× | ${r.rows.rssMb.toFixed(0)} MB | ` +
        `${r.explain.rssMb.toFixed(0)} MB | ${(r.explain.rssMb / r.rows.rssMb).toFixed(2)}× |`,
    );
  }
  return out.join("\n");
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await runExplainBench((text) => process.stderr.write(`${text}\n`));
  process.stdout.write(`${explainTable(rows)}\n`);
}
