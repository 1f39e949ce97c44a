// `rows --jobs N` on worker threads: the bytes of rows and reports do not depend on N, on the
// batch size, or on the reader; and a real process reads stdin. Workers load dist/, which the
// suite compiles from src/ before any test runs (test/support/global-setup.ts).
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../support/fixtures.js";
import { cli, goodLines, lines, read, rowsOf, tempDir } from "../ingest/cli.js";

/**
 * A call whose logprobs are a value nested 4,000 deep: too deep for the main thread's stack to
 * write out with JSON.stringify, not for a worker's. Its rejection must read the same on both.
 */
const DEEP_VALUE_LINE =
  '{"rollout_id":"deep","reward":0,"calls":[{"id":"c","prompt_token_ids":[1],' +
  '"generation_token_ids":[2],"generation_log_probs":' +
  '{"a":['.repeat(2000) +
  "1" +
  "]}".repeat(2000) +
  "}]}";

/** ~1 MB of rollouts with bad and blank lines among them. */
function input(): string {
  const good = goodLines(200, 11);
  const out: string[] = [];
  good.forEach((line, i) => {
    out.push(line);
    if (i === 150) out.push(DEEP_VALUE_LINE);
    if (i % 50 === 7) out.push('{"rollout_id":"cut","calls":[{"id":"c","prompt_token_ids":[1,');
    if (i % 50 === 20) out.push("");
    if (i % 50 === 33) out.push(line.replace('"prompt_token_ids":[', '"prompt_token_ids":[-1,'));
  });
  return out.join("\n") + "\n";
}

describe("rows --jobs N", () => {
  it("writes the same rows and reports for N = 1, 2, 3, any batch size, and the JSON.parse path", async () => {
    const dir = tempDir();
    const content = input();
    const one = await rowsOf(dir, "one", content, "--jobs", "1");
    expect(one.run.code).toBe(0);
    expect(lines(one.report)).toHaveLength(content.split("\n").filter((l) => l !== "").length);
    expect(lines(one.report).some((l) => l.includes('"reason":"invalid_token"'))).toBe(true);
    const runs = [
      ["--jobs", "2", "--batch-bytes", "131072"], // ~1 MB in 8 batches: two workers really run
      ["--jobs", "3", "--batch-bytes", "300"],
      ["--jobs", "2", "--batch-bytes", "65536"],
      ["--jobs", "2", "--reader", "json", "--batch-bytes", "16384"],
      ["--jobs", "1", "--reader", "json"],
    ];
    for (const [i, argv] of runs.entries()) {
      const other = await rowsOf(dir, `run${i}`, content, ...argv);
      expect(other.run.code, argv.join(" ")).toBe(0);
      expect(other.rows === one.rows, argv.join(" ")).toBe(true);
      expect(other.report === one.report, argv.join(" ")).toBe(true);
    }
  });

  it("keeps .json files in their place among JSONL inputs on workers", async () => {
    const dir = tempDir();
    const { input: first, rows: alone } = await rowsOf(dir, "a", goodLines(40, 3).join("\n") + "\n", "--jobs", "1");
    const login = join(ROOT, "examples", "login-bug.json");
    const serial = await cli("rows", first, login, first, "--jobs", "1", "--quiet");
    const parallel = await cli("rows", first, login, first, "--jobs", "3", "--batch-bytes", "2048", "--quiet");
    expect(parallel.code).toBe(0);
    expect(parallel.stdout).toBe(serial.stdout);
    expect(lines(parallel.stdout).filter((l) => l.includes('"rollout_id":"login-bug"')).length).toBe(5 * 3);
    // In input order: first's rows, the example's five, first's again.
    const example = await cli("rows", login, "--quiet");
    expect(lines(example.stdout)).toHaveLength(5);
    expect(parallel.stdout).toBe(alone + example.stdout + alone);
  });

  it(
    "keeps a document read whole (a pretty-printed rollout named neither .json nor .jsonl) " +
      "in its place after heavy batches",
    async () => {
      const dir = tempDir();
      // Heavy lines last, so workers are still busy when the document comes.
      const heavy = Array.from({ length: 6 }, (_, i) =>
        JSON.stringify({
          rollout_id: `heavy${i}`,
          reward: 0,
          calls: [
            {
              id: "c",
              prompt_token_ids: Array(1_000_000).fill(5 + i),
              generation_token_ids: [1],
              generation_log_probs: [-1],
            },
          ],
        }),
      );
      const { input: first } = await rowsOf(dir, "a", [...goodLines(20, 5), ...heavy].join("\n") + "\n", "--jobs", "1");
      const doc = join(dir, "doc.txt");
      writeFileSync(doc, JSON.stringify(JSON.parse(read(join(ROOT, "examples", "login-bug.json"))), null, 2));
      const serial = await cli("rows", first, doc, "--jobs", "1", "--quiet");
      const parallel = await cli("rows", first, doc, "--jobs", "3", "--batch-bytes", "4096", "--quiet");
      expect(parallel.code).toBe(0);
      const ids = lines(parallel.stdout).map((line) => (JSON.parse(line) as { rollout_id: string }).rollout_id);
      expect(ids.slice(-11)).toEqual([...heavy.map((_, i) => `heavy${i}`), ...Array(5).fill("login-bug")]);
      expect(parallel.stdout === serial.stdout).toBe(true);
    },
  );

  it("runs as a real process on stdin with workers, exit codes and stderr as documented", () => {
    const content = input();
    const bin = join(ROOT, "bin", "callforest.js");
    const dir = tempDir();
    const run = (...argv: string[]) =>
      spawnSync(process.execPath, [bin, "rows", ...argv], {
        input: content,
        encoding: "utf8",
        cwd: dir,
        maxBuffer: 1 << 30,
      });
    const serial = run("--jobs", "1");
    const parallel = run("--jobs", "2", "--batch-bytes", "8192");
    expect(serial.status).toBe(0);
    expect(parallel.status).toBe(0);
    expect(parallel.stdout).toBe(serial.stdout);
    expect(parallel.stderr).toBe(serial.stderr);
    const stderr = lines(serial.stderr);
    expect(stderr[0]).toMatch(/^<stdin>:9: rejected \(malformed_json\): not JSON at byte \d+: cut off/);
    expect(stderr[stderr.length - 1]).toMatch(/^callforest: \d+ rollouts \(\d+ ok, 9 rejected\), \d+ rows$/);
    const strict = run("--jobs", "2", "--strict", "--report", join(dir, "report.jsonl"));
    expect(strict.status).toBe(1);
    expect(strict.stderr).toBe("callforest: 9 of 210 rollouts rejected\n");
    expect(lines(read(join(dir, "report.jsonl")))).toHaveLength(210);
  });
});
