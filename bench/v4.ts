// What SPEC v4 costs (issue 35), against the build before it, side by side in one run:
// `callforest rows --jobs 1` on the ingest bench's mix (rows only: the routes clause and the trie
// must cost a rollout without routes nothing), and `--layout packed` on the deep rollout of
// 12 million tokens (the token trie against v3's packed trees). Runs are interleaved; medians.
// The outputs differ by design (v4 adds `group_id` to every record, and packs a trie), so this
// bench compares times, not bytes; the versus bench compares bytes.
//   npm run bench (or: node build/bench-out/bench/v4.js)
// Environment: V4_BENCH_REPEATS (default 7), V4_BENCH_BASELINE (default 59f57eb, the last build
// before v4), V4_BENCH_MB (the mix's size, as the versus bench's, default 1024).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { rolloutToJson } from "../src/ingest/read.js";
import { generateDeepRollout } from "./generate.js";
import { makeMixJsonl } from "./make-jsonl.js";
import { baselineBuild, median, root, runRows, type Run } from "./rows-process.js";

interface Config {
  name: string;
  build: "new" | "old";
  input: "mix" | "deep";
  argv: string[];
}

export async function runV4Bench(
  options: { repeats?: number; log?: (s: string) => void } = {},
): Promise<{ table: string }> {
  const log = options.log ?? ((s: string) => process.stderr.write(s + "\n"));
  const repeats = options.repeats ?? Number(process.env.V4_BENCH_REPEATS ?? 7);
  const oldCommit = process.env.V4_BENCH_BASELINE ?? "59f57eb";
  const builds = { new: root(), old: baselineBuild(oldCommit, log) };
  const dir = mkdtempSync(join(tmpdir(), "callforest-v4-bench-"));
  try {
    const mix = await makeMixJsonl(Number(process.env.V4_BENCH_MB ?? 1024), log);
    const deepPath = join(dir, "deep.jsonl");
    log("generating the deep rollout (12M tokens) ...");
    writeFileSync(deepPath, `${rolloutToJson(generateDeepRollout({ targetTokens: 12_000_000 }))}\n`);
    const inputs = { mix: mix.path, deep: deepPath };
    const configs: Config[] = [
      { name: "mix, rows", build: "new", input: "mix", argv: [] },
      { name: "mix, rows", build: "old", input: "mix", argv: [] },
      { name: "deep, packed", build: "new", input: "deep", argv: ["--layout", "packed"] },
      { name: "deep, packed", build: "old", input: "deep", argv: ["--layout", "packed"] },
      { name: "deep, rows", build: "new", input: "deep", argv: [] },
      { name: "deep, rows", build: "old", input: "deep", argv: [] },
    ];
    const runs = configs.map(() => [] as Run[]);
    const output = join(dir, "out.jsonl");
    for (let r = 0; r < repeats; r++) {
      for (const [i, c] of configs.entries()) {
        const run = await runRows(join(builds[c.build], "bin", "callforest.js"), [
          inputs[c.input],
          "-o",
          output,
          "--jobs",
          "1",
          "--quiet",
          ...c.argv,
        ]);
        runs[i].push(run);
        log(`  ${c.build} ${c.name}: ${run.seconds.toFixed(2)} s (load ${loadavg()[0].toFixed(1)})`);
      }
    }
    const seconds = (name: string, build: "new" | "old") =>
      median(runs[configs.findIndex((c) => c.name === name && c.build === build)].map((run) => run.seconds));
    const lines = [`| run | v4, s | ${oldCommit}, s | v4 ÷ ${oldCommit} (time) | goal |`, "|---|---:|---:|---:|---|"];
    for (const [name, goal] of [
      ["mix, rows", "rows only: ≥ 0.97× as fast (time ≤ 1.03×)"],
      ["deep, rows", "rows only: ≥ 0.97× as fast (time ≤ 1.03×)"],
      ["deep, packed", "packed: time ≤ 1.2×"],
    ] as const) {
      const [fresh, old] = [seconds(name, "new"), seconds(name, "old")];
      lines.push(`| ${name} | ${fresh.toFixed(2)} | ${old.toFixed(2)} | ${(fresh / old).toFixed(2)}× | ${goal} |`);
    }
    return { table: lines.join("\n") };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.stdout.write(`${(await runV4Bench()).table}\n`);
}
