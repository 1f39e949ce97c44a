// Where the time of `callforest rows --jobs 1` goes, stage by stage, on the ingest bench's mix:
// each stage is its own process running the in-process pipeline only that far
// (bench/floor-stages.ts), beside the whole CLI and an older build's CLI, interleaved; medians.
// Each stage's figure includes the ones before it, so the differences are what a stage adds,
// and the sum of the stages a run cannot skip is the floor of this design for that input.
//   npm run bench (or: runFloorBench() from bench/run.ts)
// Environment: FLOOR_BENCH_REPEATS (default 7), FLOOR_BENCH_MB (the mix's size scale, default
// 1024 as in bench/versus.ts), FLOOR_BENCH_BASELINE (default 8205dfe).
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { STAGES } from "./floor-stage-names.js";
import { makeMixJsonl } from "./make-jsonl.js";
import { baselineBuild, median, root, runNode, runRows, type Run } from "./rows-process.js";

/**
 * What touching a page of fresh memory for the first time costs here, in µs: 64 MiB of a new
 * ArrayBuffer written once a page, against the same pages written again (median of 5). On this
 * project's VMs that first touch, not the copying, is most of what a large rollout's bytes cost.
 */
function firstTouchMicroseconds(): number {
  const bytes = 64 << 20;
  const pages = bytes / 4096;
  const costs: number[] = [];
  for (let r = 0; r < 5; r++) {
    const memory = new Uint8Array(new ArrayBuffer(bytes));
    const time = () => {
      const started = process.hrtime.bigint();
      for (let at = 0; at < bytes; at += 4096) memory[at] = r + 1;
      return Number(process.hrtime.bigint() - started) / 1e3;
    };
    const first = time();
    costs.push((first - time()) / pages);
  }
  return median(costs);
}

/**
 * What a page of fresh memory that the kernel filled (a file read into it) costs at its first
 * access from JavaScript afterwards, in µs: 64 MiB read from a file in the page cache into a new
 * ArrayBuffer, 2 MiB a read, then one byte a page read, against again (median of 5). The read's
 * own first touches are not in it. On this project's VMs it is far from free: the long-line
 * reader's memchr of each chunk libuv read into fresh pages pays it (see batches.ts, touchPages).
 */
function kernelFilledFirstAccessMicroseconds(dir: string): number {
  const bytes = 64 << 20;
  const chunk = 2 << 20;
  const pages = bytes / 4096;
  const file = join(dir, "first-access.bin");
  writeFileSync(file, new Uint8Array(bytes).fill(7));
  const fd = openSync(file, "r");
  const costs: number[] = [];
  try {
    for (let r = 0; r < 5; r++) {
      const memory = new Uint8Array(new ArrayBuffer(bytes));
      for (let at = 0; at < bytes; at += chunk) readSync(fd, memory, at, chunk, at);
      let sum = 0;
      const time = () => {
        const started = process.hrtime.bigint();
        for (let at = 0; at < bytes; at += 4096) sum += memory[at];
        return Number(process.hrtime.bigint() - started) / 1e3;
      };
      const first = time();
      costs.push((first - time()) / pages);
      if (sum !== 2 * 7 * pages) throw new Error("kernelFilledFirstAccessMicroseconds: read back the wrong bytes");
    }
  } finally {
    closeSync(fd);
  }
  return median(costs);
}

interface Step {
  name: string;
  run(): Promise<Run>;
}

const STAGE_NAMES: Record<(typeof STAGES)[number], string> = {
  load: "Node starts, loads the modules, instantiates the core, scanner and row writer",
  read: "+ read the file in batches (a long line a piece at a time, into one reused region)",
  scan: "+ scan every line (token arrays to typed arrays, the rest through JSON.parse; long lines as read)",
  plan: "+ import (format detection) and plan()",
  format: "+ format every row as JSONL bytes (into a reused block)",
};

export async function runFloorBench(
  options: { repeats?: number; megabytes?: number; log?: (s: string) => void } = {},
): Promise<{ table: string }> {
  const log = options.log ?? ((s: string) => process.stderr.write(s + "\n"));
  const repeats = options.repeats ?? Number(process.env.FLOOR_BENCH_REPEATS ?? 7);
  const megabytes = options.megabytes ?? Number(process.env.FLOOR_BENCH_MB ?? 1024);
  const oldCommit = process.env.FLOOR_BENCH_BASELINE ?? "8205dfe";
  const oldBuild = baselineBuild(oldCommit, log);
  const mix = await makeMixJsonl(megabytes, log);
  const dir = mkdtempSync(join(tmpdir(), "callforest-floor-bench-"));
  const empty = join(dir, "empty.jsonl");
  writeFileSync(empty, "");
  const stagesScript = fileURLToPath(new URL("./floor-stages.js", import.meta.url));
  const cli = (build: string) => join(build, "bin", "callforest.js");
  const written = [
    mix.path,
    "-o",
    join(dir, "rows.jsonl"),
    "--report",
    join(dir, "report.jsonl"),
    "--jobs",
    "1",
    "--quiet",
  ];
  const steps: Step[] = [
    {
      name: "`rows` on an empty file (Node and the CLI start, nothing to read)",
      run: () => runRows(cli(root()), [empty, "-o", "/dev/null", "--jobs", "1", "--quiet"]),
    },
    ...STAGES.map((stage) => ({ name: STAGE_NAMES[stage], run: () => runNode(stagesScript, [stage, mix.path]) })),
    {
      name: "`rows -o /dev/null --jobs 1` (the whole CLI: reports built, nothing written)",
      run: () => runRows(cli(root()), [mix.path, "-o", "/dev/null", "--jobs", "1", "--quiet"]),
    },
    {
      name: "`rows -o rows.jsonl --report report.jsonl --jobs 1` (written, fsynced, hashed)",
      run: () => runRows(cli(root()), written),
    },
    { name: `the same on ${oldCommit}`, run: () => runRows(cli(oldBuild), written) },
  ];
  const runs = steps.map(() => [] as Run[]);
  let filled: number;
  try {
    await steps[steps.length - 2].run(); // the input in the page cache
    for (let r = 0; r < repeats; r++)
      for (const [i, step] of steps.entries()) {
        runs[i].push(await step.run());
        log(`  ${step.name}: ${runs[i].at(-1)!.seconds.toFixed(2)} s (load ${loadavg()[0].toFixed(1)})`);
      }
    filled = kernelFilledFirstAccessMicroseconds(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const wall = runs.map((r) => median(r.map((run) => run.seconds)));
  const cpu = runs.map((r) => median(r.map((run) => run.cpu)));
  const faults = runs.map((r) => median(r.map((run) => run.faults)));
  const touch = firstTouchMicroseconds();
  const firstStage = 1;
  const lastStage = STAGES.length;
  const table = [
    `Input: the mix, ${(mix.bytes / 2 ** 20).toFixed(0)} MB (${mix.rollouts} rollouts, ${mix.huge} deep). ` +
      `Each line is its own process; median of ${repeats}, interleaved. A stage's line includes every stage above it.`,
    "",
    "| what runs | wall s | adds | CPU s | pages first touched (minor faults) | their cost at the rate below, s |",
    "|---|---:|---:|---:|---:|---:|",
    ...steps.map((step, i) => {
      const adds = i > firstStage && i <= lastStage ? (wall[i] - wall[i - 1]).toFixed(2) : "";
      return (
        `| ${step.name} | ${wall[i].toFixed(2)} | ${adds} | ${cpu[i].toFixed(2)} | ` +
        `${Math.round(faults[i]).toLocaleString("en-US")} | ${((faults[i] * touch) / 1e6).toFixed(2)} |`
      );
    }),
    "",
    `- A first touch of a 4 KiB page of fresh memory costs ${touch.toFixed(1)} µs on this machine ` +
      `(64 MiB written once a page, against again; median of 5). A page the kernel filled instead ` +
      `(a file read into fresh memory) costs ${filled.toFixed(1)} µs at its first access from JavaScript ` +
      `afterwards, on top of the read (64 MiB read 2 MiB at a time, then one byte a page read, against again).`,
    `- ${oldCommit} written end to end: ${wall[steps.length - 1].toFixed(2)} s; 1.6 times its throughput is ` +
      `${(wall[steps.length - 1] / 1.6).toFixed(2)} s. The stages no run skips (start, read, scan, plan, format) take ` +
      `${wall[lastStage].toFixed(2)} s here; writing, fsync and hashing the output add ` +
      `${(wall[steps.length - 2] - wall[steps.length - 3]).toFixed(2)} s.`,
    `- Load average at the end: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}.`,
  ];
  return { table: table.join("\n") };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { table } = await runFloorBench();
  process.stdout.write(table + "\n");
}
