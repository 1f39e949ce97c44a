// `callforest explain` (docs/breaks.md): the worked example, route mismatches, --json, --rollout,
// --reasoning, and bad input as one line that leaves the other rollouts alone.
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { parseReasoning } from "../../src/cli/commands/explain.js";
import { captureOutput } from "../support/capture.js";
import { tempDirs } from "../support/temp-dirs.js";
import { conversation } from "../explain/harness/agent.js";
import { model } from "../explain/harness/model.js";

const tmp = tempDirs("explain");
const EXAMPLE = "examples/reasoning-dropped.json";

const jsonLines = (text: string) =>
  text
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Record<string, unknown>);

describe("callforest explain", () => {
  it("the worked example: C2 near C1 at 4 and C3 near C2 at 9, both reasoning_dropped", async () => {
    const run = await captureOutput(() => main(["explain", EXAMPLE, "--reasoning", "50,51"]));
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    expect(run.stdout).toBe(
      [
        `${EXAMPLE}: reasoning-dropped call C2: near C1 at 4: reasoning_dropped`,
        "  ids     before [1 2 3 4] near [50 11 12 51 20 21 99] call [20 21 99 30 31]",
        `${EXAMPLE}: reasoning-dropped call C3: near C2 at 9: reasoning_dropped`,
        "  ids     before [2 3 4 20 21 99 30 31] near [50 13 51 22 99] call [22 99 32]",
        `${EXAMPLE}: 1 rollout, 2 calls explained (2 prefix_break): reasoning_dropped 2; ` +
          "cost 5 trie tokens (26 as sent, 21 token-in/token-out), 18 row tokens (39 as sent, 21 token-in/token-out); " +
          "3 trees as sent, 1 token-in/token-out",
        "",
      ].join("\n"),
    );
  });

  it("lists each route_mismatch with the token, the layer and both expert sets (SPEC's routes example)", async () => {
    const example = "examples/routes-refit.json";
    const text = await captureOutput(() => main(["explain", example]));
    expect(text.code).toBe(0);
    // C3 is a root for its routes alone: it is not explained again as a token break.
    expect(text.stdout.split("\n")[0]).toBe(
      `${example}: routes-refit call C3: near C2 at 3: route_mismatch in layer 1: experts [63] where C2 had [7]`,
    );
    const json = await captureOutput(() => main(["explain", example, "--json"]));
    expect(jsonLines(json.stdout)[0]).toEqual({
      rollout_id: "routes-refit",
      call: "C3",
      kind: "route_mismatch",
      near: "C2",
      at: 3,
      layer: 1,
      experts: [[6], [63]],
      near_experts: [[6], [7]],
    });
    expect(jsonLines(json.stdout)).toHaveLength(2); // and the summary
  });

  it("--json: one object per explained call, then the summary; without markers the cause is unknown", async () => {
    const run = await captureOutput(() => main(["explain", EXAMPLE, "--json", "--backend", "ts"]));
    expect(run.code).toBe(0);
    const [c2, c3, summary] = jsonLines(run.stdout);
    expect(c2).toMatchObject({ rollout_id: "reasoning-dropped", call: "C2", near: "C1", at: 4, cause: "unknown" });
    expect(c2!.unknown).toMatch(/needs reasoning markers/);
    expect(c2!.expected).toEqual([50, 11, 12, 51, 20, 21, 99]);
    expect(c2!.found).toEqual([20, 21, 99, 30, 31]);
    expect(c3).toMatchObject({ call: "C3", near: "C2", at: 9, kind: "prefix_break" });
    expect(summary).toEqual({
      kind: "summary",
      input: EXAMPLE,
      rollouts: 1,
      rejected: 0,
      explained: 2,
      prefix_breaks: 2,
      causes: { unknown: 2 },
      trees: 3,
      tito_trees: 1,
      trie_tokens: 26,
      tito_trie_tokens: 21,
      trie_cost: 5,
      row_tokens: 39,
      tito_row_tokens: 21,
      row_cost: 18,
      dropped_tokens: 7,
    });
  });

  it("--rollout picks one rollout; a bad line is one line on stderr and the others go on", async () => {
    const file = join(tmp(), "two.jsonl");
    const example = JSON.parse((await import("node:fs")).readFileSync(EXAMPLE, "utf8")) as { rollout_id: string };
    writeFileSync(
      file,
      [JSON.stringify(example), "{not json", JSON.stringify({ ...example, rollout_id: "other" })].join("\n"),
    );
    const run = await captureOutput(() =>
      main(["explain", file, "--rollout", "other", "--reasoning", "50,51", "--json"]),
    );
    expect(run.code).toBe(0);
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    expect(run.stderr).toMatch(new RegExp(`${file}:2: rejected \\(malformed_json`));
    const lines = jsonLines(run.stdout);
    expect(lines.map((line) => line.rollout_id ?? line.kind)).toEqual(["other", "other", "summary"]);
    expect(lines[2]).toMatchObject({ rollouts: 1, rejected: 1 });
  });

  it("a media_mismatch root is not listed, and the cost as sent is what rows reports", async () => {
    const run = await captureOutput(() => main(["explain", "examples/screenshot-swap.json"]));
    expect(run.code).toBe(0);
    // rows --layout packed reports roots 2, row_tokens 29, trie_tokens 26.
    expect(run.stdout).toBe(
      "examples/screenshot-swap.json: 1 rollout, 0 calls explained (0 prefix_break); " +
        "cost 0 trie tokens (26 as sent, 26 token-in/token-out), 0 row tokens (29 as sent, 29 token-in/token-out); " +
        "2 trees as sent, 2 token-in/token-out\n",
    );
  });

  it("a negative cost says why: gym-capture's fork repeats what token-in/token-out resends", async () => {
    const run = await captureOutput(() =>
      main(["explain", "examples/gym-capture/rollouts.jsonl", "--tokens", "examples/gym-capture"]),
    );
    expect(run.code).toBe(0);
    expect(run.stdout.trim().split("\n").at(-1)).toBe(
      "examples/gym-capture/rollouts.jsonl: 2 rollouts, 3 calls explained (2 prefix_break): compaction 1, " +
        "unknown 2; cost 27 trie tokens (326 as sent, 299 token-in/token-out), -5 row tokens (500 as sent, " +
        "505 token-in/token-out; negative: token-in/token-out resends 5 tokens the calls dropped); " +
        "5 trees as sent, 3 token-in/token-out",
    );
  });

  it("reads stdin when given no input, as the other commands do", () => {
    const run = spawnSync(process.execPath, ["bin/callforest.js", "explain", "--reasoning", "50,51", "--json"], {
      input: readFileSync(EXAMPLE, "utf8"),
      encoding: "utf8",
    });
    expect(run.status).toBe(0);
    const lines = jsonLines(run.stdout);
    expect(lines.map((line) => line.cause ?? line.input)).toEqual([
      "reasoning_dropped",
      "reasoning_dropped",
      "<stdin>",
    ]);
  });

  it("--rollout naming no rollout is a usage error, after the summary", async () => {
    const run = await captureOutput(() => main(["explain", EXAMPLE, "--rollout", "nope"]));
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(`callforest: no rollout with rollout_id "nope" in ${EXAMPLE}\n`);
  });

  it("--reasoning: ids or text; text needs a tokenizer; a bad value is a usage error", async () => {
    for (const bad of ["50", "50,", "a,b"]) {
      const run = await captureOutput(() => main(["explain", EXAMPLE, "--reasoning", bad]));
      expect(run.code).toBe(2);
      expect(run.stderr.trim().split("\n")).toHaveLength(1);
      expect(run.stderr).toMatch(/^callforest: --reasoning/);
    }
    const multi = await captureOutput(() => main(["explain", EXAMPLE, "--reasoning", "50 11,51", "--json"]));
    expect(jsonLines(multi.stdout)[0]).toMatchObject({ cause: "reasoning_dropped" });
  });

  it("--reasoning: markers that cannot tell a block's start from its end are refused in one line", async () => {
    const cases: [string, string][] = [
      ["50,50", "the open and close markers are the same; a block needs two"],
      [" 50 51 , 50  51", "the open and close markers are the same; a block needs two"],
      ["50,50 51", "the open marker begins the other one, so one cannot be told from the other"],
      ["50 51,50", "the close marker begins the other one, so one cannot be told from the other"],
    ];
    for (const [markers, what] of cases) {
      const run = await captureOutput(() => main(["explain", EXAMPLE, "--reasoning", markers]));
      expect([markers, run.code, run.stderr]).toEqual([markers, 2, `callforest: --reasoning '${markers}': ${what}\n`]);
    }
    // Ids that only share digits are different markers; text markers are checked the same way.
    expect(parseReasoning("5,50", null)).toEqual({ open: [5], close: [50] });
    const decoder = {} as Parameters<typeof parseReasoning>[1];
    expect(() => parseReasoning("<think>,<think>", decoder)).toThrow(/the open and close markers are the same/);
    expect(() => parseReasoning("<think>,<think>x", decoder)).toThrow(/the open marker begins the other/);
    expect(parseReasoning("<think>,</think>", decoder)).toEqual({ open: "<think>", close: "</think>" });
  });

  it("--tokenizer qwen3: a real-template conversation's breaks, decoded, with their causes", async () => {
    const file = join(tmp(), "qwen3.json");
    const { rollout, expected } = conversation(model("qwen3"), 3, "render");
    writeFileSync(file, JSON.stringify(rollout));
    const json = await captureOutput(() => main(["explain", file, "--tokenizer", "qwen3", "--json"]));
    expect(json.code).toBe(0);
    const lines = jsonLines(json.stdout);
    expect(lines.slice(0, -1).map((line) => [line.call, line.near, line.at, line.cause])).toEqual(
      expected.map((e) => [e.call, e.near, e.at, e.cause]),
    );
    expect(lines.at(-1)).toMatchObject({ kind: "summary", explained: expected.length });
    const text = await captureOutput(() => main(["explain", file, "--tokenizer", "qwen3"]));
    expect(text.stdout).toContain("reasoning_dropped\n  before  …");
    expect(text.stdout).toMatch(/near {4}<think>↵\S+/); // whitespace visible
    expect(text.stdout).toContain("⟦<|im_end|>⟧↵⟦<|im_start|>⟧user↵"); // special tokens marked
    // Reasoning markers given as text: the same causes.
    const marked = await captureOutput(() =>
      main(["explain", file, "--tokenizer", "qwen3", "--reasoning", "<think>,</think>", "--json"]),
    );
    expect(jsonLines(marked.stdout).map((line) => line.cause)).toEqual(lines.map((line) => line.cause));
  });

  it("--tokenizer o200k_harmony: gpt-oss's compound breaks name their first cause and list the rest", async () => {
    const file = join(tmp(), "gptoss.json");
    // The first of the harness's gpt-oss conversations with a break of three causes.
    const { rollout, expected } = [1, 2, 3, 4, 5, 6, 7, 8]
      .map((seed) => conversation(model("gptoss"), seed, "render"))
      .find((c) => c.expected.some((e) => e.also.length > 1))!;
    writeFileSync(file, JSON.stringify(rollout));
    const json = await captureOutput(() => main(["explain", file, "--tokenizer", "o200k_harmony", "--json"]));
    expect(json.code).toBe(0);
    const lines = jsonLines(json.stdout).slice(0, -1);
    expect(lines.map((line) => [line.call, line.near, line.at, line.cause, line.also ?? []])).toEqual(
      expected.map((e) => [e.call, e.near, e.at, e.cause, e.also]),
    );
    expect(expected.some((e) => e.also.length > 1)).toBe(true);
    // In text, the rest follow the first cause.
    const text = await captureOutput(() => main(["explain", file, "--tokenizer", "o200k_harmony"]));
    const compound = expected.find((e) => e.also.length > 0)!;
    expect(text.stdout).toContain(
      `call ${compound.call}: near ${compound.near} at ${compound.at}: ${compound.cause}, then ${compound.also.join(", ")}\n`,
    );
  });

  it("a call that repeats its parent's stop token is listed as glue: stop_duplicated", async () => {
    const file = join(tmp(), "dup.json");
    const { rollout, expected } = [1, 2, 3, 4, 5]
      .map((seed) => conversation(model("qwen3"), seed, "render", "dup_stop"))
      .find((c) => c.expected.some((e) => e.cause === "stop_duplicated"))!;
    writeFileSync(file, JSON.stringify(rollout));
    const glue = expected.filter((e) => e.cause === "stop_duplicated");
    expect(glue.length).toBeGreaterThan(0);
    const json = await captureOutput(() => main(["explain", file, "--tokenizer", "qwen3", "--json"]));
    const lines = jsonLines(json.stdout).filter((line) => line.kind === "glue");
    expect(lines.map((line) => [line.call, line.near, line.at, line.cause])).toEqual(
      glue.map((e) => [e.call, e.near, e.at, "stop_duplicated"]),
    );
    expect(lines[0]!.found).toEqual(expect.arrayContaining([151645])); // <|im_end|> again
    const text = await captureOutput(() => main(["explain", file, "--tokenizer", "qwen3"]));
    expect(text.stdout).toContain(
      `call ${glue[0]!.call}: near ${glue[0]!.near} at ${glue[0]!.at} (glue): stop_duplicated\n`,
    );
  });

  it("a root whose prompt stops inside the previous call's generation: generation_cut", async () => {
    const file = join(tmp(), "cut.json");
    const call = (id: string, prompt: number[], generation: number[]) => ({
      id,
      prompt_token_ids: prompt,
      generation_token_ids: generation,
      generation_log_probs: generation.map(() => -1),
    });
    const rollout = {
      rollout_id: "cut",
      reward: 1,
      calls: [call("C1", [1, 2, 3], [4, 5, 6, 7]), call("C2", [1, 2, 3, 4, 5], [8])],
    };
    writeFileSync(file, JSON.stringify(rollout));
    const run = await captureOutput(() => main(["explain", file, "--json"]));
    expect(run.code).toBe(0);
    expect(jsonLines(run.stdout)[0]).toMatchObject({
      call: "C2",
      near: "C1",
      at: 5,
      kind: "root",
      cause: "generation_cut",
    });
  });

  it("--tokenizer: an unknown name or path is a usage error", async () => {
    const run = await captureOutput(() => main(["explain", EXAMPLE, "--tokenizer", "no-such-model"]));
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^callforest: --tokenizer no-such-model: not a tokenizer name/);
  });

  it("--tokenizer: a file that is no tokenizer is one line naming it and what is wrong", async () => {
    const dir = tmp();
    const write = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const cases: [string, string][] = [
      [write("broken.json", '{"model": '), "not valid JSON ("],
      [write("list.json", "[]"), 'JSON [] (an empty array), not a tokenizer.json (a JSON object with a "model")'],
      [write("number.json", "42"), 'JSON a number, not a tokenizer.json (a JSON object with a "model")'],
      [write("config.json", '{"vocab_size": 5}'), 'a JSON object, but not a tokenizer.json (it has no "model" object)'],
      [write("notes.txt", "hello\nworld\n"), "neither a tokenizer.json (JSON) nor a .tiktoken rank file"],
      ["/dev/null", "empty, not a tokenizer.json nor a .tiktoken rank file"],
      [write("odd.json", '{"model": {"type": "Nope"}}'), "a tokenizer.json the tokenizer library cannot read ("],
    ];
    for (const [file, what] of cases) {
      const run = await captureOutput(() => main(["explain", EXAMPLE, "--tokenizer", file]));
      expect([file, run.code]).toEqual([file, 2]);
      expect(run.stderr).toContain(`callforest: --tokenizer ${file}: ${what}`);
      expect(run.stderr).not.toContain(".tiktoken file needs");
      expect(run.stderr.trim().split("\n")).toHaveLength(1);
    }
    // A directory names the tokenizer.json in it.
    write("tokenizer.json", "[1]");
    const run = await captureOutput(() => main(["explain", EXAMPLE, "--tokenizer", dir]));
    expect(run.stderr).toBe(
      `callforest: --tokenizer ${dir}: ${join(dir, "tokenizer.json")}: JSON an array, not a tokenizer.json ` +
        '(a JSON object with a "model")\n',
    );
  });
});
