import { beforeAll, describe, expect, it } from "vitest";
import { init, type Callforest } from "../../src/index.js";
import { toCanonical, type Converted } from "../../src/formats/index.js";
import { COMPETITIVE_CODING, VLLM_ROUND_TRIP } from "../support/fixtures.js";
import { clone, readJson, readJsonl } from "./helpers.js";

let cf: Callforest;
beforeAll(async () => {
  cf = await init();
});

function accepted(result: ReturnType<typeof toCanonical>): Converted {
  if (!result.ok) throw new Error(`rejected: ${result.code}: ${result.detail}`);
  return result;
}

describe("gym-rollout: vllm-round-trip.json (a bare Responses object)", () => {
  const response = readJson(VLLM_ROUND_TRIP).input;

  it("gives the two token-carrying output items as calls, in output order, reward 0", () => {
    const result = accepted(toCanonical(response, "gym-rollout"));
    const { rollout } = result;
    expect(rollout.rollout_id).toBe("resp_38e93155c5544510af97737022148055");
    expect(rollout.reward).toBe(0);
    expect(rollout.agents).toBeUndefined();
    expect(rollout.calls.map((c) => c.id)).toEqual([
      "chatcmpl-tool-1777bcf6e1144740a1a73f6988a2b6d8",
      "rs_9bc5a5ef819f4e5da9b4b583febc8697",
    ]);
    expect(rollout.calls.map((c) => [c.prompt_token_ids.length, c.generation_token_ids.length])).toEqual([
      [3088, 495],
      [3637, 207],
    ]);
    expect(result.diagnostics).toEqual([]);
  });

  it("passes token arrays through as the same objects (nothing copied or re-tokenized)", () => {
    const { rollout } = accepted(toCanonical(response, "gym-rollout"));
    expect(rollout.calls[0].prompt_token_ids).toBe(response.output[3].prompt_token_ids);
    expect(rollout.calls[0].generation_token_ids).toBe(response.output[3].generation_token_ids);
    expect(rollout.calls[1].generation_log_probs).toBe(response.output[7].generation_log_probs);
  });

  it(
    "plans to two roots and two rows, " +
      "all 702 generated tokens trained (the second prompt re-rendered the reasoning)",
    () => {
      const { rollout } = accepted(toCanonical(response));
      const plan = cf.plan(rollout);
      try {
        expect(plan.report.status).toBe("ok");
        expect(plan.report.roots).toBe(2);
        expect(plan.report.rows).toBe(2);
        expect(plan.report.captured_tokens).toBe(702);
        expect(plan.report.trained_tokens).toBe(702);
        expect(plan.rows.map((r) => r.numTokens)).toEqual([3088 + 495, 3637 + 207]);
      } finally {
        plan.release();
      }
    },
  );

  it("accepts typed token arrays from a fast reader and hands them on untouched", () => {
    const value = clone(response);
    for (const i of [3, 7]) {
      value.output[i].prompt_token_ids = Int32Array.from(value.output[i].prompt_token_ids);
      value.output[i].generation_token_ids = Int32Array.from(value.output[i].generation_token_ids);
      value.output[i].generation_log_probs = Float32Array.from(value.output[i].generation_log_probs);
    }
    const { rollout } = accepted(toCanonical(value));
    expect(rollout.calls[1].prompt_token_ids).toBe(value.output[7].prompt_token_ids);
    expect(rollout.calls[1].generation_log_probs).toBeInstanceOf(Float32Array);
    const plan = cf.plan(rollout);
    expect(plan.report.trained_tokens).toBe(702);
    plan.release();
  });
});

describe("gym-rollout: competitive-coding-rollouts.jsonl (rollout rows)", () => {
  const rows = readJsonl(COMPETITIVE_CODING);

  it("gives five one-call rollouts with <task>-<rollout> ids and the rows' rewards", () => {
    const rollouts = rows.map((row) => accepted(toCanonical(row)).rollout);
    expect(rollouts.map((r) => r.rollout_id)).toEqual(["0-1", "0-3", "0-4", "0-0", "0-2"]);
    expect(rollouts.map((r) => r.reward)).toEqual(rows.map((row) => row.reward));
    expect(rollouts.map((r) => r.calls.map((c) => c.id))).toEqual(rows.map((row) => [row.response.output[1].id]));
    expect(rollouts.map((r) => r.calls[0].generation_token_ids.length)).toEqual([785, 959, 1038, 964, 1277]);
  });

  it("plans each to one row that trains every generated token", () => {
    for (const row of rows) {
      const plan = cf.plan(accepted(toCanonical(row, "gym-rollout")).rollout);
      expect(plan.report.status).toBe("ok");
      expect(plan.report.rows).toBe(1);
      expect(plan.rows[0].numTokens).toBe(109 + row.response.output[1].generation_token_ids.length);
      expect(plan.report.trained_tokens).toBe(row.response.output[1].generation_token_ids.length);
      plan.release();
    }
  });

  it("gives the reward as written, not rounded or defaulted", () => {
    const row = clone(rows[0]);
    row.reward = 0.625;
    expect(accepted(toCanonical(row)).rollout.reward).toBe(0.625);
  });

  it("falls back to response.id when the Gym indices are missing", () => {
    const row = clone(rows[2]);
    delete row._ng_rollout_index;
    expect(accepted(toCanonical(row)).rollout.rollout_id).toBe("resp_5f70aa83004948b48cf6953f9415e287");
    // Only integers and non-empty strings are indices.
    for (const task of ["", 1.5, null, true, {}, []]) {
      const other = clone(rows[2]);
      other._ng_task_index = task;
      expect([task, accepted(toCanonical(other)).rollout.rollout_id]).toEqual([
        task,
        "resp_5f70aa83004948b48cf6953f9415e287",
      ]);
    }
    const named = clone(rows[2]);
    named._ng_task_index = "task-a";
    expect(accepted(toCanonical(named)).rollout.rollout_id).toBe(`task-a-${rows[2]._ng_rollout_index}`);
  });

  it("appends -a<attempt> for a resumed retry's _ng_attempt_index above 0, as Gym keys it", () => {
    const id = (attempt?: unknown) => {
      const row = clone(rows[0]);
      if (attempt !== undefined) row._ng_attempt_index = attempt;
      return accepted(toCanonical(row, "gym-rollout")).rollout.rollout_id;
    };
    expect(id()).toBe("0-1");
    expect(id(null)).toBe("0-1");
    expect(id(0)).toBe("0-1");
    expect(id(2)).toBe("0-1-a2");
    expect(id("3")).toBe("0-1-a3"); // an int's digits, as Python's int() takes them
    const bad = clone(rows[0]);
    bad._ng_attempt_index = "x1";
    expect(toCanonical(bad, "gym-rollout")).toMatchObject({
      ok: false,
      code: "missing_field",
      detail: 'gym-rollout: _ng_attempt_index is "x1", expected a non-negative integer',
      rolloutId: "0-1",
    });
  });

  it.each([
    ["1e400", "a number out of range (such as 1e400)"],
    ["-1e400", "a number out of range (such as 1e400)"],
    ["9007199254740993", "an integer past 2^53, read as 9007199254740992 (its last digits are not exact)"],
    ['"9007199254740993"', '"9007199254740993"'],
    ['" 1"', '" 1"'],
    ['"1\\n"', '"1\\n"'],
    ['"+1"', '"+1"'],
    ["-1", "-1"],
  ])("rejects _ng_attempt_index %s, saying what was given (issue 39)", (text, given) => {
    const row = JSON.parse(JSON.stringify(rows[0]).replace(/}$/, `,"_ng_attempt_index":${text}}`));
    expect(toCanonical(row, "gym-rollout")).toMatchObject({
      ok: false,
      code: "missing_field",
      detail: `gym-rollout: _ng_attempt_index is ${given}, expected a non-negative integer`,
    });
  });

  it("skips output items whose generation_token_ids is empty, null or absent", () => {
    const row = clone(rows[0]);
    row.response.output[0].generation_token_ids = [];
    row.response.output[0].prompt_token_ids = [1, 2];
    row.response.output[0].generation_log_probs = [];
    expect(accepted(toCanonical(row)).rollout.calls).toHaveLength(1);
    row.response.output[0].generation_token_ids = null;
    expect(accepted(toCanonical(row)).rollout.calls).toHaveLength(1);
    delete row.response.output[0].generation_token_ids;
    expect(accepted(toCanonical(row)).rollout.calls).toHaveLength(1);
  });

  it("names an item without an id by its path, and a repeated id by its path too", () => {
    const row = clone(rows[0]);
    const item = row.response.output[1];
    row.response.output.push({ ...item }, { ...item, id: null });
    const ids = accepted(toCanonical(row)).rollout.calls.map((c) => c.id);
    expect(ids).toEqual([item.id, "response.output[2]", "response.output[3]"]);
  });

  it("keeps a path id distinct from an earlier item's id that happens to be that path", () => {
    const row = clone(rows[0]);
    const item = row.response.output[1];
    row.response.output.push({ ...item, id: "response.output[3]" }, { ...item, id: null });
    const ids = accepted(toCanonical(row)).rollout.calls.map((c) => c.id);
    expect(ids).toEqual([item.id, "response.output[3]", "response.output[3]#2"]);
  });
});

describe("gym-rollout rejections: one line naming what and where", () => {
  const row = readJsonl(COMPETITIVE_CODING)[0];
  const cases: [string, (v: any) => void, string, string][] = [
    ["no response", (v) => delete v.response, "missing_field", "gym-rollout: response is missing, expected an object"],
    [
      "no output",
      (v) => delete v.response.output,
      "missing_field",
      "gym-rollout: response.output is missing, expected an array",
    ],
    ["no reward", (v) => delete v.reward, "missing_field", "gym-rollout: reward is missing, expected a finite number"],
    ["string reward", (v) => (v.reward = "1"), "missing_field", 'gym-rollout: reward is "1", expected a finite number'],
    [
      "no prompt_token_ids",
      (v) => delete v.response.output[1].prompt_token_ids,
      "missing_field",
      `gym-rollout: response.output[1] (call ${row.response.output[1].id}): ` +
        `prompt_token_ids is missing, expected an array`,
    ],
    [
      "no generation_log_probs",
      (v) => (v.response.output[1].generation_log_probs = null),
      "missing_field",
      `gym-rollout: response.output[1] (call ${row.response.output[1].id}): ` +
        `generation_log_probs is null, expected an array`,
    ],
    [
      "generation ids not an array",
      (v) => (v.response.output[1].generation_token_ids = "1 2 3"),
      "missing_field",
      'gym-rollout: response.output[1].generation_token_ids is "1 2 3", expected an array',
    ],
    [
      "no id at all",
      (v) => {
        delete v._ng_task_index;
        delete v.response.id;
      },
      "missing_field",
      "gym-rollout: no rollout id: _ng_task_index/_ng_rollout_index absent and response.id is missing",
    ],
  ];
  for (const [name, breakIt, code, detail] of cases) {
    it(name, () => {
      const value = clone(row);
      breakIt(value);
      const result = toCanonical(value, "gym-rollout");
      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect(result.reason).toBe("invalid_rollout");
      expect(result.code).toBe(code);
      expect(result.detail).toBe(detail);
      expect(result.detail).not.toContain("\n");
    });
  }

  it("keeps the rollout id of a rejected row for its report", () => {
    const value = clone(row);
    delete value.reward;
    const result = toCanonical(value);
    expect(!result.ok && result.rolloutId).toBe("0-1");
  });
});
