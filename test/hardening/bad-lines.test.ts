// The adversarial pass's bad-line corpus, kept as a test: hand-made hostile lines (broken JSON,
// numbers JSON and float32 cannot hold, v2 fields gone wrong, ids built to confuse a placeholder
// or a terminal, nesting, prototype keys) among valid rollouts. Every path — the WASM scanner, the
// JSON.parse reader, worker threads, rows and packed layouts — must give one report line per
// input line, byte-identical reports, and the valid rollouts' rows unchanged.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { cli, lines, read, tempDir, withoutRecord } from "../ingest/cli.js";

const ok = (id: string, extra = "") =>
  `{"rollout_id":"${id}","reward":1,"calls":[{"id":"c1","prompt_token_ids":[1,2,3],"generation_token_ids":[4,5],` +
  `"generation_log_probs":[-0.5,-0.25]${extra}}]}`;
const call = (fields: string) => `{"rollout_id":"bad","reward":0,"calls":[{"id":"c1",${fields}}]}`;
const tokens = `"prompt_token_ids":[1,2,3],"generation_token_ids":[4],"generation_log_probs":[-1]`;

/** [what, line, the reason its report must give]. */
const CORPUS: [string, string, string][] = [
  ["cut off", '{"rollout_id":"x","reward":1,"calls":[{"id":"c1","prompt_token_ids":[1,2', "malformed_json"],
  ["not JSON", "rollout x reward 1", "malformed_json"],
  ["two values", `${ok("x")} ${ok("y")}`, "malformed_json"],
  ["a trailing comma", '{"rollout_id":"x","reward":1,"calls":[],}', "malformed_json"],
  [
    "NaN as a bare word",
    call(`"prompt_token_ids":[1],"generation_token_ids":[2],"generation_log_probs":[NaN]`),
    "malformed_json",
  ],
  ["a lone surrogate escape in an id", ok("\\ud800"), "ok"],
  [
    "a token of 2^31",
    call(`"prompt_token_ids":[2147483648],"generation_token_ids":[2],"generation_log_probs":[-1]`),
    "invalid_token",
  ],
  ["a token of -0", call(`"prompt_token_ids":[-0],"generation_token_ids":[2],"generation_log_probs":[-1]`), "ok"],
  ["a token 1e2", call(`"prompt_token_ids":[1e2],"generation_token_ids":[2],"generation_log_probs":[-1]`), "ok"],
  ["a token 1.0", call(`"prompt_token_ids":[1.0],"generation_token_ids":[2],"generation_log_probs":[-1]`), "ok"],
  [
    "a token 1.5",
    call(`"prompt_token_ids":[1.5],"generation_token_ids":[2],"generation_log_probs":[-1]`),
    "invalid_token",
  ],
  [
    "a token as a string",
    call(`"prompt_token_ids":["7"],"generation_token_ids":[2],"generation_log_probs":[-1]`),
    "invalid_token",
  ],
  [
    "a token of 1e400",
    call(`"prompt_token_ids":[1e400],"generation_token_ids":[2],"generation_log_probs":[-1]`),
    "invalid_token",
  ],
  [
    "a logprob past float32",
    call(`"prompt_token_ids":[1],"generation_token_ids":[2],"generation_log_probs":[-1e39]`),
    "invalid_logprob",
  ],
  [
    "a logprob of 1e400",
    call(`"prompt_token_ids":[1],"generation_token_ids":[2],"generation_log_probs":[1e400]`),
    "invalid_logprob",
  ],
  [
    "a subnormal logprob",
    call(`"prompt_token_ids":[1],"generation_token_ids":[2],"generation_log_probs":[-1e-45]`),
    "ok",
  ],
  [
    "logprobs short",
    call(`"prompt_token_ids":[1],"generation_token_ids":[2,3],"generation_log_probs":[-1]`),
    "logprob_length_mismatch",
  ],
  [
    "token arrays nested in arrays",
    call(`"prompt_token_ids":[[1]],"generation_token_ids":[2],"generation_log_probs":[-1]`),
    "invalid_token",
  ],
  [
    "token arrays as objects",
    call(`"prompt_token_ids":{"0":1},"generation_token_ids":[2],"generation_log_probs":[-1]`),
    "invalid_rollout",
  ],
  ["a placeholder-looking id", ok("\\u0000ABCDEFGHIJKLMNOP0"), "ok"],
  ["an id with a terminal escape", ok("\\u001b[2J"), "ok"],
  ["a __proto__ call field", call(`"__proto__":{"kept":false},${tokens}`), "ok"],
  [
    "a constructor rollout field",
    `{"rollout_id":"x","reward":1,"constructor":{"prototype":1},"calls":[{"id":"c1",${tokens}}]}`,
    "ok",
  ],
  [
    "deep nesting in an unknown field",
    `{"rollout_id":"x","reward":1,"deep":${"[".repeat(5000)}${"]".repeat(5000)},"calls":[{"id":"c1",${tokens}}]}`,
    "ok",
  ],
  ["a reward as a string", '{"rollout_id":"x","reward":"1","calls":[]}', "invalid_rollout"],
  ["no calls", '{"rollout_id":"x","reward":1,"calls":[]}', "no_trainable_calls"],
  [
    "twin subagents continued by a sibling",
    '{"rollout_id":"x","reward":1,"agents":[{"id":"L","parent":null},{"id":"A","parent":"L"},' +
      '{"id":"B","parent":"L"},{"id":"C","parent":"L"}],"calls":[{"id":"a","agent":"A",' +
      '"prompt_token_ids":[9],"generation_token_ids":[8],"generation_log_probs":[-1]},' +
      '{"id":"b","agent":"B","prompt_token_ids":[9],"generation_token_ids":[8],"generation_log_probs":[-1]},' +
      '{"id":"c","agent":"C","prompt_token_ids":[9,8],"generation_token_ids":[7],"generation_log_probs":[-1]}]}',
    "ambiguous_parent",
  ],
  [
    "media overlapping",
    call(`${tokens},"media":[{"id":"a","offset":0,"length":2},{"id":"b","offset":1,"length":1}]`),
    "invalid_media",
  ],
  ["media past the prompt", call(`${tokens},"media":[{"id":"a","offset":2,"length":2}]`), "invalid_media"],
  [
    "media with a token array's name inside",
    call(`${tokens},"media":[{"id":"a","offset":0,"length":1,"prompt_token_ids":[1,"x"]}]`),
    "ok",
  ],
  ["media null", call(`${tokens},"media":null`), "ok"],
  [
    "routed experts of the wrong size",
    call(`${tokens},"routed_experts":"nrlre1:int16:4x1x1:AAAA"`),
    "invalid_routed_experts",
  ],
  ["routed experts not base64", call(`${tokens},"routed_experts":"nrlre1:int16:4x1x1:!!!!"`), "invalid_routed_experts"],
  ["routed experts in padded base64", call(`${tokens},"routed_experts":"nrlre1:int16:4x1x1:AAAAAAAAAAA="`), "ok"],
  [
    "routed experts in unpadded base64",
    call(`${tokens},"routed_experts":"nrlre1:int16:4x1x1:AAAAAAAAAAA"`),
    "invalid_routed_experts",
  ],
  [
    "routed experts whose L and K differ between calls, their product the same",
    `{"rollout_id":"bad","reward":0,"calls":[{"id":"c1",${tokens},"routed_experts":"nrlre1:int8:4x1x2:AAAAAAAAAAA="},` +
      `{"id":"c2",${tokens},"routed_experts":"nrlre1:int8:4x2x1:AAAAAAAAAAA="}]}`,
    "invalid_routed_experts",
  ],
  [
    "an empty routed_experts on a call with no tokens, beside a call's 1x2",
    `{"rollout_id":"x","reward":0,"calls":[{"id":"c0","prompt_token_ids":[],"generation_token_ids":[],` +
      `"generation_log_probs":[],"routed_experts":[]},` +
      `{"id":"c1",${tokens},"routed_experts":"nrlre1:int8:4x1x2:AAAAAAAAAAA="}]}`,
    "ok",
  ],
  [
    "a duplicate key (the last one counts)",
    `{"rollout_id":"x","rollout_id":"y","reward":1,"calls":[{"id":"c1",${tokens}}]}`,
    "ok",
  ],
];

describe("the bad-line corpus", () => {
  test("every path gives one report line each, byte-identical, and the valid rows unchanged", async () => {
    const dir = tempDir();
    const input = join(dir, "corpus.jsonl");
    const text = CORPUS.flatMap(([, line], i) => [line, ok(`valid-${i}`)]).join("\n") + "\n";
    writeFileSync(input, text);
    const runs = [[], ["--backend", "ts"], ["--jobs", "2", "--batch-bytes", "4096"], ["--reader", "json"]];
    const outputs: { rows: string; report: string }[] = [];
    for (const [i, extra] of runs.entries()) {
      const rows = join(dir, `rows-${i}.jsonl`);
      const report = join(dir, `report-${i}.jsonl`);
      const run = await cli("rows", input, "-o", rows, "--report", report, ...extra);
      expect([extra.join(" "), run.code, run.stderr]).toEqual([extra.join(" "), 0, ""]);
      outputs.push({ rows: read(rows), report: withoutRecord(read(report)) });
    }
    for (const other of outputs.slice(1)) expect(other).toEqual(outputs[0]);
    const reports = lines(outputs[0].report).map(
      (line) => JSON.parse(line) as { status: string; reason?: string; line: number; rollout_id: string },
    );
    expect(reports.map((r) => r.line)).toEqual(reports.map((_, i) => i + 1));
    CORPUS.forEach(([what, , reason], i) => {
      const report = reports[2 * i];
      expect([what, report.status === "ok" ? "ok" : report.reason]).toEqual([what, reason]);
      expect([what, reports[2 * i + 1].status]).toEqual([what, "ok"]);
    });
    // The valid rollouts' rows are the same as when each is planned alone.
    const alone = join(dir, "alone.jsonl");
    writeFileSync(alone, CORPUS.map((_, i) => ok(`valid-${i}`)).join("\n") + "\n");
    const rows = join(dir, "alone-rows.jsonl");
    await cli("rows", alone, "-o", rows, "--quiet");
    const valid = lines(outputs[0].rows).filter((line) => line.startsWith('{"rollout_id":"valid-'));
    expect(valid).toEqual(lines(read(rows)));
  });

  test("packed layouts give the same reports (they add trie_tokens, bins packed_tokens)", async () => {
    const dir = tempDir();
    const input = join(dir, "corpus.jsonl");
    writeFileSync(input, CORPUS.map(([, line]) => line).join("\n") + "\n");
    const reasons = async (...extra: string[]) => {
      const report = join(dir, `r${extra.join("")}.jsonl`);
      expect((await cli("rows", input, "-o", join(dir, "out.jsonl"), "--report", report, ...extra)).code).toBe(0);
      return lines(read(report)).map((line) =>
        (({ packed_tokens: _packed, trie_tokens: _trie, ...rest }) => rest)(JSON.parse(line)),
      );
    };
    const rows = await reasons();
    expect(await reasons("--layout", "packed")).toEqual(rows);
    expect(await reasons("--capacity", "4096")).toEqual(rows);
  });
});
