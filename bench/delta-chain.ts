// Gym delta prompts (issue 31): a TokenEntry v5 chain in which each entry's prompt is a one-token
// delta on the previous call's full sequence (one generated token each, with cum_len; no digest,
// whose hashing of every full sequence would take the generator quadratic time), through `callforest rows --from gym-observed`: token-file size, the tokens
// the prompts expand to, status, seconds and the process's peak RSS.
//   npm run prebench && node build/bench-out/bench/delta-chain.js [ENTRIES ...]
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url)); // build/bench-out/bench -> root
const SIZES = [10_000, 20_000, 40_000, 100_000];

/** The rollout row and its token file (`r-0.tokens.jsonl`) for a chain of `entries` calls. */
export function writeChain(dir: string, entries: number): string {
  const lines: string[] = [];
  let length = 0;
  for (let i = 0; i < entries; i++) {
    const suffix = [2 * i + 1];
    const generation = [2 * i + 2];
    length += 2;
    lines.push(
      JSON.stringify({
        schema_version: 5,
        model_call_id: `c${i}`,
        rollout_id: "r-0",
        created_at: i,
        prompt_token_ids: suffix,
        generation_token_ids: generation,
        generation_log_probs: [-0.5],
        parent_call_id: i === 0 ? null : `c${i - 1}`,
        parent_resolution: i === 0 ? "root" : "resolved",
        prompt_is_delta: i > 0,
        cum_len: length,
      }),
    );
  }
  writeFileSync(join(dir, "r-0.tokens.jsonl"), lines.join("\n") + "\n");
  const row = {
    reward: 1,
    _ng_task_index: "r",
    _ng_rollout_index: 0,
    response: { id: "resp" },
    ng_agent_observations: {
      source: "bench",
      records: [
        {
          kind: "agent_invocation",
          invocation_id: "inv",
          model_calls: Array.from({ length: entries }, (_, i) => ({ model_call_id: `c${i}` })),
        },
      ],
      gaps: [],
    },
  };
  const input = join(dir, "rollouts.jsonl");
  writeFileSync(input, JSON.stringify(row) + "\n");
  return input;
}

export function runDeltaChainBench(sizes = SIZES, log: (line: string) => void = console.log): string {
  const table = [
    "| entries | token file MB | expanded tokens | status | s | peak RSS MB |",
    "|---:|---:|---:|---|---:|---:|",
  ];
  for (const entries of sizes) {
    const dir = mkdtempSync(join(tmpdir(), "callforest-delta-bench-"));
    try {
      log(`a delta chain of ${entries} entries ...`);
      const input = writeChain(dir, entries);
      const child = spawnSync(
        "/usr/bin/time",
        ["-f", "%e %M", process.execPath, join(ROOT, "bin/callforest.js"), "rows", input]
          .concat(["--from", "gym-observed", "--tokens", dir, "--jobs", "1", "-o", join(dir, "rows.jsonl")])
          .concat(["--report", join(dir, "report.jsonl"), "--quiet"]),
        { encoding: "utf8", stdio: ["ignore", "ignore", "pipe"] },
      );
      const [seconds, rss] = child.stderr.trim().split("\n").pop()!.split(" ").map(Number);
      let status = `exit ${child.status}`;
      try {
        const report = JSON.parse(
          spawnSync("head", ["-c", "2000", join(dir, "report.jsonl")], { encoding: "utf8" }).stdout.split("\n")[0],
        ) as { status: string; reason?: string };
        status = report.reason ?? report.status;
      } catch {
        // no report: the status says the exit code
      }
      const mb = statSync(join(dir, "r-0.tokens.jsonl")).size / 2 ** 20;
      const expanded = entries * (entries + 1);
      table.push(
        `| ${entries} | ${mb.toFixed(1)} | ${expanded} | ${status} | ${seconds} | ${(rss / 1024).toFixed(0)} |`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return table.join("\n");
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const sizes = process.argv.slice(2).map(Number);
  process.stdout.write(
    runDeltaChainBench(sizes.length > 0 ? sizes : SIZES, (line) => process.stderr.write(`${line}\n`)) + "\n",
  );
}
