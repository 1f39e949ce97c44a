// Routed experts through `callforest rows` (issue 20): a generated rollout whose calls carry MoE
// router choices for every token (48 layers × top-8, int16 envelopes, as NeMo RL writes them),
// planned and written end to end as a real process, rows and packed trees: MB/s of input and the
// process's peak RSS, median of a few runs.
//   npm run bench:experts
import { spawnSync } from "node:child_process";
import { appendFileSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { encodeRoutedExperts } from "../src/codecs/routed-experts.js";
import { generateRollout } from "./generate.js";

const LAYERS = 48;
const TOPK = 8;
const ROOT = fileURLToPath(new URL("../../..", import.meta.url)); // build/bench-out/bench -> root

/** A JSONL file of `count` rollouts with routed experts on every call. */
function writeInput(path: string, count: number): void {
  writeFileSync(path, "");
  for (let i = 0; i < count; i++) {
    const rollout = generateRollout({ calls: 30, seed: 100 + i, arrays: "plain" });
    const calls = rollout.calls.map((c, j) => {
      const tokens = c.prompt_token_ids.length + c.generation_token_ids.length;
      const data = new Int16Array(tokens * LAYERS * TOPK);
      for (let k = 0; k < data.length; k++) data[k] = (k * 31 + j) % 128;
      return { ...c, routed_experts: encodeRoutedExperts(data, tokens, LAYERS, TOPK) };
    });
    appendFileSync(path, JSON.stringify({ ...rollout, calls }) + "\n");
  }
}

/** Seconds and peak RSS (KiB) of one `callforest rows` run, from GNU time. */
function run(args: string[]): { seconds: number; maxRssKiB: number } {
  const child = spawnSync(
    "/usr/bin/time",
    ["-f", "%e %M", process.execPath, join(ROOT, "bin/callforest.js"), "rows", ...args],
    {
      encoding: "utf8",
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  if (child.status !== 0) throw new Error(`callforest rows failed: ${child.stderr}`);
  const [seconds, rss] = child.stderr.trim().split("\n").pop()!.split(" ").map(Number);
  return { seconds, maxRssKiB: rss };
}

export function runExpertsBench(log: (line: string) => void = console.log): string {
  const dir = mkdtempSync(join(tmpdir(), "callforest-experts-bench-"));
  try {
    const input = join(dir, "experts.jsonl");
    log("generating a rollout file with routed experts ...");
    writeInput(input, 4);
    const mb = statSync(input).size / 2 ** 20;
    const table = ["| layout | input MB | median s | MB/s | peak RSS MB |", "|---|---:|---:|---:|---:|"];
    for (const [name, extra] of [
      ["rows", []],
      ["packed trees", ["--layout", "packed"]],
    ] as const) {
      const runs = [0, 1, 2].map(() => run([input, "--jobs", "1", "--quiet", "-o", "/dev/null", ...extra]));
      const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[1];
      const seconds = median(runs.map((r) => r.seconds));
      table.push(
        `| ${name} | ${mb.toFixed(0)} | ${seconds.toFixed(2)} | ${(mb / seconds).toFixed(0)} | ` +
          `${(median(runs.map((r) => r.maxRssKiB)) / 1024).toFixed(0)} |`,
      );
      log(`${name}: done`);
    }
    return table.join("\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.stdout.write(runExpertsBench((line) => process.stderr.write(`${line}\n`)) + "\n");
}
