// Ingest benchmark: `callforest rows` end to end (rows + report written) on a generated ~1 GB
// JSONL file, as a real process: the fast path (WASM scanner and row writer) with --jobs 1 and
// --jobs 2 against the JSON.parse path (JSON.parse + rowToJson), and JSON.parse with the WASM row
// writer, in the same run. Runs are
// interleaved and repeated; the table shows medians. Needs `npm run build` (bin runs dist/).
//   npm run bench:ingest   (or: runIngestBench() from bench/run.ts)
// A reference row: two independent `--jobs 1` processes side by side, each on half the file (cut
// at the line nearest the middle): a split that coordinates nothing (each process pays its own
// start-up), to set --jobs 2 against. The halves are deleted afterwards.
// Environment: INGEST_BENCH_MB (input size, default 1024), INGEST_BENCH_REPEATS (default 3).
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { closeSync, openSync, readFileSync, readSync, renameSync, rmSync, writeSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { makeJsonl } from "./make-jsonl.js";

export interface IngestResult {
  name: string;
  argv: string[];
  seconds: number[];
  median: number;
  /** CPU seconds (user + system, all threads) of each run, when the OS tells (Linux). */
  cpu: number[];
  medianCpu: number | null;
  mbPerSecond: number;
  tokensPerSecond: number;
  reportHash: string;
}

function findRoot(): string {
  // Compiled to build/bench-out/bench/ingest.js (npm run bench): the package root is a few levels up.
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    try {
      if (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).name === "callforest") return dir;
    } catch {
      // keep looking upwards
    }
    dir = dirname(dir);
  }
  throw new Error("cannot find the callforest package root");
}

/** CPU time of this process's waited-for children, in seconds (Linux /proc), or null. */
function childrenCpu(): number | null {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // fields[0] is field 3 (state); cutime and cstime are fields 16 and 17, in clock ticks.
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return null;
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** The report without its line numbers, hashed: the halves' reports number lines from 1 each. */
function hashWithoutLines(reports: string[]): string {
  const hash = createHash("sha256");
  for (const report of reports) hash.update(report.replace(/"line":\d+,/g, ""));
  return hash.digest("hex").slice(0, 16);
}

/** `path` cut in two at the first line that starts at or after the middle byte, as two files beside it. */
function splitInHalves(path: string, bytes: number): [string, string] {
  const halves: [string, string] = [`${path}.half1`, `${path}.half2`];
  const input = openSync(path, "r");
  const buffer = Buffer.allocUnsafe(16 << 20);
  try {
    let at = 0;
    for (const [index, half] of halves.entries()) {
      const output = openSync(half + ".partial", "w");
      try {
        for (;;) {
          const got = readSync(input, buffer, 0, buffer.length, at);
          if (got === 0) break;
          let take = got;
          if (index === 0 && at + got > bytes / 2) {
            const newline = buffer.subarray(0, got).indexOf(10, Math.max(0, Math.ceil(bytes / 2) - at - 1));
            if (newline !== -1) take = newline + 1;
          }
          writeSync(output, buffer, 0, take);
          at += take;
          if (take < got) break;
        }
      } finally {
        closeSync(output);
      }
      renameSync(half + ".partial", half);
    }
  } finally {
    closeSync(input);
  }
  return halves;
}

/** Runs the commands at once; resolves when all have exited, rejecting if any failed. */
function runTogether(commands: string[][]): Promise<void> {
  return Promise.all(
    commands.map(
      (argv) =>
        new Promise<void>((resolve, reject) => {
          const child = spawn(process.execPath, argv, { stdio: ["ignore", "ignore", "pipe"] });
          let stderr = "";
          child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
          child.on("error", reject);
          child.on("close", (code) =>
            code === 0 ? resolve() : reject(new Error(`${argv.join(" ")}: exit ${code}: ${stderr}`)),
          );
        }),
    ),
  ).then(() => undefined);
}

/**
 * How fast --jobs 2 could be at best: the CPU time it needs, spread over every core with none
 * idle. When this bound is below a target, no scheduling can reach it on this machine.
 */
function cpuCeiling(oneJob: IngestResult, twoJobs: IngestResult): string[] {
  if (twoJobs.medianCpu === null) return [];
  const cores = Math.min(2, availableParallelism());
  const floor = twoJobs.medianCpu / cores;
  return [
    `--jobs 2 needs ${twoJobs.medianCpu.toFixed(2)} CPU s (--jobs 1: ${oneJob.medianCpu?.toFixed(2) ?? "?"}); ` +
      `on ${cores} fully busy cores that is ` +
      `≥ ${floor.toFixed(2)} s, so at most ${(oneJob.median / floor).toFixed(2)}× over --jobs 1 here`,
    "",
  ];
}

// Plain work with no callforest code in it: a loop of integer arithmetic (bound by the core) and
// copies of a 64 MB buffer (bound by memory bandwidth), each about a second.
const COMPUTE_PROBE = "let x = 0; for (let i = 0; i < 6e8; i++) x = (x + i * 7) | 0; if (x === 1) console.log(x);";
const MEMORY_PROBE =
  "const a = new Uint8Array(64 << 20).fill(1), b = new Uint8Array(64 << 20); for (let i = 0; i < 120; i++) b.set(a);";

/**
 * How much more two cores get done than one here, for each probe: the work of two copies run at
 * once over the time of one alone (2 = perfect). What two jobs can gain is bounded by these,
 * whatever the scheduling. Medians of `repeats`.
 */
async function machineScaling(repeats: number): Promise<{ compute: number; memory: number }> {
  const timed = async (commands: string[][]) => {
    const started = process.hrtime.bigint();
    await runTogether(commands);
    return Number(process.hrtime.bigint() - started) / 1e9;
  };
  const scaling = async (probe: string) => {
    const ratios: number[] = [];
    for (let r = 0; r < repeats; r++) {
      const alone = await timed([["-e", probe]]);
      const paired = await timed([
        ["-e", probe],
        ["-e", probe],
      ]);
      ratios.push((2 * alone) / paired);
    }
    return median(ratios);
  };
  return { compute: await scaling(COMPUTE_PROBE), memory: await scaling(MEMORY_PROBE) };
}

export async function runIngestBench(
  options: { megabytes?: number; repeats?: number; log?: (s: string) => void } = {},
): Promise<{ table: string; results: IngestResult[] }> {
  const log = options.log ?? ((s: string) => process.stderr.write(s + "\n"));
  const megabytes = options.megabytes ?? Number(process.env.INGEST_BENCH_MB ?? 1024);
  const repeats = options.repeats ?? Number(process.env.INGEST_BENCH_REPEATS ?? 3);
  const root = findRoot();
  const bin = join(root, "bin", "callforest.js");
  const input = await makeJsonl({ targetBytes: Math.round(megabytes * 2 ** 20), log });
  log(
    `input: ${input.path}: ${(input.bytes / 2 ** 20).toFixed(0)} MB, ` +
      `${input.rollouts} rollouts (${input.huge} huge), ` +
      `${(input.tokens / 1e6).toFixed(1)} M tokens`,
  );

  // Baseline first: the plain path (JSON.parse in, rowToJson out), what the rows command does
  // without the WASM scanner and row writer. Then JSON.parse in with the WASM row writer, which
  // isolates the reading side.
  const configs: { name: string; argv: string[]; halves?: true }[] = [
    {
      name: "JSON.parse path (JSON.parse + rowToJson), --jobs 1",
      argv: ["--jobs", "1", "--reader", "json", "--writer", "js"],
    },
    { name: "JSON.parse reader + WASM row writer, --jobs 1", argv: ["--jobs", "1", "--reader", "json"] },
    { name: "fast path, --jobs 1", argv: ["--jobs", "1"] },
    { name: "fast path, --jobs 2", argv: ["--jobs", "2"] },
    {
      name: "reference: two fast --jobs 1 processes side by side, half the file each",
      argv: ["--jobs", "1"],
      halves: true,
    },
  ];
  const [BASELINE, ONE_JOB, TWO_JOBS, HALVES] = [0, 2, 3, 4];
  const seconds = configs.map(() => [] as number[]);
  const cpu = configs.map(() => [] as number[]);
  const hashes = configs.map(() => "");
  const hashesWithoutLines = configs.map(() => "");
  const halves = splitInHalves(input.path, input.bytes);
  const reportOf = (part: string) => join(tmpdir(), `callforest-ingest-report-${process.pid}${part}.jsonl`);
  for (let r = 0; r < repeats; r++) {
    for (const [i, config] of configs.entries()) {
      const runs = config.halves
        ? halves.map((half, h) => ({ input: half, report: reportOf(`-half${h + 1}`) }))
        : [{ input: input.path, report: reportOf("") }];
      const cpuBefore = childrenCpu();
      const started = process.hrtime.bigint();
      await runTogether(
        runs.map((run) => [
          bin,
          "rows",
          run.input,
          "-o",
          "/dev/null",
          "--report",
          run.report,
          "--quiet",
          ...config.argv,
        ]),
      );
      const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
      const cpuAfter = childrenCpu();
      if (cpuBefore !== null && cpuAfter !== null) cpu[i].push(cpuAfter - cpuBefore);
      seconds[i].push(elapsed);
      const reports = runs.map((run) => readFileSync(run.report, "utf8"));
      // The halves number their lines from 1 each: they are compared without line numbers.
      hashesWithoutLines[i] = hashWithoutLines(reports);
      if (!config.halves) hashes[i] = createHash("sha256").update(reports[0]).digest("hex").slice(0, 16);
      log(
        `  ${config.name}: ${elapsed.toFixed(2)} s ` +
          `(cpu ${cpu[i].length > 0 ? cpu[i][cpu[i].length - 1].toFixed(2) : "?"} s, load ${loadavg()[0].toFixed(1)})`,
      );
    }
  }
  for (const path of [reportOf(""), reportOf("-half1"), reportOf("-half2"), ...halves]) rmSync(path, { force: true });
  const scaling = await machineScaling(repeats);
  log(
    `  two cores at once: ${scaling.compute.toFixed(2)}× a compute loop's work, ` +
      `${scaling.memory.toFixed(2)}× a 64 MB copy's`,
  );
  const results: IngestResult[] = configs.map((config, i) => {
    const m = median(seconds[i]);
    return {
      ...config,
      seconds: seconds[i],
      median: m,
      cpu: cpu[i],
      medianCpu: cpu[i].length > 0 ? median(cpu[i]) : null,
      mbPerSecond: input.bytes / 2 ** 20 / m,
      tokensPerSecond: input.tokens / m,
      reportHash: config.halves ? hashesWithoutLines[i] : hashes[i],
    };
  });
  const base = results[BASELINE].median;
  const oneJob = results[ONE_JOB].median;
  const wholes = hashes.filter((_, i) => !configs[i].halves);
  const sameReports =
    wholes.every((h) => h === wholes[0]) && hashesWithoutLines[HALVES] === hashesWithoutLines[ONE_JOB]
      ? `reports identical on every path (sha256 ${wholes[0]}; the halves' together, line numbers aside)`
      : `REPORTS DIFFER: ${hashes.join(" ")}; without line numbers ${hashesWithoutLines.join(" ")}`;
  const rowsOf = results.map(
    (r) =>
      `| ${r.name} | ${r.median.toFixed(2)} | ${r.mbPerSecond.toFixed(0)} | ` +
      `${(r.tokensPerSecond / 1e6).toFixed(1)} | ` +
      `${(base / r.median).toFixed(2)}× | ${(oneJob / r.median).toFixed(2)}× | ` +
      `${r.medianCpu === null ? "–" : r.medianCpu.toFixed(2)} |`,
  );
  const loads = loadavg();
  const table = [
    `rows + report, ${(input.bytes / 2 ** 20).toFixed(0)} MB JSONL (${input.rollouts} rollouts, ${input.huge} huge; ` +
      `${(input.tokens / 1e6).toFixed(0)} M tokens), median of ${repeats}, rows to /dev/null`,
    "",
    "| path | median s | MB/s | M tokens/s | vs JSON.parse | vs fast --jobs 1 | CPU s |",
    "|---|---:|---:|---:|---:|---:|---:|",
    ...rowsOf,
    "",
    ...cpuCeiling(results[ONE_JOB], results[TWO_JOBS]),
    `This machine's two cores at once (plain work, no callforest code, median of ${repeats}): ` +
      `${scaling.compute.toFixed(2)}× the work of one ` +
      `for a compute loop, ${scaling.memory.toFixed(2)}× for copies of a 64 MB buffer (memory bandwidth).`,
    "",
    `The reference row is two processes that share nothing, each on half the file: ` +
      `${(oneJob / results[HALVES].median).toFixed(2)}× over --jobs 1 ` +
      `(--jobs 2: ${(oneJob / results[TWO_JOBS].median).toFixed(2)}×).`,
    "",
    `${availableParallelism()} cores; load average at the end ${loads.map((l) => l.toFixed(1)).join(" ")} ` +
      `(other work on the machine slows the wall clock)`,
    sameReports,
  ].join("\n");
  return { table, results };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { table } = await runIngestBench();
  process.stdout.write(table + "\n");
}
