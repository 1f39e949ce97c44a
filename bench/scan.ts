// Micro-benchmark of the byte-level engine (issue 3): LineScanner vs TextDecoder + JSON.parse on
// one realistic rollout line, and RowSerializer vs rowToJson on its rows. Medians of one run.
// Standalone: `npx tsc -p tsconfig.bench.json && node build/bench-out/bench/scan.js`; run.ts can
// call runScanBench() + scanTable().
import { pathToFileURL } from "node:url";
import { Bench } from "tinybench";
import { init } from "callforest";
import { LineScanner } from "../src/ingest/scanner.js";
import { RowSerializer } from "../src/ingest/serialize.js";
import { rowToJson } from "../src/output/jsonl.js";
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
  workload: string;
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

/** A generation-heavy line: short prompts, long generations, so half the values are logprobs. */
function generationHeavyLine(): { text: string; values: number } {
  let seed = 12345;
  const random = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const calls: string[] = [];
  let values = 0;
  for (let c = 0; c < 200; c++) {
    const prompt = Array.from({ length: 200 }, () => Math.floor(random() * 150_000));
    const generation = Array.from({ length: 2000 }, () => Math.floor(random() * 150_000));
    const logprobs = generation.map(() => Math.fround(-Math.exp(-random() * 20)));
    calls.push(
      `{"id":"c${c}","prompt_token_ids":[${prompt.join(",")}],"generation_token_ids":[${generation.join(",")}],` +
        `"generation_log_probs":[${logprobs.join(",")}]}`,
    );
    values += prompt.length + 2 * generation.length;
  }
  return { text: `{"rollout_id":"gen-heavy","reward":1,"calls":[${calls.join(",")}]}`, values };
}

async function scanWorkload(
  name: string,
  text: string,
  values: number,
  log: (line: string) => void,
): Promise<ScanBenchRow[]> {
  const bytes = new TextEncoder().encode(text);
  log(`scan bench: ${name}: ${(bytes.length / 1e6).toFixed(1)} MB, ${values.toLocaleString("en-US")} array values`);
  const simd = await LineScanner.create({ url: wasmUrl(true) });
  const scalar = await LineScanner.create({ url: wasmUrl(false) });
  const decoder = new TextDecoder();
  const check = simd.scan(bytes);
  if (!check.ok) throw new Error(check.detail);
  const bench = new Bench({ iterations: 15, time: 0, warmupIterations: 3, warmupTime: 0 });
  bench.add("JSON.parse", () => JSON.parse(decoder.decode(bytes)));
  bench.add("JSON.parse + typed arrays", () =>
    JSON.parse(decoder.decode(bytes), (key, v) =>
      Array.isArray(v) && (key === "prompt_token_ids" || key === "generation_token_ids")
        ? Int32Array.from(v)
        : Array.isArray(v) && key === "generation_log_probs"
          ? Float32Array.from(v)
          : v,
    ),
  );
  bench.add("LineScanner (SIMD)", () => simd.scan(bytes));
  bench.add("LineScanner (scalar)", () => scalar.scan(bytes));
  const ms = await medians(bench);
  return Object.entries(ms).map(([task, medianMs]) => ({
    workload: name,
    task,
    bytes: bytes.length,
    values,
    medianMs,
    baseline: "JSON.parse",
  }));
}

export async function runScanBench(log: (line: string) => void = console.log): Promise<ScanBenchRow[]> {
  log("scan bench: generating lines ...");
  const rollout = generateDeepRollout({ targetTokens: 2_000_000, seed: 7 });
  const deepValues =
    rollout.calls.reduce((n, c) => n + c.prompt_token_ids.length + c.generation_token_ids.length, 0) +
    logprobsOf(rollout);
  const heavy = generationHeavyLine();
  const rows: ScanBenchRow[] = [
    ...(await scanWorkload("deep rollout (prompt-heavy)", lineOf(rollout), deepValues, log)),
    ...(await scanWorkload("generation-heavy (1/2 logprobs)", heavy.text, heavy.values, log)),
  ];
  log(
    `scan bench: deep rollout has ${eligibleTokens(rollout).toLocaleString("en-US")} eligible tokens; ` +
      `planning its rows ...`,
  );

  const cf = await init();
  const plan = cf.plan(rollout);
  if (plan.report.status !== "ok") throw new Error(plan.report.detail);
  const planRows = plan.rows as unknown as Row[];
  const encoder = new TextEncoder();
  const outBytes = planRows.reduce((n, r) => n + encoder.encode(rowToJson(r, "bits")).length + 1, 0);
  const outValues = planRows.reduce((n, r) => n + 2 * r.numTokens, 0);
  const serializer = await RowSerializer.create({ url: wasmUrl(true) });
  const serializerScalar = await RowSerializer.create({ url: wasmUrl(false) });
  let sink = 0;
  const writeBench = new Bench({ iterations: 5, time: 0, warmupIterations: 1, warmupTime: 0 });
  writeBench.add("rowToJson + encode", () => {
    for (const row of planRows) sink += encoder.encode(rowToJson(row, "bits") + "\n").length;
  });
  writeBench.add("RowSerializer (SIMD)", () => {
    for (const row of planRows) serializer.writeRow(row, "bits", (chunk) => (sink += chunk.length));
  });
  writeBench.add("RowSerializer (scalar)", () => {
    for (const row of planRows) serializerScalar.writeRow(row, "bits", (chunk) => (sink += chunk.length));
  });
  const writeMs = await medians(writeBench);
  plan.release();
  if (sink === 0) throw new Error("nothing written");
  for (const [task, medianMs] of Object.entries(writeMs)) {
    rows.push({
      workload: "rows of the deep rollout",
      task,
      bytes: outBytes,
      values: outValues,
      medianMs,
      baseline: "rowToJson + encode",
    });
  }
  return rows;
}

export function scanTable(rows: ScanBenchRow[]): string {
  const key = (workload: string, task: string) => `${workload}\u0000${task}`;
  const byName = new Map(rows.map((r) => [key(r.workload, r.task), r]));
  const out = [
    "| workload | task | MB | median ms | MB/s | values/s | speed-up vs baseline |",
    "|---|---|---:|---:|---:|---:|---:|",
  ];
  for (const r of rows) {
    const base = byName.get(key(r.workload, r.baseline))!;
    out.push(
      `| ${r.workload} | ${r.task} | ${(r.bytes / 1e6).toFixed(1)} | ${r.medianMs.toFixed(1)} | ` +
        `${(r.bytes / 1e6 / (r.medianMs / 1000)).toFixed(0)} | ` +
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
