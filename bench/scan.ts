// Micro-benchmark of the byte-level engine (issue 3): LineScanner vs TextDecoder + JSON.parse on
// one realistic rollout line, and RowSerializer vs rowToJson on its rows. Medians of one run.
// Standalone: `npx tsc -p tsconfig.bench.json && node build/bench-out/bench/scan.js`; run.ts can
// call runScanBench() + scanTable().
import { pathToFileURL } from "node:url";
import { Bench } from "tinybench";
import { init } from "callforest";
import { LineScanner } from "../src/ingest/scanner.js";
import { RowSerializer } from "../src/ingest/serialize.js";
import { rowToJson } from "../src/output.js";
import type { Rollout, Row } from "../src/types.js";
import { eligibleTokens, generateDeepRollout } from "./generate.js";

/** build/bench-out/bench/scan.js → build/scan-*.wasm */
const wasmUrl = (simd: boolean) => new URL(`../../scan-${simd ? "simd" : "scalar"}.wasm`, import.meta.url);

/** The rollout as a JSONL line, arrays written like Gym/vLLM do (float32 logprobs widened to double). */
function lineOf(rollout: Rollout): string {
  return JSON.stringify(rollout, (_key, value: unknown) => {
    if (value instanceof Float32Array || value instanceof Int32Array) return Array.from(value);
    return value;
  });
}

function logprobsOf(rollout: Rollout): number {
  return rollout.calls.reduce((n, c) => n + c.generation_log_probs.length, 0);
}

export interface ScanBenchRow {
  task: string;
  bytes: number;
  /** Array values handled (token ids + logprobs). */
  values: number;
  medianMs: number;
  /** The baseline this task is compared with. */
  baseline: string;
}

async function medians(bench: Bench): Promise<Record<string, number>> {
  await bench.run();
  const out: Record<string, number> = {};
  for (const task of bench.tasks) {
    if (task.result.state !== "completed") throw new Error(`${task.name}: ${task.result.state}`);
    out[task.name] = task.result.latency.p50;
  }
  return out;
}

export async function runScanBench(log: (line: string) => void = console.log): Promise<ScanBenchRow[]> {
  log("scan bench: generating a rollout ...");
  const rollout = generateDeepRollout({ targetTokens: 2_000_000, seed: 7 });
  const text = lineOf(rollout);
  const bytes = new TextEncoder().encode(text);
  const values = rollout.calls.reduce((n, c) => n + c.prompt_token_ids.length + c.generation_token_ids.length, 0) + logprobsOf(rollout);
  log(`scan bench: line of ${(bytes.length / 1e6).toFixed(1)} MB, ${values.toLocaleString("en-US")} array values, ${eligibleTokens(rollout).toLocaleString("en-US")} eligible tokens`);

  const simd = await LineScanner.create({ url: wasmUrl(true) });
  const scalar = await LineScanner.create({ url: wasmUrl(false) });
  const decoder = new TextDecoder();
  const check = simd.scan(bytes);
  if (!check.ok) throw new Error(check.detail);

  const scanBench = new Bench({ iterations: 15, time: 0, warmupIterations: 3, warmupTime: 0 });
  scanBench.add("JSON.parse", () => JSON.parse(decoder.decode(bytes)));
  scanBench.add("JSON.parse + typed arrays", () =>
    JSON.parse(decoder.decode(bytes), (key, v) =>
      Array.isArray(v) && (key === "prompt_token_ids" || key === "generation_token_ids") ? Int32Array.from(v) : Array.isArray(v) && key === "generation_log_probs" ? Float32Array.from(v) : v,
    ),
  );
  scanBench.add("LineScanner (SIMD)", () => simd.scan(bytes));
  scanBench.add("LineScanner (scalar)", () => scalar.scan(bytes));
  const scanMs = await medians(scanBench);

  log("scan bench: planning rows ...");
  const cf = await init();
  const plan = cf.plan(rollout);
  if (plan.report.status !== "ok") throw new Error(plan.report.detail);
  const rows = plan.rows as unknown as Row[];
  const outBytes = rows.reduce((n, r) => n + new TextEncoder().encode(rowToJson(r, "bits")).length + 1, 0);
  const outValues = rows.reduce((n, r) => n + 2 * r.numTokens, 0);
  const serializer = await RowSerializer.create({ url: wasmUrl(true) });
  const serializerScalar = await RowSerializer.create({ url: wasmUrl(false) });
  const encoder = new TextEncoder();
  let sink = 0;
  const writeBench = new Bench({ iterations: 5, time: 0, warmupIterations: 1, warmupTime: 0 });
  writeBench.add("rowToJson + encode", () => {
    for (const row of rows) sink += encoder.encode(rowToJson(row, "bits") + "\n").length;
  });
  writeBench.add("RowSerializer (SIMD)", () => {
    for (const row of rows) serializer.writeRow(row, "bits", (chunk) => (sink += chunk.length));
  });
  writeBench.add("RowSerializer (scalar)", () => {
    for (const row of rows) serializerScalar.writeRow(row, "bits", (chunk) => (sink += chunk.length));
  });
  const writeMs = await medians(writeBench);
  plan.release();
  if (sink === 0) throw new Error("nothing written");

  const scanRows: ScanBenchRow[] = Object.entries(scanMs).map(([task, ms]) => ({ task, bytes: bytes.length, values, medianMs: ms, baseline: "JSON.parse" }));
  const writeRows: ScanBenchRow[] = Object.entries(writeMs).map(([task, ms]) => ({
    task,
    bytes: outBytes,
    values: outValues,
    medianMs: ms,
    baseline: "rowToJson + encode",
  }));
  return [...scanRows, ...writeRows];
}

export function scanTable(rows: ScanBenchRow[]): string {
  const byName = new Map(rows.map((r) => [r.task, r]));
  const out = ["| task | MB | median ms | MB/s | values/s | speed-up vs baseline |", "|---|---:|---:|---:|---:|---:|"];
  for (const r of rows) {
    const base = byName.get(r.baseline)!;
    out.push(
      `| ${r.task} | ${(r.bytes / 1e6).toFixed(1)} | ${r.medianMs.toFixed(1)} | ${(r.bytes / 1e6 / (r.medianMs / 1000)).toFixed(0)} | ` +
        `${(r.values / 1e6 / (r.medianMs / 1000)).toFixed(1)} M | ${(base.medianMs / r.medianMs).toFixed(2)}× |`,
    );
  }
  return out.join("\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await runScanBench((line) => process.stderr.write(`${line}\n`));
  console.log("\n### Byte engine: one rollout line in, rows out (medians, one run)\n");
  console.log(scanTable(rows));
}
