import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { init, type Callforest } from "../../src/index.js";
import { toCanonical, type Converted, type TokenSource } from "../../src/formats/index.js";
import { tokenDirectory } from "../../src/files/tokens-dir.js";
import { OBSERVED_DIR, OBSERVED_ROWS, OBSERVED_TOKENS } from "../support/fixtures.js";
import { clone, readJsonl } from "./helpers.js";

let cf: Callforest;
beforeAll(async () => {
  cf = await init();
});

const row = readJsonl(OBSERVED_ROWS)[0];
const entries = readJsonl(OBSERVED_TOKENS);
const tokens = tokenDirectory(OBSERVED_DIR);
const FILE = "mem/7-2.tokens.jsonl";

/** Token entries from memory (file lines 1..n), as a fast reader might hand them over. */
function memoryTokens(values: unknown[], file = FILE): TokenSource {
  return {
    describe: (id) => `mem/${id}.tokens.jsonl`,
    load: (id) => (id === "7-2" ? { file, lines: values.map((value, i) => ({ line: i + 1, value })) } : null),
  };
}

function accepted(result: ReturnType<typeof toCanonical>): Converted {
  if (!result.ok) throw new Error(`rejected: ${result.code}: ${result.detail}`);
  return result;
}

const LEDGER = [
  "mc-leader-1",
  "mc-bg-1",
  "mc-leader-retry",
  "mc-leader-2",
  "mc-bg-2",
  "mc-fork-1",
  "mc-leader-3-summary",
  "mc-fork-2",
  "mc-leader-4",
  "mc-leader-5",
];

describe("gym-observed fixture (examples/gym-observed/README.md)", () => {
  const result = accepted(toCanonical(row, "auto", { tokens }));
  const { rollout } = result;

  it("is detected as gym-observed and keyed by the Gym indices", () => {
    expect(result.format).toBe("gym-observed");
    expect(rollout.rollout_id).toBe("7-2");
    expect(rollout.reward).toBe(1);
  });

  it("orders calls by created_at, then file order", () => {
    expect(rollout.calls.map((c) => c.id)).toEqual(LEDGER);
  });

  it("gives each call its invocation's agent; the unlisted try is kept: false in an agent of its own", () => {
    const agentOf = Object.fromEntries(rollout.calls.map((c) => [c.id, [c.agent, c.kept ?? true]]));
    expect(agentOf).toEqual({
      "mc-leader-1": ["inv-leader", true],
      "mc-bg-1": ["inv-bg", true],
      "mc-leader-retry": ["unowned", false],
      "mc-leader-2": ["inv-leader", true],
      "mc-bg-2": ["inv-bg", true],
      "mc-fork-1": ["inv-fork", true],
      "mc-leader-3-summary": ["inv-leader", true],
      "mc-fork-2": ["inv-fork", true],
      "mc-leader-4": ["inv-leader", true],
      "mc-leader-5": ["inv-leader", true],
    });
    expect(rollout.agents).toEqual([
      { id: "inv-leader", parent: null },
      { id: "inv-bg", parent: null },
      { id: "inv-fork", parent: "inv-leader" },
      { id: "unowned", parent: null, mode: "unowned" },
    ]);
  });

  it("passes the token entries' arrays through as the same objects", () => {
    const fork = rollout.calls.find((c) => c.id === "mc-fork-1")!;
    const again = accepted(toCanonical(row, "gym-observed", { tokens: memoryTokens(entries) })).rollout;
    const fromMemory = again.calls.find((c) => c.id === "mc-fork-1")!;
    expect(fromMemory.prompt_token_ids).toBe(entries[5].prompt_token_ids);
    expect(fromMemory.generation_log_probs).toBe(entries[5].generation_log_probs);
    expect(Array.from(fork.prompt_token_ids)).toEqual(entries[5].prompt_token_ids);
  });

  it("turns the unlisted entry, the compaction, other records and both gaps lists into diagnostics", () => {
    expect(result.diagnostics).toEqual([
      { code: "unowned_call", call: "mc-leader-retry", detail: `${OBSERVED_TOKENS}:2: no agent_invocation lists it` },
      {
        code: "context_compaction",
        call: "mc-leader-3-summary",
        detail:
          "invocation inv-leader, trigger auto, outcome completed, before_model_call mc-leader-2, " +
          "after_model_call mc-leader-4, tokens 91 -> 39",
      },
      { code: "observation_records", call: null, detail: "tool_call: 3, sandbox: 1" },
      { code: "subagent_parent_unavailable", call: null, detail: "invocation inv-bg" },
      { code: "model_call_ownership_unavailable", call: null, detail: "capture:mc-leader-retry:call_index=2" },
    ]);
  });

  it("plans to the documented forest: 3 roots, 4 leaves, 4 rows, every generated token trained once", () => {
    const plan = cf.plan(rollout);
    try {
      const r = plan.report;
      expect([r.status, r.calls, r.eligible, r.roots, r.leaves, r.rows]).toEqual(["ok", 10, 9, 3, 4, 4]);
      expect([r.captured_tokens, r.trained_tokens, r.row_tokens, r.unique_tokens]).toEqual([60, 60, 308, 243]);
      expect(plan.rows.map((row) => [row.leaf, row.calls, row.trained, row.context, row.numTokens])).toEqual([
        ["mc-bg-2", ["mc-bg-1", "mc-bg-2"], ["mc-bg-1", "mc-bg-2"], [], 51],
        [
          "mc-leader-3-summary",
          ["mc-leader-1", "mc-leader-2", "mc-leader-3-summary"],
          ["mc-leader-1", "mc-leader-2", "mc-leader-3-summary"],
          [],
          91,
        ],
        [
          "mc-fork-2",
          ["mc-leader-1", "mc-leader-2", "mc-fork-1", "mc-fork-2"],
          ["mc-fork-1", "mc-fork-2"],
          ["mc-leader-1", "mc-leader-2"],
          104,
        ],
        ["mc-leader-5", ["mc-leader-4", "mc-leader-5"], ["mc-leader-4", "mc-leader-5"], [], 62],
      ]);
      const roots = plan.forest.filter((c) => c.root).map((c) => c.id);
      expect(roots).toEqual(["mc-leader-1", "mc-bg-1", "mc-leader-4"]);
      expect(plan.forest.find((c) => c.id === "mc-fork-1")!.parent).toBe("mc-leader-2");
      expect(plan.forest.find((c) => c.id === "mc-leader-3-summary")!.parent).toBe("mc-leader-2");
      expect(plan.forest.find((c) => c.id === "mc-leader-retry")!.eligible).toBe(false);
    } finally {
      plan.release();
    }
  });

  it("breaks a created_at tie by file order", () => {
    // Swap the fork's and the summary's lines: same created_at, so the summary now comes first.
    const swapped = [...entries];
    [swapped[5], swapped[6]] = [swapped[6], swapped[5]];
    expect(swapped[5].model_call_id).toBe("mc-leader-3-summary");
    const ids = accepted(toCanonical(row, "gym-observed", { tokens: memoryTokens(swapped) })).rollout.calls.map(
      (c) => c.id,
    );
    expect(ids.slice(5, 7)).toEqual(["mc-leader-3-summary", "mc-fork-1"]);
  });

  it("reads ISO 8601 created_at as well as epoch seconds", () => {
    const iso = entries.map((e) => ({ ...e, created_at: new Date(e.created_at * 1000).toISOString() }));
    const ids = accepted(toCanonical(row, "gym-observed", { tokens: memoryTokens(iso) })).rollout.calls.map(
      (c) => c.id,
    );
    expect(ids).toEqual(LEDGER);
  });

  it("reads ISO 8601 times exactly: microseconds order calls, zones count, and a time needs a zone", () => {
    // Give the first two entries of the file times a microsecond apart, the later one first.
    const stamped = (times: (string | number)[]) =>
      entries.map((e, i) => ({ ...e, created_at: i < times.length ? times[i] : e.created_at }));
    // Both before every other entry (the fixture's first is 2025-11-30T05:00:00.1Z).
    const [first, second] = [entries[0].model_call_id, entries[1].model_call_id];
    const swapped = accepted(
      toCanonical(row, "gym-observed", {
        tokens: memoryTokens(stamped(["2025-11-30T05:00:00.000200Z", "2025-11-30T05:00:00.000100Z"])),
      }),
    );
    expect(swapped.rollout.calls.slice(0, 2).map((c) => c.id)).toEqual([second, first]);
    // The same instant written in another zone is the same time: file order breaks the tie.
    const zoned = accepted(
      toCanonical(row, "gym-observed", {
        tokens: memoryTokens(stamped(["2025-11-30T07:00:00+02:00", "2025-11-30T05:00:00Z"])),
      }),
    );
    expect(zoned.rollout.calls.slice(0, 2).map((c) => c.id)).toEqual([first, second]);
    // A zone west of UTC is behind it: 00:00:00.05-05:00 is 05:00:00.05Z, after 05:00:00.01Z.
    const west = accepted(
      toCanonical(row, "gym-observed", {
        tokens: memoryTokens(stamped(["2025-11-30T00:00:00.05-05:00", "2025-11-30T05:00:00.01Z"])),
      }),
    );
    expect(west.rollout.calls.slice(0, 2).map((c) => c.id)).toEqual([second, first]);
    // Trailing zeros change nothing (.50 and .5 tie: file order), a basic-format zone and a leap second are times.
    for (const [a, b] of [
      ["2025-11-30T05:00:00.50Z", "2025-11-30T05:00:00.5Z"],
      ["2025-11-30T07:00:00+0200", "2025-11-30T05:00:00Z"],
    ]) {
      const tied = accepted(toCanonical(row, "gym-observed", { tokens: memoryTokens(stamped([a, b])) }));
      expect([a, b, ...tied.rollout.calls.slice(0, 2).map((c) => c.id)]).toEqual([a, b, first, second]);
    }
    const leap = accepted(
      toCanonical(row, "gym-observed", {
        tokens: memoryTokens(stamped(["2016-12-31T23:59:60Z", "2016-12-31T23:59:59.5Z"])),
      }),
    );
    expect(leap.rollout.calls.slice(0, 2).map((c) => c.id)).toEqual([second, first]);
    // A number and an ISO time naming the same instant tie (file order decides); digits count as written.
    const mixed = accepted(
      toCanonical(row, "gym-observed", { tokens: memoryTokens(stamped([1764478800.05, "2025-11-30T05:00:00.05Z"])) }),
    );
    expect(mixed.rollout.calls.slice(0, 2).map((c) => c.id)).toEqual([first, second]);
    const close = accepted(
      // biome-ignore lint/correctness/noPrecisionLoss: the digits as written are what is compared
      toCanonical(row, "gym-observed", { tokens: memoryTokens(stamped([1764478800.0999999999, 1764478800.09])) }),
    );
    expect(close.rollout.calls.slice(0, 2).map((c) => c.id)).toEqual([second, first]);
    // Just before zero, written in exponent form: after -0.5, not a second early (rounding up).
    const negative = accepted(toCanonical(row, "gym-observed", { tokens: memoryTokens(stamped([-1e-10, -0.5])) }));
    expect(negative.rollout.calls.slice(0, 2).map((c) => c.id)).toEqual([second, first]);
    // Years below 100 are years, not 1900 + year.
    const early = accepted(
      toCanonical(row, "gym-observed", {
        tokens: memoryTokens(stamped(["1999-01-01T00:00:00Z", "0099-01-01T00:00:00Z"])),
      }),
    );
    expect(early.rollout.calls.slice(0, 2).map((c) => c.id)).toEqual([second, first]);
    for (const bad of [
      "2025-11-30T05:00:00",
      "5",
      "2025-13-01T00:00:00Z",
      "2025-02-29T00:00:00Z",
      "2025-11-30T24:00:00Z",
      "2025-11-30T05:60:00Z",
      "2025-11-30T05:00:61Z",
      "yesterday",
    ]) {
      const result = toCanonical(row, "gym-observed", { tokens: memoryTokens(stamped([bad])) });
      expect(result.ok ? "accepted" : result.detail).toMatch(
        /created_at is .* expected a number or an ISO 8601 time with a zone$/,
      );
    }
  });

  it("maps a parent with no invocation record to null, with a diagnostic", () => {
    const value = clone(row);
    value.ng_agent_observations.records[1].parent_invocation_id = "inv-gone";
    const converted = accepted(toCanonical(value, "gym-observed", { tokens }));
    expect(converted.rollout.agents![1]).toEqual({ id: "inv-bg", parent: null });
    expect(converted.diagnostics).toContainEqual({
      code: "agent_parent_missing",
      call: null,
      detail:
        "ng_agent_observations.records[1]: invocation inv-bg names parent inv-gone, " +
        "which has no agent_invocation record",
    });
  });

  it("adds no unowned agent when every entry is listed", () => {
    const listed = entries.filter((e) => e.model_call_id !== "mc-leader-retry");
    const converted = accepted(toCanonical(row, "gym-observed", { tokens: memoryTokens(listed) }));
    expect(converted.rollout.agents!.map((a) => a.id)).toEqual(["inv-leader", "inv-bg", "inv-fork"]);
    expect(converted.diagnostics.map((d) => d.code)).not.toContain("unowned_call");
  });
});

describe("gym-observed rejections: one line naming the call and the file:line", () => {
  type Case = [
    name: string,
    breakRow: (v: any) => void,
    breakEntries: (e: any[]) => void,
    code: string,
    detail: string,
    reason?: string,
  ];
  const refWhere = "ng_agent_observations.records[0].model_calls";
  const cases: Case[] = [
    [
      "unknown model_call_id",
      (v) => (v.ng_agent_observations.records[0].model_calls[1] = { model_call_id: "mc-nowhere" }),
      () => {},
      "unknown_model_call",
      `${refWhere}[1] (invocation "inv-leader"): model_call_id "mc-nowhere" ` +
        `is in neither ng_model_call_capture.calls nor ${FILE}`,
    ],
    [
      "an id with a newline stays on one line (quoted, as JSON)",
      (v) => (v.ng_agent_observations.records[0].model_calls[1] = { model_call_id: "mc-x\nfake.jsonl:9: rejected" }),
      () => {},
      "unknown_model_call",
      `${refWhere}[1] (invocation "inv-leader"): model_call_id "mc-x\\nfake.jsonl:9: rejected" ` +
        `is in neither ng_model_call_capture.calls nor ${FILE}`,
    ],
    [
      "unknown response_id",
      (v) => (v.ng_agent_observations.records[0].model_calls[2].response_id = "resp_nowhere"),
      () => {},
      "unknown_model_call",
      `${refWhere}[2] (invocation "inv-leader"): response_id "resp_nowhere" ` +
        `(model_ref "responses_api_models/policy_model") matches no ng_model_call_capture.calls entry`,
    ],
    [
      "response_id under another model_ref",
      (v) =>
        (v.ng_agent_observations.records[0].model_calls[2].model_ref = { type: "responses_api_models", name: "judge" }),
      () => {},
      "unknown_model_call",
      `${refWhere}[2] (invocation "inv-leader"): response_id "resp_leader_3_summary" ` +
        `(model_ref "responses_api_models/judge") matches no ng_model_call_capture.calls entry`,
    ],
    [
      "model_ref whose type is not a string",
      (v) =>
        (v.ng_agent_observations.records[0].model_calls[2].model_ref = {
          type: { nested: true },
          name: "policy_model",
        }),
      () => {},
      "missing_field",
      `${refWhere}[2] (invocation "inv-leader"): model_ref is an object, expected a name or { type, name } strings`,
    ],
    [
      "ambiguous response_id",
      (v) => (v.ng_model_call_capture.calls[7].response_id = "resp_leader_3_summary"),
      () => {},
      "ambiguous_model_call",
      `${refWhere}[2] (invocation "inv-leader"): response_id "resp_leader_3_summary" ` +
        `(model_ref "responses_api_models/policy_model") matches ng_model_call_capture.calls[6, 7]`,
    ],
    [
      "ref with neither key",
      (v) =>
        (v.ng_agent_observations.records[0].model_calls[0] = {
          model_ref: { type: "responses_api_models", name: "policy_model" },
        }),
      () => {},
      "missing_field",
      `${refWhere}[0] (invocation "inv-leader"): needs model_call_id, or model_ref and response_id`,
    ],
    [
      "listed call without a token entry",
      () => {},
      (e) => e.splice(4, 1), // mc-bg-2 (captured, listed, but no tokens)
      "missing_token_entry",
      `ng_agent_observations.records[1].model_calls[1] (invocation "inv-bg"): ` +
        `model call "mc-bg-2" has no entry in ${FILE}`,
    ],
    [
      "call listed by two invocations",
      (v) => v.ng_agent_observations.records[2].model_calls.push({ model_call_id: "mc-leader-2" }),
      () => {},
      "duplicate_model_call",
      `ng_agent_observations.records[2].model_calls[2] (invocation "inv-fork"): ` +
        `model call "mc-leader-2" is already listed at ${refWhere}[1] (invocation "inv-leader")`,
    ],
    [
      "two invocation records with one id",
      (v) => (v.ng_agent_observations.records[2].invocation_id = "inv-bg"),
      () => {},
      "duplicate_invocation",
      'ng_agent_observations.records[2]: invocation "inv-bg" is already recorded at ng_agent_observations.records[1]',
    ],
    [
      "invocation without an id",
      (v) => delete v.ng_agent_observations.records[1].invocation_id,
      () => {},
      "missing_field",
      "ng_agent_observations.records[1].invocation_id is missing, expected a non-empty string",
    ],
    [
      "model_calls not a list",
      (v) => (v.ng_agent_observations.records[2].model_calls = { model_call_id: "mc-fork-1" }),
      () => {},
      "missing_field",
      "ng_agent_observations.records[2].model_calls is an object, expected an array",
    ],
    [
      "records missing",
      (v) => (v.ng_agent_observations = { source: "x" }),
      () => {},
      "missing_field",
      "ng_agent_observations.records is missing, expected an array",
    ],
    [
      "reward missing",
      (v) => delete v.reward,
      () => {},
      "missing_field",
      "reward is missing, expected a finite number",
    ],
    [
      "token entry without model_call_id",
      () => {},
      (e) => delete e[3].model_call_id,
      "missing_field",
      `${FILE}:4: model_call_id is missing, expected a non-empty string`,
    ],
    [
      "token entry without generation_token_ids",
      () => {},
      (e) => delete e[3].generation_token_ids,
      "missing_field",
      `${FILE}:4 (call "mc-bg-1"): generation_token_ids is missing, expected an array`,
    ],
    [
      "token entry without created_at",
      () => {},
      (e) => (e[6].created_at = null),
      "missing_field",
      `${FILE}:7 (call "mc-leader-3-summary"): created_at is null, expected a number or an ISO 8601 time with a zone`,
    ],
    [
      "token entry repeated",
      () => {},
      (e) => e.push({ ...e[0] }),
      "duplicate_call_id",
      `${FILE}:11 (call "mc-leader-1"): model_call_id repeats line 1`,
      "duplicate_call_id",
    ],
    [
      "token entry not an object",
      () => {},
      (e) => (e[9] = [1, 2, 3]),
      "missing_field",
      `${FILE}:10: token entry is an array, expected an object`,
    ],
  ];
  for (const [name, breakRow, breakEntries, code, detail, reason] of cases) {
    it(name, () => {
      const value = clone(row);
      const list = clone(entries);
      breakRow(value);
      breakEntries(list);
      const result = toCanonical(value, "gym-observed", { tokens: memoryTokens(list) });
      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect([result.code, result.reason, result.detail]).toEqual([
        code,
        reason ?? "invalid_rollout",
        `gym-observed: ${detail}`,
      ]);
      expect(result.detail).not.toContain("\n");
      expect(result.rolloutId).toBe("7-2");
    });
  }

  it("a token line that is not JSON names file:line", () => {
    const source: TokenSource = {
      describe: () => FILE,
      load: () => ({
        file: FILE,
        lines: [
          { line: 1, value: entries[0] },
          { line: 2, error: "not JSON (Unexpected end of JSON input)" },
        ],
      }),
    };
    const result = toCanonical(row, "gym-observed", { tokens: source });
    expect(result).toMatchObject({
      ok: false,
      reason: "invalid_rollout",
      code: "malformed_token_entry",
      detail: `gym-observed: ${FILE}:2: not JSON (Unexpected end of JSON input)`,
    });
  });

  it(
    "a token file's line that is not JSON is described as every reader describes it " + "(byte offset, what was found)",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "callforest-tokens-"));
      try {
        const lines = readFileSync(OBSERVED_TOKENS, "utf8").split("\n");
        lines[3] = lines[3].replace(/"created_at":[^,}]+/, '"created_at":NaN');
        writeFileSync(join(dir, "7-2.tokens.jsonl"), lines.join("\n"));
        const result = toCanonical(row, "gym-observed", { tokens: tokenDirectory(dir) });
        expect(result.ok ? "accepted" : result.detail).toMatch(
          /^gym-observed: .*7-2\.tokens\.jsonl:4: not JSON at byte \d+: unexpected 'N' where a value should be$/,
        );
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it("without a token source", () => {
    expect(toCanonical(row, "gym-observed")).toMatchObject({
      ok: false,
      code: "no_token_source",
      detail: 'gym-observed: rollout "7-2" needs token entries: give --tokens DIR',
    });
  });

  it("without a token file for the rollout", () => {
    const value = clone(row);
    value._ng_rollout_index = 3;
    expect(toCanonical(value, "gym-observed", { tokens })).toMatchObject({
      ok: false,
      code: "missing_token_file",
      rolloutId: "7-3",
      detail: `gym-observed: no token entries for rollout "7-3": ${OBSERVED_DIR}/7-3.tokens.jsonl not found`,
    });
  });

  it("a token file that is not UTF-8", () => {
    const dir = mkdtempSync(join(tmpdir(), "callforest-tokens-"));
    try {
      const good = readFileSync(OBSERVED_TOKENS);
      writeFileSync(join(dir, "7-2.tokens.jsonl"), Buffer.concat([good, Buffer.from([0xff, 0x0a])]));
      expect(toCanonical(clone(row), "gym-observed", { tokens: tokenDirectory(dir) })).toMatchObject({
        ok: false,
        code: "unreadable_token_file",
        detail: `gym-observed: ${join(dir, "7-2.tokens.jsonl")} is not UTF-8`,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a token file that starts with a byte order mark reads as without", () => {
    const dir = mkdtempSync(join(tmpdir(), "callforest-tokens-"));
    try {
      writeFileSync(
        join(dir, "7-2.tokens.jsonl"),
        Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), readFileSync(OBSERVED_TOKENS)]),
      );
      const withMark = toCanonical(clone(row), "gym-observed", { tokens: tokenDirectory(dir) });
      expect(withMark.ok && withMark.rollout).toEqual(
        accepted(toCanonical(clone(row), "gym-observed", { tokens })).rollout,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a token file that is a named pipe (or a device) is refused unread, not waited on forever", () => {
    const dir = mkdtempSync(join(tmpdir(), "callforest-tokens-"));
    try {
      execFileSync("mkfifo", [join(dir, "7-2.tokens.jsonl")]); // no writer will ever come
      expect(toCanonical(clone(row), "gym-observed", { tokens: tokenDirectory(dir) })).toMatchObject({
        ok: false,
        code: "unreadable_token_file",
        detail: `gym-observed: cannot read ${join(dir, "7-2.tokens.jsonl")}: not a regular file`,
      });
      rmSync(join(dir, "7-2.tokens.jsonl"));
      symlinkSync("/dev/zero", join(dir, "7-2.tokens.jsonl")); // would never end; and it is outside DIR
      expect(toCanonical(clone(row), "gym-observed", { tokens: tokenDirectory(dir) })).toMatchObject({
        ok: false,
        code: "token_file_outside_dir",
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a token file that is a directory: the same short reason as any unreadable input", () => {
    const dir = mkdtempSync(join(tmpdir(), "callforest-tokens-"));
    try {
      mkdirSync(join(dir, "7-2.tokens.jsonl"));
      expect(toCanonical(clone(row), "gym-observed", { tokens: tokenDirectory(dir) })).toMatchObject({
        ok: false,
        code: "unreadable_token_file",
        detail: `gym-observed: cannot read ${join(dir, "7-2.tokens.jsonl")}: is a directory`,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("takes any number of gaps (more than a call takes arguments) as diagnostics", () => {
    const value = clone(row);
    value.ng_agent_observations.gaps = Array.from({ length: 200_000 }, () => ({ code: "x" }));
    const result = accepted(toCanonical(value, "gym-observed", { tokens }));
    expect(result.diagnostics.filter((d) => d.code === "x")).toHaveLength(200_000);
  });

  it("reads a resumed retry's tokens under Gym's <task>-<rollout>-a<attempt> capture id", () => {
    const asked: string[] = [];
    const anyId: TokenSource = {
      describe: (id) => `mem/${id}.tokens.jsonl`,
      load: (id) => {
        asked.push(id);
        return { file: `mem/${id}.tokens.jsonl`, lines: entries.map((value, i) => ({ line: i + 1, value })) };
      },
    };
    const id = (attempt?: unknown) => {
      const value = clone(row);
      if (attempt !== undefined) value._ng_attempt_index = attempt;
      return accepted(toCanonical(value, "gym-observed", { tokens: anyId })).rollout.rollout_id;
    };
    expect([id(), id(0), id(1), id("4")]).toEqual(["7-2", "7-2", "7-2-a1", "7-2-a4"]);
    expect(asked).toEqual(["7-2", "7-2", "7-2-a1", "7-2-a4"]);
    const bad = clone(row);
    bad._ng_attempt_index = 1.5;
    expect(toCanonical(bad, "gym-observed", { tokens: anyId })).toMatchObject({
      ok: false,
      code: "missing_field",
      detail: "gym-observed: _ng_attempt_index is 1.5, expected a non-negative integer",
    });
  });

  it("a rollout id that would leave the token directory", () => {
    const value = clone(row);
    delete value._ng_task_index;
    value.ng_model_call_capture.rollout_id = "../../etc/passwd";
    expect(toCanonical(value, "gym-observed", { tokens })).toMatchObject({
      ok: false,
      code: "unsafe_rollout_id",
      detail: 'gym-observed: rollout id "../../etc/passwd" cannot name a token file',
    });
  });

  it("gaps and unknown record kinds never reject, even malformed ones", () => {
    const value = clone(row);
    value.ng_agent_observations.gaps.push("not a gap");
    value.ng_agent_observations.records.push({ kind: "future_kind" }, { note: "no kind" });
    value.ng_agent_observations.records[5].model_calls = [{ model_call_id: "mc-unknown" }];
    const converted = accepted(toCanonical(value, "gym-observed", { tokens }));
    expect(converted.diagnostics).toContainEqual({
      code: "observation_records",
      call: null,
      detail: "tool_call: 3, sandbox: 1, future_kind: 1, unknown: 1",
    });
    expect(converted.diagnostics).toContainEqual({
      code: "observation_gap",
      call: null,
      detail: 'ng_agent_observations.gaps[1] is "not a gap"',
    });
    expect(converted.diagnostics).toContainEqual({
      code: "context_compaction",
      call: null,
      detail:
        "invocation inv-leader, trigger auto, outcome completed, before_model_call mc-leader-2, " +
        "after_model_call mc-leader-4, tokens 91 -> 39",
    });
  });
});
