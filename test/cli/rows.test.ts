// `callforest rows` in-process (--jobs 1): bad lines get SPEC's code and their line number while
// every other rollout's rows and report stay byte-identical; blank lines keep numbering; Gym
// inputs; options and errors. Worker threads are in cli-rows-workers.test.ts.
import { availableParallelism } from "node:os";
import { truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { init, rowToJson } from "../../src/index.js";
import { COMPETITIVE_CODING, LOGIN_BUG, OBSERVED_DIR, OBSERVED_ROWS, VLLM_ROUND_TRIP } from "../support/fixtures.js";
import { cli, goodLines, lines, read, rowsOf, tempDir } from "../ingest/cli.js";

const tokenLine = (id: string, prompt: string, generation = "[4,5]") =>
  `{"rollout_id":"${id}","reward":1,"calls":[{"id":"c1","prompt_token_ids":${prompt},` +
  `"generation_token_ids":${generation},"generation_log_probs":[-0.5,-0.25]}]}`;

/** Bad lines and the code each must get. */
const BAD: [string | Uint8Array, string][] = [
  ["not json at all", "malformed_json"],
  ['{"rollout_id":"cut","reward":1,"calls":[{"id":"c1","prompt_token_ids":[1,2', "malformed_json"],
  [
    Buffer.concat([
      Buffer.from('{"rollout_id":"utf8-'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('","reward":1,"calls":[]}'),
    ]),
    "malformed_json",
  ],
  [
    Buffer.concat([
      Buffer.from('{"rollout_id":"overlong-'),
      Buffer.from([0xc0, 0xaf]),
      Buffer.from('","reward":1,"calls":[]}'),
    ]),
    "malformed_json",
  ],
  [tokenLine("fraction", "[1,2,1.5]"), "invalid_token"],
  [tokenLine("negative", "[1,2,-1]"), "invalid_token"],
  [tokenLine("too-big", "[1,2,2147483648]"), "invalid_token"],
  [tokenLine("string", '[1,2,"7"]'), "invalid_token"],
  [tokenLine("null", "[1,2,null]"), "invalid_token"],
  [tokenLine("gen-fraction", "[1,2,3]", "[4,5.5]"), "invalid_token"],
];

/** Good lines with every bad line (and blank lines) between them; `clean` puts blanks instead. */
function mixed(good: string[], clean: boolean): Buffer {
  const parts: (string | Uint8Array)[] = [];
  good.forEach((line, i) => {
    parts.push(line, "\n");
    if (i < BAD.length) parts.push(clean ? "" : BAD[i][0], "\n");
    if (i % 3 === 0) parts.push("   \n");
  });
  return Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : p)));
}

function lineNumbersOf(content: Buffer): Map<string, number> {
  // Where each bad line lands: its 1-based line number in `content`.
  const numbers = new Map<string, number>();
  let line = 1;
  let start = 0;
  for (let i = 0; i <= content.length; i++) {
    if (i === content.length || content[i] === 10) {
      numbers.set(content.subarray(start, i).toString("latin1"), line);
      line++;
      start = i + 1;
    }
  }
  return numbers;
}

describe("rows: bad lines in a batch", () => {
  const good = goodLines(24);

  it("rejects each bad line with SPEC's code and line number; the rest is byte-identical", async () => {
    const dir = tempDir();
    const dirty = mixed(good, false);
    const withBad = await rowsOf(dir, "dirty", dirty, "--jobs", "1");
    const without = await rowsOf(dir, "clean", mixed(good, true), "--jobs", "1");
    expect(withBad.run.code).toBe(0);
    expect(without.run.code).toBe(0);
    expect(withBad.rows).toBe(without.rows);
    expect(withBad.rows.length).toBeGreaterThan(0);

    const reports = lines(withBad.report).map((l) => JSON.parse(l));
    expect(reports).toHaveLength(good.length + BAD.length); // one per non-blank line
    const rejected = reports.filter((r) => r.status === "rejected");
    const where = lineNumbersOf(dirty);
    expect(rejected.map((r) => [r.line, r.reason])).toEqual(
      BAD.map(([line, code]) => [where.get(Buffer.from(line).toString("latin1")), code]),
    );
    // Reports in input order; the accepted ones exactly those of the clean run.
    expect(reports.map((r) => r.line)).toEqual([...reports.map((r) => r.line)].sort((a, b) => a - b));
    const ok = lines(withBad.report).filter((l) => JSON.parse(l).status === "ok");
    expect(ok).toEqual(lines(without.report));
    expect(ok).toHaveLength(good.length);
  });

  it("names what is wrong in each rejection", async () => {
    const dir = tempDir();
    const { report } = await rowsOf(dir, "dirty", mixed(good, false), "--jobs", "1");
    const details = lines(report)
      .map((l) => JSON.parse(l))
      .filter((r) => r.status === "rejected")
      .map((r) => r.detail);
    expect(details[0]).toBe("not JSON at byte 1: unexpected 'o' where 'null' should be");
    expect(details[1]).toBe(
      `not JSON at byte ${String(BAD[1][0]).length}: cut off: the line ends where ',' or ']' should be`,
    );
    expect(details[2]).toBe("not JSON at byte 20: invalid UTF-8");
    expect(details[3]).toBe("not JSON at byte 24: invalid UTF-8");
    expect(details[4]).toBe('call "c1" (calls[0]): prompt_token_ids[2] is 1.5, not an integer in [0, 2^31-1]');
    expect(details[5]).toBe('call "c1" (calls[0]): prompt_token_ids[2] is -1, not an integer in [0, 2^31-1]');
    expect(details[6]).toBe('call "c1" (calls[0]): prompt_token_ids[2] is 2147483648, not an integer in [0, 2^31-1]');
    expect(details[7]).toBe('call "c1" (calls[0]): prompt_token_ids[2] is "7", not an integer in [0, 2^31-1]');
    expect(details[8]).toBe('call "c1" (calls[0]): prompt_token_ids[2] is null, not an integer in [0, 2^31-1]');
    expect(details[9]).toBe('call "c1" (calls[0]): generation_token_ids[1] is 5.5, not an integer in [0, 2^31-1]');
  });

  it(
    "gives the same bytes on the JSON.parse reader, " + "the plain rowToJson writer and the TypeScript backend",
    async () => {
      const dir = tempDir();
      const content = mixed(good, false);
      const fast = await rowsOf(dir, "fast", content, "--jobs", "1");
      const parsed = await rowsOf(dir, "parsed", content, "--jobs", "1", "--reader", "json");
      const plain = await rowsOf(dir, "plain", content, "--jobs", "1", "--reader", "json", "--writer", "js");
      const ts = await rowsOf(dir, "ts", content, "--jobs", "1", "--backend", "ts");
      expect(parsed.rows).toBe(fast.rows);
      expect(parsed.report).toBe(fast.report);
      expect(plain.rows).toBe(fast.rows);
      expect(plain.report).toBe(fast.report);
      expect(ts.rows).toBe(fast.rows);
      expect(ts.report).toBe(fast.report);
    },
  );

  it(
    "quotes a rejected value holding token arrays as JSON.parse read it " + "(the scanner's typed arrays never show)",
    async () => {
      const dir = tempDir();
      const quoted = [
        '{"rollout_id":"r1","reward":1,"calls":[{"id":{"prompt_token_ids":[7]},"prompt_token_ids":[1],' +
          '"generation_token_ids":[2],"generation_log_probs":[-0.5]}]}',
        '{"rollout_id":"r2","reward":1,"calls":[[{"generation_log_probs":[-0.5]}]]}',
        '{"rollout_id":"r3","reward":1,"calls":[{"id":"c","prompt_token_ids":[1],' +
          '"generation_token_ids":[2,{"generation_token_ids":[3]}],"generation_log_probs":[-0.5,-0.5]}]}',
        '{"rollout_id":"r4","reward":1,"calls":[{"id":"c","prompt_token_ids":[1],"generation_token_ids":[2],' +
          '"generation_log_probs":[{"generation_log_probs":[0.1000000001]}]}]}',
        '{"rollout_id":"r5","reward":{"prompt_token_ids":[]},"calls":[]}',
      ];
      const content = [good[0], ...quoted, good[1]].join("\n") + "\n";
      const parsed = await rowsOf(dir, "parsed", content, "--jobs", "1", "--reader", "json");
      for (const jobs of ["1", "2"]) {
        const fast = await rowsOf(dir, `fast${jobs}`, content, "--jobs", jobs, "--batch-bytes", "4096");
        expect(fast.report).toBe(parsed.report);
        expect(fast.rows).toBe(parsed.rows);
      }
      const details = lines(parsed.report).map((l) => JSON.parse(l).detail);
      expect(details[1]).toBe('calls[0]: id must be a non-empty string, got {"prompt_token_ids":[7]}');
      // A line too big to read twice (over 1 MB) quotes the scanner's arrays as lists too.
      const big =
        `{"rollout_id":"big","reward":1,"calls":[{"id":{"prompt_token_ids":[7]},` +
        `"prompt_token_ids":[${Array.from({ length: 300_000 }, (_, i) => i).join(",")}],` +
        `"generation_token_ids":[2],"generation_log_probs":[-0.5]}]}`;
      expect(big.length).toBeGreaterThan(1 << 20);
      const bigFast = await rowsOf(dir, "big", big + "\n", "--jobs", "1");
      expect(JSON.parse(bigFast.report).detail).toBe(
        'calls[0]: id must be a non-empty string, got {"prompt_token_ids":[7]}',
      );
      // ... and its logprobs as float32, as README says (reading it again would undo bounded memory).
      const bigFloat = big.replace('{"prompt_token_ids":[7]}', '{"generation_log_probs":[0.30000000000000004]}');
      const bigFloatFast = await rowsOf(dir, "bigFloat", bigFloat + "\n", "--jobs", "1");
      expect(JSON.parse(bigFloatFast.report).detail).toBe(
        'calls[0]: id must be a non-empty string, got {"generation_log_probs":[0.3]}',
      );
      expect(details[4]).toBe(
        'call "c" (calls[0]): generation_log_probs[0] = {"generation_log_probs":[0.1000000001]} is not a finite number',
      );
    },
  );

  it(
    "reads a long line in parts whole, " +
      "even where a part is all blanks (inner spaces, a CR left alone by the split)",
    async () => {
      const dir = tempDir();
      const [head, tail] = [good[0].slice(0, good[0].indexOf('"calls"')), good[0].slice(good[0].indexOf('"calls"'))];
      const padded = (length: number) => head + " ".repeat(length - head.length - tail.length) + tail;
      // 10,000 inner spaces span whole 4 KB parts; lines of 8192 ± 2 bytes + CRLF put the CR at every
      // place around a part's end.
      const longLines = [padded(10_000 + good[0].length), ...[-2, -1, 0, 1, 2].map((d) => padded(8192 + d))];
      const content = longLines.map((line) => line + "\r\n").join("") + good[1] + "\n";
      const parsed = await rowsOf(dir, "parsed", content, "--jobs", "1", "--reader", "json");
      expect(lines(parsed.report)).toHaveLength(longLines.length + 1);
      expect(lines(parsed.report).every((line) => JSON.parse(line).status === "ok")).toBe(true);
      for (const jobs of ["1", "2"]) {
        const fast = await rowsOf(dir, `fast${jobs}`, content, "--jobs", jobs, "--batch-bytes", "4096");
        expect(fast.report).toBe(parsed.report);
        expect(fast.rows).toBe(parsed.rows);
      }
    },
  );

  it("rejects a cut-off last line (no newline) with its line number", async () => {
    const dir = tempDir();
    const full = good.slice(0, 3).join("\n") + "\n";
    const cut = full + good[3].slice(0, good[3].length >> 1);
    const whole = await rowsOf(dir, "whole", full, "--jobs", "1");
    const truncated = await rowsOf(dir, "cut", cut, "--jobs", "1");
    expect(truncated.rows).toBe(whole.rows);
    const reports = lines(truncated.report).map((l) => JSON.parse(l));
    expect(reports.slice(0, 3).map((r) => JSON.stringify(r))).toEqual(
      lines(whole.report).map((l) => JSON.stringify(JSON.parse(l))),
    );
    expect(reports[3]).toMatchObject({ status: "rejected", reason: "malformed_json", line: 4, rollout_id: null });
    // A last line that is whole but has no newline is fine.
    const noFinalNewline = await rowsOf(dir, "nonl", full.slice(0, -1), "--jobs", "1");
    expect(noFinalNewline.rows).toBe(whole.rows);
    expect(noFinalNewline.report).toBe(whole.report);
  });

  it("lets __proto__ and constructor keys change nothing outside the record", async () => {
    const dir = tempDir();
    const base = JSON.parse(read(LOGIN_BUG));
    const plain = JSON.stringify(base);
    // The same rollout with hostile keys at the top, in the calls and in the agents.
    const hostile = plain
      .replace(
        '{"rollout_id"',
        '{"__proto__":{"reward":5,"calls":[]},"constructor":{"prototype":{"kept":false}},"rollout_id"',
      )
      .replaceAll('{"id":"C', '{"__proto__":{"kept":false,"agent":"nobody"},"constructor":"x","id":"C');
    expect(hostile).not.toBe(plain);
    const a = await rowsOf(dir, "plain", plain + "\n", "--jobs", "1");
    const b = await rowsOf(dir, "hostile", hostile + "\n", "--jobs", "1");
    expect(b.rows).toBe(a.rows);
    expect(b.report).toBe(a.report);
    expect(JSON.parse(lines(b.report)[0]).status).toBe("ok");
    expect(({} as Record<string, unknown>).kept).toBeUndefined();
    expect(({} as Record<string, unknown>).reward).toBeUndefined();
  });
});

describe("rows: inputs and options", () => {
  it("reads NeMo Gym rollout rows (five one-row rollouts)", async () => {
    const dir = tempDir();
    const out = join(dir, "rows.jsonl");
    const report = join(dir, "report.jsonl");
    const run = await cli(
      "rows",
      COMPETITIVE_CODING,
      "-o",
      out,
      "--report",
      report,
      "--from",
      "gym-rollout",
      "--jobs",
      "1",
    );
    expect(run.code).toBe(0);
    const reports = lines(read(report)).map((l) => JSON.parse(l));
    expect(reports.map((r) => [r.status, r.rows, r.line])).toEqual([1, 2, 3, 4, 5].map((line) => ["ok", 1, line]));
    expect(lines(read(out))).toHaveLength(5);
    // auto detection gives the same bytes
    const auto = join(dir, "auto.jsonl");
    expect((await cli("rows", COMPETITIVE_CODING, "-o", auto, "--report", join(dir, "r2"), "--jobs", "1")).code).toBe(
      0,
    );
    expect(read(auto)).toBe(read(out));
  });

  it("reads the vLLM round trip as a pretty-printed .json file and as a JSONL line alike", async () => {
    const dir = tempDir();
    const response = JSON.parse(read(VLLM_ROUND_TRIP)).input;
    const pretty = join(dir, "response.json");
    writeFileSync(pretty, JSON.stringify(response, null, 2));
    const jsonl = join(dir, "response.jsonl");
    writeFileSync(jsonl, JSON.stringify(response) + "\n");
    const a = await cli(
      "rows",
      pretty,
      "-o",
      join(dir, "a.rows.jsonl"),
      "--report",
      join(dir, "a.report"),
      "--jobs",
      "1",
    );
    const b = await cli(
      "rows",
      jsonl,
      "-o",
      join(dir, "b.rows.jsonl"),
      "--report",
      join(dir, "b.report"),
      "--jobs",
      "1",
    );
    expect([a.code, b.code]).toEqual([0, 0]);
    expect(read(join(dir, "a.rows.jsonl"))).toBe(read(join(dir, "b.rows.jsonl")));
    const report = JSON.parse(lines(read(join(dir, "b.report")))[0]);
    expect(report).toMatchObject({
      status: "ok",
      roots: 2,
      rows: 2,
      trained_tokens: 702,
      captured_tokens: 702,
      line: 1,
    });
    expect(JSON.parse(lines(read(join(dir, "a.report")))[0])).toMatchObject({
      status: "ok",
      roots: 2,
      rows: 2,
      trained_tokens: 702,
    });
  });

  it("reads gym-observed captures with --tokens", async () => {
    const dir = tempDir();
    const out = join(dir, "rows.jsonl");
    const run = await cli(
      "rows",
      OBSERVED_ROWS,
      "--tokens",
      OBSERVED_DIR,
      "-o",
      out,
      "--report",
      join(dir, "r"),
      "--jobs",
      "1",
    );
    expect(run.code).toBe(0);
    const report = JSON.parse(lines(read(join(dir, "r")))[0]);
    expect(report).toMatchObject({ rollout_id: "7-2", status: "ok", rows: 4, roots: 3, line: 1 });
    expect(report.diagnostics.map((d: { code: string }) => d.code)).toContain("unowned_call");
    expect(report.trained_tokens).toBe(report.captured_tokens);
    expect(lines(read(out))).toHaveLength(4);
  });

  it("keeps .json and JSONL inputs in order and writes the summary and rejections on stderr", async () => {
    const dir = tempDir();
    const jsonl = join(dir, "in.jsonl");
    writeFileSync(jsonl, goodLines(2).join("\n") + "\nnope\n");
    const run = await cli("rows", LOGIN_BUG, jsonl, "--jobs", "1", "--mask-format", "ints");
    expect(run.code).toBe(0);
    const rows = lines(run.stdout).map((l) => JSON.parse(l));
    expect(rows[0].rollout_id).toBe("login-bug");
    // Row bytes as the library's own rowToJson writes them.
    const cf = await init();
    const plan = cf.plan(JSON.parse(read(LOGIN_BUG)), {});
    expect(lines(run.stdout).slice(0, plan.rows.length)).toEqual(plan.rows.map((row) => rowToJson(row, "ints")));
    plan.release();
    expect(rows.every((r) => Array.isArray(r.loss_mask) && r.loss_mask.length === r.num_tokens)).toBe(true);
    expect(lines(run.stderr)).toEqual([
      `${jsonl}:4: rejected (malformed_json): not JSON at byte 1: unexpected 'o' where 'null' should be`,
      `callforest: 5 rollouts (4 ok, 1 rejected), ${rows.length} rows`,
    ]);
  });

  it("gives a .json input's reports the line each rollout starts on (issue 39)", async () => {
    const dir = tempDir();
    const rollouts = goodLines(3).map((line) => JSON.parse(line));
    const pretty = join(dir, "pretty.json");
    writeFileSync(pretty, JSON.stringify(rollouts, null, 2));
    const starts = JSON.stringify(rollouts, null, 2)
      .split("\n")
      .flatMap((text, i) => (text === "  {" ? [i + 1] : []));
    expect(starts).toHaveLength(rollouts.length);
    const report = join(dir, "report.jsonl");
    let run = await cli("rows", pretty, "-o", join(dir, "rows.jsonl"), "--report", report);
    expect(run.code).toBe(0);
    const linesOf = () =>
      lines(read(report))
        .map((line) => JSON.parse(line))
        .filter((r) => r.run === undefined)
        .map((r) => r.line);
    expect(linesOf()).toEqual(starts);
    run = await cli("rows", LOGIN_BUG, "-o", join(dir, "rows.jsonl"), "--report", report);
    expect([run.code, linesOf()]).toEqual([0, [1]]);
  });

  it("counts in the summary read right for one", async () => {
    const dir = tempDir();
    const one = join(dir, "one.jsonl");
    writeFileSync(
      one,
      JSON.stringify({
        rollout_id: "r",
        reward: 0,
        calls: [{ id: "c", prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-1] }],
      }) + "\n",
    );
    const run = await cli("rows", one, "-o", join(dir, "rows.jsonl"), "--jobs", "1");
    expect([run.code, run.stderr]).toEqual([0, "callforest: 1 rollout (1 ok, 0 rejected), 1 row\n"]);
  });

  it("exits 1 with --strict when a rollout was rejected, and --quiet drops the summary", async () => {
    const dir = tempDir();
    const jsonl = join(dir, "in.jsonl");
    writeFileSync(jsonl, goodLines(1).join("\n") + "\n[1]\n");
    const strict = await cli("rows", jsonl, "--strict", "--quiet", "-o", join(dir, "o"), "--jobs", "1");
    expect(strict.code).toBe(1);
    expect(lines(strict.stderr)).toEqual([
      // the importer's own code, as convert says it
      `${jsonl}:3: rejected (invalid_rollout, unknown_format): the value is an array, expected a JSON object`,
      "callforest: 1 of 3 rollouts rejected",
    ]);
    // Every rollout rejected is no exception.
    writeFileSync(jsonl, "[1]\n");
    const all = await cli("rows", jsonl, "--strict", "--quiet", "-o", join(dir, "o"), "--jobs", "1");
    expect([all.code, lines(all.stderr).at(-1)]).toEqual([1, "callforest: 1 of 1 rollout rejected"]);
  });

  it("rejects a .json input too large to read as one string, and goes on", async () => {
    const dir = tempDir();
    const big = join(dir, "big.json");
    writeFileSync(big, "");
    truncateSync(big, 300 << 20); // sparse: only its size is looked at
    const run = await cli(
      "rows",
      big,
      LOGIN_BUG,
      "-o",
      join(dir, "rows"),
      "--report",
      join(dir, "report"),
      "--jobs",
      "1",
    );
    expect(run.code).toBe(0);
    const reports = lines(read(join(dir, "report"))).map((l) => JSON.parse(l));
    expect(reports.map((r) => [r.status, r.reason])).toEqual([
      ["rejected", "rollout_too_large"],
      ["ok", undefined],
    ]);
    expect(reports[0].detail).toBe(
      `${300 << 20} bytes of one JSON value is more than JSON.parse takes (256 MB); ` +
        `write it as JSONL, one rollout a line`,
    );
    expect(lines(read(join(dir, "rows")))).toHaveLength(5);
  });

  it("refuses bad arguments with one line and exit 2", async () => {
    for (const [argv, message] of [
      [["--jobs", "0"], "callforest: --jobs must be a positive integer, got '0'"],
      [["--jobs", "two"], "callforest: --jobs must be a positive integer, got 'two'"],
      [
        ["--jobs", String(4 * availableParallelism() + 1)],
        `callforest: --jobs must be at most ${4 * availableParallelism()}, got '${4 * availableParallelism() + 1}'`,
      ],
      ...["1e2", "0x10", "+3", " 3", "2.0"].map(
        (jobs) => [["--jobs", jobs], `callforest: --jobs must be a positive integer, got '${jobs}'`] as const,
      ),
      [["--batch-bytes", "5000000000"], "callforest: --batch-bytes must be at most 1073741824, got '5000000000'"],
      [["--mask-format", "bytes"], "callforest: unknown --mask-format 'bytes': expected bits or ints"],
      [["--backend", "gpu"], "callforest: unknown --backend 'gpu': expected wasm or ts"],
      [
        ["--from", "csv"],
        "callforest: unknown --from format 'csv': expected callforest, gym-rollout, gym-observed, gym-compaction, atif, auto",
      ],
      [["--bogus"], "callforest: unknown option '--bogus'"], // commander's own errors read alike
    ] as const) {
      const run = await cli("rows", LOGIN_BUG, ...argv);
      expect([run.code, run.stderr, run.stdout]).toEqual([2, message + "\n", ""]);
    }
    const missing = await cli("rows", "/nonexistent/in.jsonl");
    expect([missing.code, missing.stderr]).toEqual([
      2,
      "callforest: cannot read /nonexistent/in.jsonl: no such file\n",
    ]);
  });
});
