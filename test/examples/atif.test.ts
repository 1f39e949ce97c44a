// examples/atif/fix-login (issue 38): a Harbor trial with a terminus-2 summarization subagent, its
// token ids from Qwen3's real tokenizer and template (test/support/atif-example.ts). The shipped
// files are exactly what the builder writes (CALLFOREST_WRITE_EXAMPLES=1 rewrites them), and
// `rows --from atif` and `explain --from atif` plan them into the forest the steps imply.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildAtifExample, exampleText } from "../support/atif-example.js";
import { ROOT } from "../support/fixtures.js";
import { cli, tempDir } from "../ingest/cli.js";

const TRIAL = join(ROOT, "examples", "atif", "fix-login");
const TRAJECTORY = join(TRIAL, "agent", "trajectory.json");

describe("examples/atif/fix-login", () => {
  it("is what the builder writes", () => {
    const { files } = buildAtifExample();
    for (const [path, value] of Object.entries(files)) {
      const file = join(TRIAL, path);
      if (process.env.CALLFOREST_WRITE_EXAMPLES === "1") {
        mkdirSync(dirname(file), { recursive: true });
        writeFileSync(file, exampleText(value));
      }
      expect(readFileSync(file, "utf8"), path).toBe(exampleText(value));
    }
  });

  it("rows --from atif: the leader, its summarizer and the fresh context after the handoff", async () => {
    const dir = tempDir();
    const rows = join(dir, "rows.jsonl");
    const report = join(dir, "report.jsonl");
    const run = await cli("rows", TRAJECTORY, "--from", "atif", "-o", rows, "--report", report);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const r = JSON.parse(readFileSync(report, "utf8").split("\n")[0]);
    expect(r.status).toBe("ok");
    expect(r.rollout_id).toBe("fix-login__a1b2c3");
    const out = readFileSync(rows, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(out.map((row) => [row.leaf, row.agent, row.calls, row.trained, row.reward])).toEqual([
      [
        "fix-login__a1b2c3:7",
        "fix-login__a1b2c3",
        ["fix-login__a1b2c3:6", "fix-login__a1b2c3:7"],
        ["fix-login__a1b2c3:6", "fix-login__a1b2c3:7"],
        1,
      ],
      [
        "fix-login__a1b2c3-summarization-1-summary:5",
        "fix-login__a1b2c3-summarization-1-summary",
        ["fix-login__a1b2c3:2", "fix-login__a1b2c3:3", "fix-login__a1b2c3-summarization-1-summary:5"],
        ["fix-login__a1b2c3:2", "fix-login__a1b2c3:3", "fix-login__a1b2c3-summarization-1-summary:5"],
        1,
      ],
    ]);
    // By hand: every sampled token of the four leader steps and the summary is trained once.
    const { files } = buildAtifExample();
    const sampled = (t: any) =>
      t.steps.filter((s: any) => s.metrics).reduce((n: number, s: any) => n + s.metrics.completion_token_ids.length, 0);
    const total =
      sampled(files["agent/trajectory.json"]) + sampled(files["agent/trajectory.summarization-1-summary.json"]);
    expect(r.trained_tokens).toBe(total);
    expect(r.captured_tokens).toBe(total);
    expect(r.diagnostics).toEqual([
      {
        code: "steps_without_token_ids",
        call: null,
        detail: "3 copied-context steps (is_copied_context) are not calls",
      },
    ]);
  });

  it("explain --from atif: the handoff is a fresh root, and no prefix broke", async () => {
    const run = await cli("explain", TRAJECTORY, "--from", "atif");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/fix-login__a1b2c3/);
    // The call after the handoff starts a fresh context (a root), and nothing broke a prefix.
    expect(run.stdout).toMatch(/call fix-login__a1b2c3:6: near fix-login__a1b2c3:3 at \d+ \(root\): fresh/);
    expect(run.stdout).toMatch(/1 rollout, 1 call explained \(0 prefix_break\): fresh 1/);
  });
});
