// Columnar benchmark: `callforest rows` end to end on the ~1 GB ingest input with `-o rows.parquet`
// against `-o rows.jsonl` (MB/s of input, output size, CPU s, peak RSS), the trainer side
// (DuckDB scanning the Parquet, touching token_ids and loss_mask, against JSON-parsing the JSONL
// rows in Node), and the default --jobs against --jobs 1 on each workload: the 1 GB file and a
// ~300 MB one of small rollouts and two ~90 MB ones. Runs are interleaved; medians.
//   npm run bench (or: runColumnarBench() from bench/run.ts)
// Environment: COLUMNAR_BENCH_MB (default 1024), COLUMNAR_BENCH_REPEATS (default 3).
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { DuckDBInstance } from "@duckdb/node-api";
import { tableFromIPC, tableToIPC } from "apache-arrow";
import { loadParquet } from "../src/columnar/load-node.js";
import { parquetFromIpc } from "../src/columnar/parquet.js";
import type { ParquetCompression } from "../src/columnar/types.js";
import { WORKERS_FROM_BYTES } from "../src/ingest/run.js";
import { makeJsonl, makeMixJsonl, type JsonlInput } from "./make-jsonl.js";
import { median, root, runRows, type Run } from "./rows-process.js";

/** Node's side of the trainer: every JSONL row through JSON.parse, summing token ids and trained tokens. */
function parseJsonlRows(path: string): { rows: number; tokens: number; trained: number; idSum: number } {
  const fd = openSync(path, "r");
  const chunk = Buffer.allocUnsafe(16 << 20);
  let carry = "";
  const totals = { rows: 0, tokens: 0, trained: 0, idSum: 0 };
  const take = (line: string) => {
    if (line === "") return;
    const row = JSON.parse(line) as { token_ids: number[]; loss_mask: string; num_tokens: number };
    totals.rows++;
    totals.tokens += row.token_ids.length;
    for (const id of row.token_ids) totals.idSum += id;
    const mask = Buffer.from(row.loss_mask, "base64");
    for (let i = 0; i < row.num_tokens; i++) totals.trained += (mask[i >> 3] >> (i & 7)) & 1;
  };
  try {
    for (;;) {
      const got = readSync(fd, chunk, 0, chunk.length, null);
      if (got === 0) break;
      const text = carry + chunk.toString("utf8", 0, got);
      const lines = text.split("\n");
      carry = lines.pop()!;
      for (const line of lines) take(line);
    }
    take(carry);
  } finally {
    closeSync(fd);
  }
  return totals;
}

/** DuckDB reading every token id and mask bit, two ways: per-row list sums, and the tokens flattened. */
const TRAINER_QUERIES = {
  "list sums":
    "SELECT count(*) AS rows, sum(len(token_ids)) AS tokens, sum(list_sum(loss_mask::INTEGER[])) AS trained, " +
    "sum(list_sum(token_ids)) AS id_sum FROM read_parquet('FILE')",
  flattened:
    "SELECT (SELECT count(*) FROM read_parquet('FILE')) AS rows, count(*) AS tokens, count_if(m) AS trained, " +
    "sum(t) AS id_sum FROM (SELECT unnest(token_ids) AS t, unnest(loss_mask) AS m FROM read_parquet('FILE'))",
};
type TrainerQuery = keyof typeof TRAINER_QUERIES;

/** DuckDB's side: one full scan of the Parquet rows touching token_ids and loss_mask. */
async function scanParquet(path: string, query: TrainerQuery): Promise<{ seconds: number; totals: number[] }> {
  const connection = await (await DuckDBInstance.create(":memory:")).connect();
  try {
    const started = process.hrtime.bigint();
    const result = await connection.runAndReadAll(TRAINER_QUERIES[query].replaceAll("FILE", path));
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    return { seconds, totals: result.getRows()[0].map(Number) };
  } finally {
    connection.closeSync();
  }
}

/**
 * The encoder's floor: parquet-wasm alone (one thread, as `rows` runs it) turning the Arrow IPC
 * file that `rows -o rows.arrow` wrote into Parquet, with the writer settings `rows` uses.
 */
async function encodeAlone(arrowFile: string, compression: ParquetCompression): Promise<number> {
  const pq = await loadParquet();
  const stream = tableToIPC(tableFromIPC(readFileSync(arrowFile)), "stream");
  const started = process.hrtime.bigint();
  parquetFromIpc(pq, stream, compression);
  return Number(process.hrtime.bigint() - started) / 1e9;
}

export async function runColumnarBench(
  options: { megabytes?: number; repeats?: number; log?: (s: string) => void } = {},
): Promise<{ table: string }> {
  const log = options.log ?? ((s: string) => process.stderr.write(s + "\n"));
  const megabytes = options.megabytes ?? Number(process.env.COLUMNAR_BENCH_MB ?? 1024);
  const repeats = options.repeats ?? Number(process.env.COLUMNAR_BENCH_REPEATS ?? 3);
  const bin = join(root(), "bin", "callforest.js");
  const big = await makeJsonl({ targetBytes: Math.round(megabytes * 2 ** 20), log });
  // The workload two workers lost on: small rollouts and two ~90 MB ones, ~300 MB in all.
  const mixed = await makeMixJsonl(megabytes, log);
  const dir = mkdtempSync(join(tmpdir(), "callforest-columnar-bench-"));
  const out = (name: string) => join(dir, name);
  const report = out("report.jsonl");
  const describe = (input: JsonlInput) =>
    `${(input.bytes / 2 ** 20).toFixed(0)} MB, ${input.rollouts} rollouts (${input.huge} huge), ` +
    `${(input.tokens / 1e6).toFixed(0)} M tokens`;

  const configs = [
    { input: big, name: "-o rows.jsonl (default --jobs)", argv: ["-o", out("rows.jsonl")], output: out("rows.jsonl") },
    {
      input: big,
      name: "-o rows.parquet (default --jobs; zstd)",
      argv: ["-o", out("rows.parquet")],
      output: out("rows.parquet"),
    },
    {
      input: big,
      name: "-o rows.parquet --compression snappy",
      argv: ["-o", out("snappy.parquet"), "--compression", "snappy"],
      output: out("snappy.parquet"),
    },
    { input: big, name: "-o rows.arrow (Arrow IPC file)", argv: ["-o", out("rows.arrow")], output: out("rows.arrow") },
    {
      input: big,
      name: "-o rows.jsonl --jobs 1",
      argv: ["-o", out("rows1.jsonl"), "--jobs", "1"],
      output: out("rows1.jsonl"),
    },
    {
      input: big,
      name: "-o rows.parquet --jobs 1",
      argv: ["-o", out("rows1.parquet"), "--jobs", "1"],
      output: out("rows1.parquet"),
    },
    { input: big, name: "-o /dev/null (default --jobs)", argv: ["-o", "/dev/null"], output: null },
    { input: big, name: "-o /dev/null --jobs 1", argv: ["-o", "/dev/null", "--jobs", "1"], output: null },
    { input: mixed, name: "-o /dev/null (default --jobs)", argv: ["-o", "/dev/null"], output: null },
    { input: mixed, name: "-o /dev/null --jobs 1", argv: ["-o", "/dev/null", "--jobs", "1"], output: null },
    { input: mixed, name: "-o /dev/null --jobs 2", argv: ["-o", "/dev/null", "--jobs", "2"], output: null },
    {
      input: mixed,
      name: "-o rows.parquet (default --jobs)",
      argv: ["-o", out("mixed.parquet")],
      output: out("mixed.parquet"),
    },
    {
      input: mixed,
      name: "-o rows.parquet --jobs 1",
      argv: ["-o", out("mixed1.parquet"), "--jobs", "1"],
      output: out("mixed1.parquet"),
    },
  ];
  const runs = configs.map(() => [] as Run[]);
  const sizes = configs.map(() => 0);
  // One untimed run on each input first: its bytes in the page cache, as for every timed run.
  for (const input of [big, mixed]) await runRows(bin, [input.path, "-o", "/dev/null", "--quiet", "--jobs", "1"]);
  for (let r = 0; r < repeats; r++) {
    for (const [i, config] of configs.entries()) {
      const result = await runRows(bin, [config.input.path, ...config.argv, "--report", report, "--quiet"]);
      runs[i].push(result);
      if (config.output !== null) sizes[i] = statSync(config.output).size;
      log(
        `  ${config.name} on ${(config.input.bytes / 2 ** 20).toFixed(0)} MB: ${result.seconds.toFixed(2)} s, ` +
          `cpu ${result.cpu.toFixed(2)} s, ${result.rssMb.toFixed(0)} MB RSS (load ${loadavg()[0].toFixed(1)})`,
      );
    }
  }
  const stats = configs.map((config, i) => {
    const seconds = median(runs[i].map((run) => run.seconds));
    return {
      ...config,
      seconds,
      cpu: median(runs[i].map((run) => run.cpu)),
      rss: Math.max(...runs[i].map((run) => run.rssMb)),
      mbPerSecond: config.input.bytes / 2 ** 20 / seconds,
      size: sizes[i],
    };
  });
  const row = (s: (typeof stats)[number]) =>
    `| ${(s.input.bytes / 2 ** 20).toFixed(0)} MB | ${s.name} | ${s.seconds.toFixed(2)} | ` +
    `${s.mbPerSecond.toFixed(0)} | ${s.cpu.toFixed(2)} | ${s.rss.toFixed(0)} | ` +
    `${s.size === 0 ? "–" : (s.size / 2 ** 20).toFixed(1)} |`;

  // The trainer side, on the files the default runs wrote.
  const jsonlReads: number[] = [];
  const parquetReads: Record<TrainerQuery, number[]> = { "list sums": [], flattened: [] };
  let agree = true;
  for (let r = 0; r < repeats; r++) {
    const startedJson = process.hrtime.bigint();
    const json = parseJsonlRows(out("rows.jsonl"));
    jsonlReads.push(Number(process.hrtime.bigint() - startedJson) / 1e9);
    for (const query of Object.keys(TRAINER_QUERIES) as TrainerQuery[]) {
      const parquet = await scanParquet(out("rows.parquet"), query);
      parquetReads[query].push(parquet.seconds);
      agree &&= parquet.totals.join() === [json.rows, json.tokens, json.trained, json.idSum].join();
    }
  }
  const encoded = { zstd: [] as number[], snappy: [] as number[] };
  for (let r = 0; r < repeats; r++)
    for (const compression of ["zstd", "snappy"] as const)
      encoded[compression].push(await encodeAlone(out("rows.arrow"), compression));
  rmSync(dir, { recursive: true, force: true });

  const [jsonl, parquet] = [stats[0], stats[1]];
  const jsonRead = median(jsonlReads);
  const reads = (Object.keys(TRAINER_QUERIES) as TrainerQuery[]).map((query) => {
    const seconds = median(parquetReads[query]);
    return `${query} ${seconds.toFixed(2)} s, ${(jsonRead / seconds).toFixed(1)}× faster`;
  });
  const pairs = [
    [stats[6], stats[7]],
    [stats[8], stats[9]],
    [stats[11], stats[12]],
  ];
  const speedups = pairs
    .map(
      ([auto, one]) =>
        `${(auto.input.bytes / 2 ** 20).toFixed(0)} MB ${auto.name.replace(" (default --jobs)", "")} ` +
        `${(one.seconds / auto.seconds).toFixed(2)}×` +
        // Below the line the default plans in-process, as --jobs 1 does: the ratio is the noise.
        (auto.input.bytes < WORKERS_FROM_BYTES ? " (in-process: the --jobs 1 path)" : ""),
    )
    .join("; ");
  const table = [
    `Inputs: ${describe(big)}; ${describe(mixed)}. Median of ${repeats}; ` +
      `report to a file in every run; ${availableParallelism()} cores.`,
    "",
    "| input | run | median s | MB/s | CPU s | peak RSS MB | output MB |",
    "|---|---|---:|---:|---:|---:|---:|",
    ...stats.map(row),
    "",
    `Parquet vs JSONL end to end: ${(parquet.mbPerSecond / jsonl.mbPerSecond).toFixed(2)}× the throughput ` +
      `(goal ≥ 1.5×), ${((100 * parquet.size) / jsonl.size).toFixed(0)}% of the size (goal ≤ 60%), ` +
      `${(parquet.cpu / jsonl.cpu).toFixed(2)}× the CPU, ` +
      `peak RSS +${(parquet.rss - jsonl.rss).toFixed(0)} MB (goal ≤ +256 MB).`,
    `Parquet encoding alone (parquet-wasm on one thread, the same row groups): ` +
      `zstd ${median(encoded.zstd).toFixed(2)} s, ` +
      `snappy ${median(encoded.snappy).toFixed(2)} s, against ${jsonl.seconds.toFixed(2)} s for all of the JSONL run.`,
    `Trainer side: JSON.parse of the JSONL rows in Node (row count, tokens, trained tokens, Σ token ids) ` +
      `${jsonRead.toFixed(2)} s; DuckDB scanning the Parquet for the same sums: ${reads.join("; ")} (goal ≥ 10×); ` +
      (agree ? "all give the same sums." : "THE SUMS DIFFER."),
    `Default --jobs vs --jobs 1: ${speedups} (goal ≥ 1.00× each).`,
    `Load average at the end: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")} (other work on the machine slows the wall clock).`,
  ].join("\n");
  return { table };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { table } = await runColumnarBench();
  process.stdout.write(table + "\n");
}
