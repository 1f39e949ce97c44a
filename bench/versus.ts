// This build against older ones, side by side in one run: `callforest rows --jobs 1` on the
// ingest bench's mix (small rollouts and two ~90 MB deep ones) and on its 1 GB file, writing
// JSONL, Parquet and Arrow; the deep rollout's input parse alone; and whether every output is
// byte for byte the older build's. The older builds come from scripts/build-baseline.sh (git
// archive + npm ci, cached under build/baselines/). Runs are interleaved; medians. The goals are
// issue 40's (they replace issue 28's).
//   npm run bench (or: runVersusBench() from bench/run.ts)
// Environment: VERSUS_BENCH_REPEATS (default 7), VERSUS_BENCH_MB (the big file, default 1024),
// VERSUS_BENCH_BASELINE (default 8205dfe), VERSUS_BENCH_REFERENCE (default 859073e, the build
// before issue 40: every output must be byte for byte its output, at no higher peak memory; the
// baseline's differ since SPEC v4 added `group_id`), VERSUS_BENCH_UNTAXED (a build before `media: []`,
// e.g. eaf21da: its JSONL run on the mix is added, against which unused features must cost
// nothing; not run unless given).
import { createHash } from "node:crypto";
import { createReadStream, mkdtempSync, openSync, readFileSync, readSync, closeSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { makeJsonl, makeMixJsonl, type JsonlInput } from "./make-jsonl.js";
import { baselineBuild, median, root, runRows, type Run } from "./rows-process.js";

function sha256(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash("sha256");
    createReadStream(path)
      .on("data", (chunk) => hash.update(chunk))
      .on("error", reject)
      .on("end", () => resolve(hash.digest("hex").slice(0, 16)));
  });
}

/**
 * A report's hash without its last line when that is the run record (`{"run":...}`, added after
 * 8205dfe): the record names the output file, which differs from build to build in this bench, so
 * the comparison is of the per-rollout lines only. Reports are small (a line per rollout).
 */
function reportSha256(path: string): string {
  const text = readFileSync(path, "utf8");
  const last = text.lastIndexOf("\n", text.length - 2);
  const body = text.startsWith('{"run":', last + 1) ? text.slice(0, last + 1) : text;
  return createHash("sha256").update(body).digest("hex").slice(0, 16);
}

/** The input's longest line (a deep rollout), read once. */
function longestLine(input: JsonlInput): Buffer {
  const fd = openSync(input.path, "r");
  const chunk = Buffer.allocUnsafe(16 << 20);
  let best = { start: 0, length: 0 };
  let lineStart = 0;
  let at = 0;
  try {
    for (;;) {
      const got = readSync(fd, chunk, 0, chunk.length, at);
      if (got === 0) break;
      let from = 0;
      for (;;) {
        const newline = chunk.indexOf(10, from);
        if (newline === -1 || newline >= got) break;
        const end = at + newline;
        if (end - lineStart > best.length) best = { start: lineStart, length: end - lineStart };
        lineStart = end + 1;
        from = newline + 1;
      }
      at += got;
    }
    const line = Buffer.allocUnsafe(best.length);
    readSync(fd, line, 0, best.length, best.start);
    return line;
  } finally {
    closeSync(fd);
  }
}

interface ScannerLike {
  inputBuffer(length: number): Uint8Array | null;
  scanInput(length: number): { ok: boolean };
}

/**
 * The deep rollout's input parse alone (bytes into the scanner and scanned, as `rows` does), on
 * one core: median MB/s of `repeats` warm scans for each build's LineScanner, interleaved.
 */
async function parseAlone(line: Buffer, builds: [string, string][], repeats: number): Promise<Record<string, number>> {
  const scanners: [string, ScannerLike][] = [];
  for (const [name, dir] of builds) {
    const module = (await import(pathToFileURL(join(dir, "dist", "ingest", "scanner.js")).href)) as {
      LineScanner: { create(): Promise<ScannerLike> };
    };
    scanners.push([name, await module.LineScanner.create()]);
  }
  const times = new Map<string, number[]>(builds.map(([name]) => [name, []]));
  for (let r = -1; r < repeats; r++) {
    for (const [name, scanner] of scanners) {
      const started = process.hrtime.bigint();
      scanner.inputBuffer(line.length)!.set(line);
      if (!scanner.scanInput(line.length).ok) throw new Error(`${name}: the deep rollout did not scan`);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (r >= 0) times.get(name)!.push(seconds); // the first round grows memory: not timed
    }
  }
  const out: Record<string, number> = {};
  for (const [name, seconds] of times) out[name] = line.length / 2 ** 20 / median(seconds);
  return out;
}

interface Config {
  build: string;
  input: "mix" | "big";
  output: "jsonl" | "parquet" | "arrow";
}

export async function runVersusBench(
  options: { repeats?: number; megabytes?: number; log?: (s: string) => void } = {},
): Promise<{ table: string }> {
  const log = options.log ?? ((s: string) => process.stderr.write(s + "\n"));
  const repeats = options.repeats ?? Number(process.env.VERSUS_BENCH_REPEATS ?? 7);
  const megabytes = options.megabytes ?? Number(process.env.VERSUS_BENCH_MB ?? 1024);
  const oldCommit = process.env.VERSUS_BENCH_BASELINE ?? "8205dfe";
  const untaxedCommit = process.env.VERSUS_BENCH_UNTAXED;
  const reference = process.env.VERSUS_BENCH_REFERENCE ?? "859073e";
  const builds: Record<string, string> = {
    new: root(),
    [oldCommit]: baselineBuild(oldCommit, log),
    [reference]: baselineBuild(reference, log),
    ...(untaxedCommit === undefined ? {} : { [untaxedCommit]: baselineBuild(untaxedCommit, log) }),
  };
  const inputs = {
    big: await makeJsonl({ targetBytes: Math.round(megabytes * 2 ** 20), log }),
    mix: await makeMixJsonl(megabytes, log),
  };
  const configs: Config[] = [
    { build: "new", input: "mix", output: "jsonl" },
    { build: oldCommit, input: "mix", output: "jsonl" },
    { build: reference, input: "mix", output: "jsonl" },
    ...(untaxedCommit === undefined ? [] : [{ build: untaxedCommit, input: "mix", output: "jsonl" } as const]),
    { build: "new", input: "mix", output: "parquet" },
    { build: "new", input: "mix", output: "arrow" },
    { build: oldCommit, input: "mix", output: "parquet" },
    { build: oldCommit, input: "mix", output: "arrow" },
    { build: reference, input: "mix", output: "parquet" },
    { build: reference, input: "mix", output: "arrow" },
    { build: "new", input: "big", output: "jsonl" },
    { build: oldCommit, input: "big", output: "jsonl" },
    { build: reference, input: "big", output: "jsonl" },
    { build: "new", input: "big", output: "parquet" },
    { build: "new", input: "big", output: "arrow" },
    { build: oldCommit, input: "big", output: "parquet" },
    { build: oldCommit, input: "big", output: "arrow" },
    { build: reference, input: "big", output: "parquet" },
    { build: reference, input: "big", output: "arrow" },
  ];
  const dir = mkdtempSync(join(tmpdir(), "callforest-versus-bench-"));
  const name = (c: Config) => `${c.build} ${c.input} -o rows.${c.output}`;
  const outputOf = (c: Config) => join(dir, `${c.build}-${c.input}.${c.output}`);
  const reportOf = (c: Config) => join(dir, `${c.build}-${c.input}-${c.output}.report.jsonl`);
  const runs = configs.map(() => [] as Run[]);
  const hashes = configs.map(() => ({ output: "", report: "" }));
  try {
    // The inputs' bytes in the page cache first, as for every timed run.
    for (const input of Object.values(inputs))
      await runRows(join(builds.new, "bin", "callforest.js"), [
        input.path,
        "-o",
        "/dev/null",
        "--quiet",
        "--jobs",
        "1",
      ]);
    for (let r = 0; r < repeats; r++) {
      for (const [i, config] of configs.entries()) {
        const run = await runRows(join(builds[config.build], "bin", "callforest.js"), [
          inputs[config.input].path,
          "-o",
          outputOf(config),
          "--report",
          reportOf(config),
          "--jobs",
          "1",
          "--quiet",
        ]);
        runs[i].push(run);
        log(
          `  ${name(config)}: ${run.seconds.toFixed(2)} s, cpu ${run.cpu.toFixed(2)} s, ` +
            `${run.rssMb.toFixed(0)} MB RSS (load ${loadavg()[0].toFixed(1)})`,
        );
        if (r === 0) hashes[i] = { output: await sha256(outputOf(config)), report: reportSha256(reportOf(config)) };
        rmSync(outputOf(config), { force: true });
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const parse = await parseAlone(
    longestLine(inputs.mix),
    [
      ["new", builds.new],
      [oldCommit, builds[oldCommit]],
    ],
    repeats * 2,
  );

  const stats = configs.map((config, i) => ({
    config,
    seconds: median(runs[i].map((run) => run.seconds)),
    cpu: median(runs[i].map((run) => run.cpu)),
    rss: Math.max(...runs[i].map((run) => run.rssMb)),
    hash: hashes[i],
  }));
  const find = (build: string, input: Config["input"], output: Config["output"]) =>
    stats.find((s) => s.config.build === build && s.config.input === input && s.config.output === output)!;
  const mb = (input: Config["input"]) => inputs[input].bytes / 2 ** 20;
  type Stat = (typeof stats)[number];
  /** How much faster `other` is than `base`: wall clock (the goal), and CPU time (what noise on a shared machine moves least). */
  const versus = (base: Stat, other: Stat, goal: number) => {
    const wall = base.seconds / other.seconds;
    return (
      `${wall.toFixed(2)}× (goal ≥ ${goal.toFixed(2)}×: ${wall >= goal ? "met" : "NOT met"}; ` +
      `CPU time ${(base.cpu / other.cpu).toFixed(2)}×)`
    );
  };

  /** The same without a goal. */
  const ratio = (base: Stat, other: Stat) =>
    `${(base.seconds / other.seconds).toFixed(2)}× (CPU time ${(base.cpu / other.cpu).toFixed(2)}×)`;

  const table = [
    `Inputs: the mix ${mb("mix").toFixed(0)} MB (${inputs.mix.rollouts} rollouts, ${inputs.mix.huge} deep); ` +
      `the big file ${mb("big").toFixed(0)} MB (${inputs.big.rollouts} rollouts, ${inputs.big.huge} deep). ` +
      `\`rows --jobs 1\` with a report file, median of ${repeats}, interleaved; builds: new (this checkout), ` +
      `${oldCommit}, ${reference} (before issue 40)${untaxedCommit === undefined ? "" : `, ${untaxedCommit}`}.`,
    "",
    "| input | build | output | median s | MB/s | CPU s | peak RSS MB | output sha256 | report sha256 (run record left out) |",
    "|---|---|---|---:|---:|---:|---:|---|---|",
    ...stats.map(
      (s) =>
        `| ${s.config.input} | ${s.config.build} | rows.${s.config.output} | ${s.seconds.toFixed(2)} | ` +
        `${(mb(s.config.input) / s.seconds).toFixed(0)} | ${s.cpu.toFixed(2)} | ${s.rss.toFixed(0)} | ` +
        `${s.hash.output} | ${s.hash.report} |`,
    ),
    "",
  ];
  const newMix = find("new", "mix", "jsonl");
  const newBig = find("new", "big", "jsonl");
  table.push(
    `- End to end, mix, -o rows.jsonl: new ${versus(find(oldCommit, "mix", "jsonl"), newMix, 1.6)} ` +
      `the throughput of ${oldCommit}; big file ${versus(find(oldCommit, "big", "jsonl"), newBig, 1.3)}.`,
    `- Columnar, mix: -o rows.parquet ${versus(newMix, find("new", "mix", "parquet"), 0.75)} ` +
      `the JSONL path's throughput; -o rows.arrow ${versus(newMix, find("new", "mix", "arrow"), 1)}.`,
    `- Columnar, big (no goal): -o rows.parquet ${ratio(newBig, find("new", "big", "parquet"))}, ` +
      `-o rows.arrow ${ratio(newBig, find("new", "big", "arrow"))} the JSONL path's throughput.`,
    `- Deep rollout's input parse alone (one core, warm): new ${parse.new.toFixed(0)} MB/s, ` +
      `${oldCommit} ${parse[oldCommit].toFixed(0)} MB/s.`,
  );
  if (untaxedCommit !== undefined)
    table.push(
      `- No tax for unused features (no media, no routed experts): new ` +
        `${versus(find(untaxedCommit, "mix", "jsonl"), newMix, 1)} the throughput of ${untaxedCommit}.`,
    );
  /** The lines of `build` and of the new build with the same input and output. */
  const pairs = (build: string) =>
    stats
      .filter((s) => s.config.build === "new")
      .map((mine) => ({
        mine,
        other: stats.find(
          (o) =>
            o.config.build === build && o.config.input === mine.config.input && o.config.output === mine.config.output,
        ),
      }))
      .filter((pair): pair is { mine: Stat; other: Stat } => pair.other !== undefined);
  const differs = pairs(reference)
    .filter(({ mine, other }) => mine.hash.output !== other.hash.output || mine.hash.report !== other.hash.report)
    .map(({ mine }) => `${mine.config.input} rows.${mine.config.output}`);
  const peaks = (build: string) =>
    pairs(build)
      .map(
        ({ mine, other }) => `${mine.config.input} rows.${mine.config.output} ${(mine.rss - other.rss).toFixed(0)} MB`,
      )
      .join("; ");
  const higher = pairs(reference).filter(({ mine, other }) => mine.rss > other.rss);
  table.push(
    `- Output against ${reference}: ` +
      (differs.length === 0
        ? "byte-identical rows and reports on every run compared."
        : `DIFFERS: ${differs.join(", ")}.`) +
      ` (Against ${oldCommit} the rows differ by design: SPEC v4 added \`group_id\`; the reports are ` +
      (pairs(oldCommit).every(({ mine, other }) => mine.hash.report === other.hash.report)
        ? "the same.)"
        : "NOT the same.)"),
    `- Peak RSS, new minus ${reference} (goal: no higher; ` +
      `${higher.length === 0 ? "met" : "NOT met"}): ${peaks(reference)}. New minus ${oldCommit}: ${peaks(oldCommit)}.`,
    `- Load average at the end: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")} (other work on the machine slows the wall clock).`,
  );
  return { table: table.join("\n") };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { table } = await runVersusBench();
  process.stdout.write(table + "\n");
}
