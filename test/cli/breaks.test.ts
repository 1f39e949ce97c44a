// Prefix breaks (SPEC v3 "Prefix breaks") through the CLI: `rows` reports them on every path (the
// WASM scanner, JSON.parse, worker threads, columnar output) and says so in one line on stderr;
// `show` marks near parents.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { init } from "../../src/index.js";
import { main } from "../../src/cli/main.js";
import { captureOutput } from "../support/capture.js";
import { LOGIN_BUG, ROOT } from "../support/fixtures.js";
import { cli, goodLines, lines, rowsOf, tempDir, withoutRecord } from "../ingest/cli.js";
import { generateSmallRollouts } from "../../bench/generate.js";
import { rolloutToJson } from "../../src/ingest/read.js";
import { reference } from "../support/reference.js";

const REASONING_DROPPED = join(ROOT, "examples", "reasoning-dropped.json");
const example = () => JSON.stringify(JSON.parse(readFileSync(REASONING_DROPPED, "utf8")));

const BREAKS_LINE =
  "callforest: prefix breaks in 3 calls of 2 rollouts (a prompt that resent an earlier call's prompt " +
  "but not its exact generation, costing a tree); `callforest explain` says why\n";

/**
 * The worked example twice (the second under another id, one break fewer: its C3 resends C2
 * exactly), among generated rollouts, in ~200 KB so that small batches spread it over workers.
 */
function input(): string {
  const second = JSON.parse(example());
  second.rollout_id = "reasoning-dropped-2";
  second.calls[2].prompt_token_ids = [1, 2, 3, 4, 20, 21, 99, 30, 31, 50, 13, 51, 22, 99, 32];
  const generated = generateSmallRollouts(80, 5, { arrays: "plain" }).map((r) => rolloutToJson(r));
  return [...generated.slice(0, 40), example(), ...generated.slice(40), JSON.stringify(second)].join("\n") + "\n";
}

describe("rows: prefix breaks", () => {
  it("reports each break as SPEC defines it, the same on every reader, job count and output format", async () => {
    const dir = tempDir();
    const content = input();
    const cf = await init();
    const expected = lines(content).map((line) => {
      const plan = cf.plan(JSON.parse(line));
      const breaks = plan.report.diagnostics.filter((d) => d.code === "prefix_break");
      plan.release();
      // the reference agrees (so the generated rollouts have none, or the ones it finds)
      const ref = reference(JSON.parse(line));
      expect(ref.status === "ok" ? ref.diagnostics.filter((d) => d.code === "prefix_break") : []).toEqual(breaks);
      return breaks;
    });
    expect(expected.flat().map((d) => [d.call, d.near, d.at])).toEqual([
      ["C2", "C1", 4],
      ["C3", "C2", 9],
      ["C2", "C1", 4],
    ]);
    const runs = [
      ["--jobs", "1"],
      ["--jobs", "1", "--reader", "json"],
      ["--jobs", "1", "--backend", "ts"],
      ["--jobs", "2", "--batch-bytes", "16384"],
      ["--jobs", "2", "--batch-bytes", "16384", "--layout", "packed"],
      ["--jobs", "1", "--capacity", "4096"],
    ];
    for (const [i, argv] of runs.entries()) {
      const run = await rowsOf(dir, `run${i}`, content, ...argv);
      expect(run.run.code, argv.join(" ")).toBe(0);
      const got = lines(run.report).map((line) =>
        (JSON.parse(line).diagnostics as { code: string }[]).filter((d) => d.code === "prefix_break"),
      );
      expect({ argv, got }).toEqual({ argv, got: expected });
      // With --report, the line still comes (the summary does not)
      expect(run.run.stderr).toBe(BREAKS_LINE);
    }
    const parquet = join(dir, "rows.parquet");
    const report = join(dir, "columnar.report.jsonl");
    const inputFile = join(dir, "run0.jsonl");
    const columnar = await cli("rows", inputFile, "-o", parquet, "--report", report, "--jobs", "1");
    expect(columnar.code).toBe(0);
    // The same rollout lines; the run records differ by the output they describe.
    expect(withoutRecord(readFileSync(report, "utf8"))).toBe(
      withoutRecord(readFileSync(join(dir, "run0.report.jsonl"), "utf8")),
    );
  });

  it("one line on stderr after the summary; none with --quiet, none without breaks", async () => {
    const dir = tempDir();
    const run = await cli("rows", REASONING_DROPPED, "-o", join(dir, "rows.jsonl"));
    expect(run.code).toBe(0);
    expect(run.stderr).toBe(
      "callforest: 1 rollout (1 ok, 0 rejected), 3 rows\n" +
        "callforest: prefix breaks in 2 calls of 1 rollout (a prompt that resent an earlier call's prompt " +
        "but not its exact generation, costing a tree); `callforest explain` says why\n",
    );
    const quiet = await cli("rows", REASONING_DROPPED, "-o", join(dir, "quiet.jsonl"), "--quiet");
    expect(quiet.stderr).toBe("");
    const clean = await rowsOf(dir, "clean", goodLines(10).join("\n") + "\n", "--jobs", "1");
    expect(clean.run.stderr).toBe("");
    const plain = await cli("rows", LOGIN_BUG, "-o", join(dir, "login.jsonl"));
    expect(plain.stderr).toBe("callforest: 1 rollout (1 ok, 0 rejected), 5 rows\n");
  });

  it("a rejected rollout's breaks are neither reported nor announced (SPEC: no diagnostics)", async () => {
    const dir = tempDir();
    // Rows of 11 and 14 tokens do not fit bins of 12: row_exceeds_capacity, after both breaks were read.
    for (const backend of ["wasm", "ts"]) {
      const report = join(dir, `${backend}.report.jsonl`);
      const out = join(dir, `${backend}.jsonl`);
      const run = await cli(
        "rows",
        REASONING_DROPPED,
        "-o",
        out,
        "--report",
        report,
        "--capacity",
        "12",
        "--backend",
        backend,
      );
      expect(run.stderr).not.toContain("prefix breaks");
      const line = JSON.parse(lines(readFileSync(report, "utf8"))[0]!) as { reason: string; diagnostics: unknown[] };
      expect([backend, line.reason, line.diagnostics]).toEqual([backend, "row_exceeds_capacity", []]);
    }
  });
});

describe("show: near parents", () => {
  it("marks each call that parts from its near parent, and says once what that means", async () => {
    const run = await captureOutput(() => main(["show", REASONING_DROPPED]));
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      [
        "rollout reasoning-dropped: 3 calls, 3 eligible, 3 trees, 3 leaves, 3 rows",
        "agents: L (leader)",
        "",
        "forest",
        "  C1 [L · leader] 4+7 tokens  root, leaf → row 0",
        "  C2 [L · leader] 9+5 tokens  root, near C1 (parts at 4), leaf → row 1",
        "  C3 [L · leader] 12+2 tokens  root, near C2 (parts at 9), leaf → row 2",
        "  prefix break (C2, C3): the call resent its near parent's prompt but not all of its generation, " +
          "so it is a root or continues a shorter call; `callforest explain` says why",
        "",
        "rows",
        "  row  leaf  agent  path (root first)  trains  context only  tokens",
        "  0    C1    L      C1                 C1      –             11",
        "  1    C2    L      C2                 C2      –             14",
        "  2    C3    L      C3                 C3      –             14",
        "",
        "tokens: 14 generated, 14 trained, 39 in rows, 39 unique",
        "",
      ].join("\n"),
    );
  });
});
