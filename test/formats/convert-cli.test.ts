// `callforest convert` through the CLI's main(), in-process (stdout/stderr captured).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { rolloutToJson } from "../../src/ingest/read.js";
import { captureOutput } from "../support/capture.js";
import {
  COMPETITIVE_CODING,
  OBSERVED_DIR,
  OBSERVED_ROWS,
  OBSERVED_TOKENS,
  VLLM_ROUND_TRIP,
} from "../support/fixtures.js";
import { readJsonl } from "./helpers.js";
import { tempDirs } from "../support/temp-dirs.js";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(...argv: string[]): Promise<Run> {
  return captureOutput(() => main(["convert", ...argv]));
}

const lines = (text: string) => text.split("\n").filter((l) => l !== "");
const tmp = tempDirs("convert");

describe("callforest convert", () => {
  it("writes one canonical rollout per Gym row, in input order", async () => {
    const r = await run(COMPETITIVE_CODING);
    expect([r.code, r.stderr]).toEqual([0, ""]);
    const rollouts = lines(r.stdout).map((l) => JSON.parse(l));
    expect(rollouts.map((x) => [x.rollout_id, x.reward, x.calls.length])).toEqual([
      ["0-1", 0, 1],
      ["0-3", 0, 1],
      ["0-4", 0, 1],
      ["0-0", 0, 1],
      ["0-2", 0, 1],
    ]);
    const rows = readJsonl(COMPETITIVE_CODING);
    expect(rollouts[4].calls[0].generation_token_ids).toEqual(rows[4].response.output[1].generation_token_ids);
    expect(rollouts[4].calls[0].generation_log_probs).toEqual(rows[4].response.output[1].generation_log_probs);
  });

  it("reads a gym-observed row with --tokens and writes its import diagnostics beside it", async () => {
    const r = await run("--from", "gym-observed", "--tokens", OBSERVED_DIR, OBSERVED_ROWS);
    expect([r.code, r.stderr]).toEqual([0, ""]);
    const [rollout] = lines(r.stdout).map((l) => JSON.parse(l));
    expect(rollout.rollout_id).toBe("7-2");
    expect(rollout.calls.map((c: any) => c.id)[2]).toBe("mc-leader-retry");
    expect(rollout.calls[2].kept).toBe(false);
    expect(rollout.diagnostics.map((d: any) => d.code)).toEqual([
      "unowned_call",
      "context_compaction",
      "observation_records",
      "subagent_parent_unavailable",
      "model_call_ownership_unavailable",
    ]);
  });

  it("round-trips: its output read back with --from callforest is the same, -o writes a file", async () => {
    const dir = tmp();
    const first = join(dir, "first.jsonl");
    const second = join(dir, "second.jsonl");
    expect((await run("--tokens", OBSERVED_DIR, "-o", first, OBSERVED_ROWS)).code).toBe(0);
    const again = await run("--from", "callforest", "--output", second, first);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe("");
    expect(readFileSync(second, "utf8")).toBe(readFileSync(first, "utf8"));
    expect(lines(readFileSync(first, "utf8"))).toHaveLength(1);
  });

  it("reports each bad line on stderr with file:line and reason, and converts the rest", async () => {
    const dir = tmp();
    const file = join(dir, "mixed.jsonl");
    const [row] = readJsonl(COMPETITIVE_CODING);
    const broken = { ...row, reward: "high" };
    writeFileSync(
      file,
      [
        JSON.stringify(row),
        '{"rollout_id": "cut',
        "",
        JSON.stringify({}),
        JSON.stringify(broken),
        JSON.stringify({ ...row, _ng_rollout_index: 9 }),
      ].join("\n") + "\n",
    );
    const r = await run(file);
    expect(r.code).toBe(0);
    expect(lines(r.stdout).map((l) => JSON.parse(l).rollout_id)).toEqual(["0-1", "0-9"]);
    expect(lines(r.stderr)).toEqual([
      `${file}:2: rejected (malformed_json): not JSON at byte 19: cut off inside a string`, // as `rows` says it
      `${file}:4: rejected (invalid_rollout, unknown_format): not a known format: no calls[] (callforest), ` +
        `no response or "object": "response" (gym-rollout), no ng_agent_observations.records[] (gym-observed), no steps[] (atif)`,
      `${file}:5: rejected (invalid_rollout, missing_field): gym-rollout: reward is "high", expected a finite number`,
    ]);
  });

  it(
    "names the right line for a bad line longer than a read batch (2 MB), " + "and converts the lines around it",
    async () => {
      const dir = tmp();
      const file = join(dir, "long.jsonl");
      const [row] = readJsonl(COMPETITIVE_CODING);
      const long = JSON.stringify({ ...row, padding: "x".repeat(5 << 20) });
      writeFileSync(file, [JSON.stringify(row), `${long} x`, long, JSON.stringify(row)].join("\n") + "\n");
      const r = await run(file);
      expect(r.code).toBe(0);
      expect(lines(r.stdout)).toHaveLength(3);
      expect(lines(r.stderr)).toEqual([
        `${file}:2: rejected (malformed_json): not JSON at byte ${long.length + 1}: ` +
          `unexpected 'x' after the JSON value`,
      ]);
    },
  );

  it(
    "a value it cannot write back (an unknown field nested 10,000 deep) " + "is one line on stderr; the rest converts",
    async () => {
      const dir = tmp();
      const file = join(dir, "deep.jsonl");
      const good = {
        rollout_id: "ok",
        reward: 1,
        calls: [{ id: "a", prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-1] }],
      };
      const deep = JSON.stringify({ ...good, rollout_id: "deep" }).replace(
        /}$/,
        `,"extra":${"[".repeat(10_000)}${"]".repeat(10_000)}}`,
      );
      writeFileSync(file, `${deep}\n${JSON.stringify(good)}\n`);
      const r = await run(file);
      expect(r.code).toBe(0);
      expect(lines(r.stdout).map((l) => JSON.parse(l).rollout_id)).toEqual(["ok"]);
      expect(lines(r.stderr)).toEqual([
        `${file}:1: not converted: it cannot be written back as JSON (Maximum call stack size exceeded)`,
      ]);
    },
  );

  it(
    "a number out of range (1e400) is not written as null: " + "that value is one line on stderr, --strict exits 1",
    async () => {
      const dir = tmp();
      const file = join(dir, "range.jsonl");
      const good = {
        rollout_id: "ok",
        reward: 1,
        calls: [{ id: "a", prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-1] }],
      };
      writeFileSync(
        file,
        `${JSON.stringify(good).replace('"reward":1', '"reward":1e400')}\n${JSON.stringify(good)}\n` +
          `${JSON.stringify(good).replace("[-1]", "[-1e400]")}\n`,
      );
      const r = await run(file, "--strict");
      expect(r.code).toBe(1);
      expect(lines(r.stdout).map((l) => JSON.parse(l).reward)).toEqual([1]);
      expect(lines(r.stderr).slice(0, 2)).toEqual([
        `${file}:1: not converted: it cannot be written back as JSON ` +
          `("reward" is Infinity, which JSON cannot hold (a number out of range, such as 1e400))`,
        `${file}:3: not converted: it cannot be written back as JSON ` +
          `("0" is -Infinity, which JSON cannot hold (a number out of range, such as 1e400))`,
      ]);
    },
  );

  it("keeps a -0 logprob as -0 (JSON.stringify alone writes 0), plain or Float32Array", async () => {
    const dir = tmp();
    const file = join(dir, "negzero.jsonl");
    writeFileSync(
      file,
      '{"rollout_id":"z","reward":1,"calls":[{"id":"a","prompt_token_ids":[1],' +
        '"generation_token_ids":[3,4],"generation_log_probs":[-0.0,0]}]}\n',
    );
    const r = await run(file);
    expect(r.stdout).toContain('"generation_log_probs":[-0,0]');
    const typed = rolloutToJson({
      rollout_id: "t",
      reward: 0,
      calls: [{ id: "a", prompt_token_ids: [1], generation_token_ids: [3], generation_log_probs: Float32Array.of(-0) }],
    });
    expect(typed).toContain('"generation_log_probs":[-0]');
  });

  it("--strict exits 1 when something was rejected, after writing the rest", async () => {
    const r = await run("--strict", VLLM_ROUND_TRIP, COMPETITIVE_CODING);
    expect(r.code).toBe(1);
    expect(lines(r.stdout)).toHaveLength(5);
    expect(lines(r.stderr)).toEqual([
      `${VLLM_ROUND_TRIP}: rejected (invalid_rollout, unknown_format): not a known format: no calls[] (callforest), ` +
        `no response or "object": "response" (gym-rollout), no ng_agent_observations.records[] (gym-observed), no steps[] (atif)`,
      "callforest: 1 of 6 input values rejected",
    ]);
    // Every value rejected is no exception.
    const all = await run("--strict", VLLM_ROUND_TRIP);
    expect([all.code, all.stdout, lines(all.stderr).at(-1)]).toEqual([
      1,
      "",
      "callforest: 1 of 1 input values rejected",
    ]);
  });

  it("reads a .json file holding an array as one value per element", async () => {
    const dir = tmp();
    const file = join(dir, "two.json");
    const response = JSON.parse(readFileSync(VLLM_ROUND_TRIP, "utf8")).input;
    writeFileSync(file, JSON.stringify([response, { object: "response" }]));
    const r = await run(file);
    expect(lines(r.stdout).map((l) => JSON.parse(l).rollout_id)).toEqual(["resp_38e93155c5544510af97737022148055"]);
    expect(lines(r.stderr)).toEqual([
      `${file}[1]: rejected (invalid_rollout, missing_field): gym-rollout: id is missing, expected the response id`,
    ]);
  });

  /** A --tokens directory like the fixture's, with the third token entry (mc-leader-2) changed. */
  function tokensWithThirdEntry(dir: string, change: (entry: Record<string, unknown>) => void): string {
    const tokens = join(dir, "tokens");
    mkdirSync(tokens);
    const entries = readFileSync(OBSERVED_TOKENS, "utf8").split("\n");
    const third = JSON.parse(entries[2]) as Record<string, unknown>;
    change(third);
    entries[2] = JSON.stringify(third);
    writeFileSync(join(tokens, "7-2.tokens.jsonl"), entries.join("\n"));
    return tokens;
  }

  it("names the token file line and the call when a token entry is bad", async () => {
    const tokens = tokensWithThirdEntry(tmp(), (entry) => delete entry.generation_log_probs);
    const r = await run("--tokens", tokens, OBSERVED_ROWS);
    expect(r.stdout).toBe("");
    expect(lines(r.stderr)).toEqual([
      `${OBSERVED_ROWS}:1: rejected (invalid_rollout, missing_field): ` +
        `gym-observed: ${join(tokens, "7-2.tokens.jsonl")}:3 (call "mc-leader-2"): ` +
        `generation_log_probs is missing, expected an array`,
    ]);
  });

  it("rows: a rejection the planner finds in a gym-observed call names its token entry's file:line", async () => {
    const dir = tmp();
    const tokens = tokensWithThirdEntry(dir, (entry) => {
      entry.generation_log_probs = (entry.generation_log_probs as number[]).slice(1); // one logprob short
    });
    const r = await captureOutput(() =>
      main(["rows", "--tokens", tokens, OBSERVED_ROWS, "-o", join(dir, "rows.jsonl"), "--quiet"]),
    );
    const [note, ...rest] = lines(r.stderr);
    expect(rest).toEqual([]);
    expect(note.startsWith(`${OBSERVED_ROWS}:1: rejected (logprob_length_mismatch): call "mc-leader-2" (calls[`)).toBe(
      true,
    );
    expect(note.endsWith(` generated tokens (token entry ${join(tokens, "7-2.tokens.jsonl")}:3)`)).toBe(true);
  });

  it("names the input line, the ref and the model_call_id when a ref resolves to nothing", async () => {
    const dir = tmp();
    const file = join(dir, "rows.jsonl");
    const [row] = readJsonl(OBSERVED_ROWS);
    const other = JSON.parse(JSON.stringify(row));
    other.ng_agent_observations.records[2].model_calls[0] = { model_call_id: "mc-typo" };
    writeFileSync(file, JSON.stringify(row) + "\n" + JSON.stringify(other) + "\n");
    const r = await run("--tokens", OBSERVED_DIR, file);
    expect(lines(r.stdout)).toHaveLength(1);
    expect(lines(r.stderr)).toEqual([
      `${file}:2: rejected (invalid_rollout, unknown_model_call): ` +
        `gym-observed: ng_agent_observations.records[2].model_calls[0] (invocation "inv-fork"): ` +
        `model_call_id "mc-typo" is in neither ng_model_call_capture.calls nor ${OBSERVED_TOKENS}`,
    ]);
  });

  it("names the rollout and the missing token file", async () => {
    const r = await run("--tokens", tmp(), OBSERVED_ROWS);
    expect(lines(r.stderr)).toEqual([
      expect.stringMatching(
        new RegExp(
          /:1: rejected \(invalid_rollout, missing_token_file\): /.source +
            /gym-observed: no token entries for rollout "7-2": .+\/7-2\.tokens\.jsonl not found$/.source,
        ),
      ),
    ]);
  });
});

describe("callforest convert: usage errors exit 2 with one line and no output", () => {
  const cases: [string, string[], string][] = [
    [
      "bad --from",
      ["--from", "gym", COMPETITIVE_CODING],
      "callforest: unknown --from format 'gym': expected callforest, gym-rollout, gym-observed, gym-compaction, atif, auto",
    ],
    ["bad --to", ["--to", "rows", COMPETITIVE_CODING], "callforest: unknown --to format 'rows': expected callforest"],
    [
      "gym-observed without --tokens",
      ["--from", "gym-observed", OBSERVED_ROWS],
      "callforest: --from gym-observed needs --tokens DIR (the <rollout_id>.tokens.jsonl files)",
    ],
    [
      "--tokens not a directory",
      ["--tokens", OBSERVED_TOKENS, OBSERVED_ROWS],
      `callforest: --tokens ${OBSERVED_TOKENS}: not a directory`,
    ],
    [
      "--tokens missing",
      ["--tokens", "/nonexistent/tokens", OBSERVED_ROWS],
      "callforest: --tokens /nonexistent/tokens: no such directory",
    ],
    [
      "missing input (checked before any output)",
      [COMPETITIVE_CODING, "/nonexistent/in.jsonl"],
      "callforest: cannot read /nonexistent/in.jsonl: no such file",
    ],
    ["input is a directory", [OBSERVED_DIR], `callforest: cannot read ${OBSERVED_DIR}: is a directory`],
  ];
  for (const [name, argv, message] of cases) {
    it(name, async () => {
      const r = await run(...argv);
      expect(r).toEqual({ code: 2, stdout: "", stderr: message + "\n" });
    });
  }
});
