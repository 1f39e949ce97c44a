import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { init } from "../../src/index.js";
import { detectFormat, parseFrom, toCanonical, FROM_OPTIONS } from "../../src/formats/index.js";
import { reportOfImportRejection, withImport } from "../../src/plan-imported.js";
import { rolloutToJson } from "../../src/ingest/read.js";
import { COMPETITIVE_CODING, OBSERVED_ROWS, VLLM_ROUND_TRIP } from "../support/fixtures.js";
import { clone, readJson, readJsonl } from "./helpers.js";

const loginBug = JSON.parse(readFileSync(new URL("../../examples/login-bug.json", import.meta.url), "utf8"));
const gymRow = readJsonl(COMPETITIVE_CODING)[0];
const bareResponse = readJson(VLLM_ROUND_TRIP).input;
const observedRow = readJsonl(OBSERVED_ROWS)[0];

describe("auto detection", () => {
  it("tells the four shapes apart", () => {
    expect(detectFormat(loginBug)).toBe("callforest");
    expect(detectFormat(gymRow)).toBe("gym-rollout");
    expect(detectFormat(bareResponse)).toBe("gym-rollout");
    // An observed row also has a response: the capture wins.
    expect(observedRow.response.object).toBe("response");
    expect(detectFormat(observedRow)).toBe("gym-observed");
  });

  it("rejects what matches nothing with a message listing what was looked for", () => {
    const result = toCanonical(readJson(VLLM_ROUND_TRIP)); // the test file wraps the response in `input`
    expect(result).toEqual({
      ok: false,
      format: null,
      reason: "invalid_rollout",
      code: "unknown_format",
      detail:
        'not a known format: no calls[] (callforest), no response or "object": "response" (gym-rollout), ' +
        "no ng_agent_observations.records[] (gym-observed), no steps[] (atif)",
      rolloutId: null,
    });
  });

  it("reads anything with a calls field as canonical, however broken, even beside a response", async () => {
    const tail =
      'no response or "object": "response" (gym-rollout), no ng_agent_observations.records[] (gym-observed), no steps[] (atif)';
    expect(detectFormat({ ...gymRow, calls: null })).toBe("gym-rollout"); // calls: null is no calls
    expect(toCanonical({ rollout_id: "r", reward: 0 })).toMatchObject({
      ok: false,
      code: "unknown_format",
      detail: `not a known format: no calls[] (callforest), ${tail}`,
    });
    const cf = await init();
    for (const value of [
      { rollout_id: "r", reward: 0, calls: {} },
      { rollout_id: "r", reward: 1, calls: "zz", response: gymRow.response }, // not silently the Gym row
      { reward: 1, calls: loginBug.calls, response: gymRow.response }, // no rollout_id
    ]) {
      expect(detectFormat(value)).toBe("callforest");
      const read = toCanonical(value);
      expect(read).toMatchObject({ ok: true, format: "callforest" });
      expect(cf.plan(read.ok ? read.rollout : null).report).toMatchObject({
        status: "rejected",
        reason: "invalid_rollout",
      });
    }
  });

  for (const [value, shown] of [
    [[1, 2], "an array"],
    [null, "null"],
    [42, "42"],
    ["{}", '"{}"'],
  ] as const) {
    it(`rejects a value that is ${shown}, not an object`, () => {
      expect(toCanonical(value)).toMatchObject({
        ok: false,
        code: "unknown_format",
        detail: `the value is ${shown}, expected a JSON object`,
      });
      expect(toCanonical(value, "gym-rollout")).toMatchObject({
        ok: false,
        format: "gym-rollout",
        code: "invalid_value",
        detail: `the value is ${shown}, expected a JSON object`,
      });
    });
  }

  it("does what --from says even when another format would match", async () => {
    // Read as canonical, a Gym row has no rollout_id: the planner rejects it with SPEC's code.
    const asCanonical = toCanonical(gymRow, "callforest");
    expect(asCanonical).toMatchObject({ ok: true, format: "callforest" });
    const cf = await init();
    expect(cf.plan(asCanonical.ok ? asCanonical.rollout : null).report).toMatchObject({
      status: "rejected",
      reason: "invalid_rollout",
      detail: "rollout_id is missing (it must be a non-empty string)",
    });
    expect(toCanonical(loginBug, "gym-rollout")).toMatchObject({
      ok: false,
      format: "gym-rollout",
      detail: "gym-rollout: response is missing, expected an object",
      rolloutId: "login-bug",
    });
  });

  it("parses --from values", () => {
    expect(FROM_OPTIONS).toEqual(["callforest", "gym-rollout", "gym-observed", "gym-compaction", "atif", "auto"]);
    for (const name of FROM_OPTIONS) expect(parseFrom(name)).toBe(name);
    expect(parseFrom("gym")).toBeNull();
    expect(parseFrom("")).toBeNull();
  });

  it("ignores own keys like __proto__ and constructor and never reads inherited ones", () => {
    const value = JSON.parse('{"__proto__": {"calls": []}, "constructor": 1, "rollout_id": "x", "reward": 0}');
    expect(detectFormat(value)).toBeNull();
    expect(({} as Record<string, unknown>).calls).toBeUndefined();
  });
});

describe("callforest pass-through", () => {
  it("returns the very same object, and it plans to SPEC's worked example", async () => {
    const result = toCanonical(loginBug);
    expect(result.ok && result.rollout).toBe(loginBug);
    expect(result.ok && result.diagnostics).toEqual([]);
    const cf = await init();
    const plan = cf.plan(loginBug);
    expect([plan.report.status, plan.report.rows, plan.report.roots]).toEqual(["ok", 5, 4]);
    plan.release();
  });

  it("leaves every check to the planner, so the CLI and the API report a bad rollout alike", async () => {
    const cf = await init();
    const noReward = clone(loginBug);
    noReward.reward = null;
    const noCalls = clone(loginBug);
    delete noCalls.calls;
    for (const bad of [noReward, noCalls]) {
      const result = toCanonical(bad, "callforest");
      expect(result.ok && result.rollout).toBe(bad);
      const report = cf.plan(bad).report;
      expect(report.status).toBe("rejected");
      expect(report.reason).toBe("invalid_rollout");
    }
    expect(cf.plan(noReward).report).toMatchObject({ calls: 12, detail: "reward must be a finite number, got null" });
  });

  it("reads back the diagnostics convert wrote", () => {
    const diagnostics = [
      { code: "unowned_call", call: "c9", detail: "t.tokens.jsonl:3: no agent_invocation lists it" },
      { code: "subagent_parent_unavailable", call: null },
    ];
    const text = rolloutToJson(loginBug, diagnostics);
    const back = toCanonical(JSON.parse(text), "callforest");
    expect(back.ok && back.diagnostics).toEqual(diagnostics);
    expect(back.ok && back.rollout.calls).toEqual(loginBug.calls);
  });
});

describe("rolloutToJson", () => {
  it("writes typed arrays as JSON arrays, float32 logprobs in shortest exact form", () => {
    const text = rolloutToJson({
      rollout_id: "t",
      reward: 1,
      calls: [
        {
          id: "a",
          prompt_token_ids: Int32Array.of(1, 2147483647),
          generation_token_ids: Int32Array.of(3),
          generation_log_probs: Float32Array.of(-0.1),
        },
      ],
    });
    expect(text).toBe(
      '{"rollout_id":"t","reward":1,"calls":[{"id":"a","prompt_token_ids":[1,2147483647],' +
        '"generation_token_ids":[3],"generation_log_probs":[-0.1]}]}',
    );
    expect(Math.fround(JSON.parse(text).calls[0].generation_log_probs[0])).toBe(Math.fround(-0.1));
  });
});

describe("reports for the rows command", () => {
  it("reportOfImportRejection carries reason, detail, line and the known rollout id", () => {
    const bad = clone(gymRow);
    delete bad.response.output;
    const result = toCanonical(bad);
    if (result.ok) throw new Error("expected a rejection");
    expect(reportOfImportRejection(result, 4)).toEqual({
      rollout_id: "0-1",
      status: "rejected",
      reason: "invalid_rollout",
      detail: "gym-rollout: response.output is missing, expected an array",
      line: 4,
      calls: 0,
      eligible: 0,
      roots: 0,
      leaves: 0,
      rows: 0,
      captured_tokens: 0,
      trained_tokens: 0,
      row_tokens: 0,
      unique_tokens: 0,
      diagnostics: [],
    });
  });

  it("withImport puts import notes before the core's own", async () => {
    const cf = await init();
    const rollout = clone(loginBug);
    rollout.calls[0].generation_token_ids = [];
    rollout.calls[0].generation_log_probs = [];
    const plan = cf.plan(rollout);
    const report = withImport(plan.report, { diagnostics: [{ code: "unowned_call", call: "x" }] });
    expect(report.diagnostics.map((d) => d.code)).toEqual(["unowned_call", "empty_generation"]);
    expect(plan.report.diagnostics.map((d) => d.code)).toEqual(["empty_generation"]);
    plan.release();
  });

  it("withImport names where a rejected call's tokens were read, when the import knows", async () => {
    const cf = await init();
    const rollout = clone(loginBug);
    rollout.calls[4].generation_log_probs = [-1];
    const plan = cf.plan(rollout);
    const sources = new Map([["C5", "tokens/r.tokens.jsonl:12"]]);
    expect(withImport(plan.report, { diagnostics: [], sources }).detail).toBe(
      `${plan.report.detail} (token entry tokens/r.tokens.jsonl:12)`,
    );
    expect(withImport(plan.report, { diagnostics: [], sources: new Map() }).detail).toBe(plan.report.detail);
    plan.release();
  });
});
