// atif (src/formats/atif.ts, src/files/trajectory-files.ts): ATIF trajectories as canonical
// rollouts. A canonical rollout written as ATIF reads back as itself; every bad input is one
// rejection naming the trajectory and step, and the other values of a batch go on.
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { toCanonical, type Converted, type FormatRejection } from "../../src/formats/index.js";
import { trajectoryFiles } from "../../src/files/trajectory-files.js";
import { readRollouts } from "../../src/ingest/read.js";
import { acceptedRolloutArb } from "../support/arbitraries.js";
import { filesOf, writeAtif } from "../support/atif-writer.js";
import { tempDirs } from "../support/temp-dirs.js";
import { cli } from "../ingest/cli.js";

const tmp = tempDirs("atif");

const metrics = (prompt: number[], completion: number[]) => ({
  prompt_token_ids: prompt,
  completion_token_ids: completion,
  logprobs: completion.map(() => -0.5),
});

/** A leader with two calls and a subagent embedded (v1.7) from the second call's step. */
function leader(): Record<string, any> {
  return {
    schema_version: "ATIF-v1.7",
    session_id: "run-1",
    agent: { name: "lead", version: "1" },
    steps: [
      { step_id: 1, source: "user", message: "task" },
      { step_id: 2, source: "agent", message: "a", metrics: metrics([1, 2], [3]) },
      {
        step_id: 3,
        source: "agent",
        message: "b",
        metrics: metrics([1, 2, 3, 4], [5]),
        observation: { results: [{ source_call_id: "t1", subagent_trajectory_ref: [{ trajectory_id: "helper" }] }] },
      },
    ],
    subagent_trajectories: [
      {
        schema_version: "ATIF-v1.7",
        trajectory_id: "helper",
        agent: { name: "helper", version: "1" },
        steps: [{ step_id: 1, source: "agent", message: "c", metrics: metrics([9, 8], [7, 6]) }],
      },
    ],
  };
}

const ok = (value: unknown, context = {}) => {
  const result = toCanonical(value, "atif", context);
  if (!result.ok) throw new Error(result.detail);
  return result as Converted;
};
const rejected = (value: unknown, context = {}) => toCanonical(value, "auto", context) as FormatRejection;

describe("atif", () => {
  it("reads each agent step with token ids as a call, and subagents as agents under their spawner", () => {
    const { rollout, diagnostics, format } = ok(leader(), { reward: 1 });
    expect(format).toBe("atif");
    expect(rollout.rollout_id).toBe("run-1");
    expect(rollout.reward).toBe(1);
    expect(rollout.agents).toEqual([
      { id: "run-1", parent: null, mode: "leader" },
      { id: "helper", parent: "run-1", mode: "subagent" },
    ]);
    expect(rollout.calls.map((c) => [c.id, c.agent, c.prompt_token_ids, c.generation_token_ids])).toEqual([
      ["run-1:2", "run-1", [1, 2], [3]],
      ["run-1:3", "run-1", [1, 2, 3, 4], [5]],
      ["helper:1", "helper", [9, 8], [7, 6]],
    ]);
    expect(diagnostics).toEqual([]);
    expect(toCanonical(leader()).format).toBe("atif"); // auto detection
  });

  it("property: a canonical rollout written as ATIF reads back as the same rollout", () => {
    fc.assert(
      fc.property(
        acceptedRolloutArb({ maxActions: 12 }),
        fc.func(fc.boolean()),
        fc.func(fc.boolean()),
        (r, inFile, chatter) => {
          const written = writeAtif(r, { inFile: (i) => inFile(i), chatter: (i) => chatter(i) });
          const read = ok(written.trajectory, {
            trajectories: filesOf(written.files),
            reward: r.reward,
          });
          const byId = <T extends { id: string }>(list: readonly T[]) =>
            [...list].sort((a, b) => (a.id < b.id ? -1 : 1));
          expect(read.rollout.rollout_id).toBe(written.expected.rollout_id);
          expect(read.rollout.reward).toBe(written.expected.reward);
          expect(byId(read.rollout.agents as { id: string }[])).toEqual(
            byId(written.expected.agents as { id: string }[]),
          );
          expect(byId(read.rollout.calls)).toEqual(byId(written.expected.calls));
          const note = read.diagnostics.find((d) => d.code === "steps_without_token_ids");
          if (written.untokenized + written.copied === 0) expect(note).toBeUndefined();
          else {
            if (written.untokenized > 0)
              expect(note?.detail).toMatch(new RegExp(`^${written.untokenized} agent steps`));
            if (written.copied > 0) expect(note?.detail).toMatch(new RegExp(`${written.copied} copied-context steps`));
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it("counts agent steps without token ids per agent, and copied-context steps, in one note", () => {
    const value = leader();
    value.steps.push({ step_id: 4, source: "agent", message: "no metrics" });
    value.steps.push({ step_id: 5, source: "agent", message: "counts only", metrics: { prompt_tokens: 10 } });
    // Copied context is never a call, even with the original's token ids still on it.
    value.steps.push({
      step_id: 6,
      source: "agent",
      message: "copied",
      is_copied_context: true,
      metrics: metrics([1], [2]),
    });
    expect(ok(value, { reward: 0 }).diagnostics).toEqual([
      {
        code: "steps_without_token_ids",
        call: null,
        detail:
          "2 agent steps without metrics.prompt_token_ids/completion_token_ids (run-1: 2) and " +
          "1 copied-context steps (is_copied_context) are not calls",
      },
    ]);
  });

  it("finds a subagent's own subagent embedded in its trajectory, or in one above it", () => {
    const value = leader();
    const helper = value.subagent_trajectories[0];
    const grandchild = (id: string) => ({
      trajectory_id: id,
      agent: {},
      steps: [{ step_id: 1, source: "agent", message: "", metrics: metrics([4], [4]) }],
    });
    helper.steps[0].observation = {
      results: [{ subagent_trajectory_ref: [{ trajectory_id: "inner" }, { trajectory_id: "outer" }] }],
    };
    helper.subagent_trajectories = [grandchild("inner")];
    value.subagent_trajectories.push(grandchild("outer"));
    expect(ok(value, { reward: 0 }).rollout.agents?.map((a) => [a.id, a.parent])).toEqual([
      ["run-1", null],
      ["helper", "run-1"],
      ["inner", "helper"],
      ["outer", "helper"],
    ]);
  });

  it("takes the reward from --reward, else the trial's verifier, else 0 with a note", () => {
    expect(ok(leader(), { reward: 0.25, trajectories: filesOf(new Map(), 1) }).rollout.reward).toBe(0.25);
    expect(ok(leader(), { trajectories: filesOf(new Map(), 1) }).rollout.reward).toBe(1);
    const none = ok(leader());
    expect(none.rollout.reward).toBe(0);
    expect(none.diagnostics[0]).toMatchObject({ code: "reward_missing", call: null });
  });

  it("reads a Harbor trial's reward from result.json, else verifier/reward.txt", () => {
    const trial = tmp();
    mkdirSync(join(trial, "agent"));
    mkdirSync(join(trial, "verifier"));
    const files = trajectoryFiles(join(trial, "agent"), { trial: true });
    expect(files.reward!()).toBeNull();
    writeFileSync(join(trial, "verifier", "reward.txt"), "0.5\n");
    expect(files.reward!()).toEqual({ reward: 0.5, where: join(trial, "verifier", "reward.txt") });
    writeFileSync(join(trial, "result.json"), JSON.stringify({ verifier_result: { rewards: { reward: 1 } } }));
    expect(files.reward!()).toEqual({
      reward: 1,
      where: `${join(trial, "result.json")} verifier_result.rewards.reward`,
    });
    // Outside a trial's agent/ folder nothing is looked for.
    expect(trajectoryFiles(trial, { trial: true }).reward!()).toBeNull();
    expect(trajectoryFiles(join(trial, "agent")).reward).toBeUndefined();
  });

  it("follows a file ref beside the input (v1.6) and a continuation as the same agent", () => {
    const value = leader();
    delete value.subagent_trajectories;
    value.steps[2].observation.results[0].subagent_trajectory_ref = [
      { session_id: "s-sum", trajectory_path: "trajectory.summarization-1-summary.json" },
    ];
    value.continued_trajectory_ref = "trajectory.cont-1.json";
    const files = new Map<string, unknown>([
      [
        "trajectory.summarization-1-summary.json",
        { session_id: "s-sum", agent: {}, steps: [{ step_id: 1, source: "agent", metrics: metrics([1], [2]) }] },
      ],
      [
        "trajectory.cont-1.json",
        {
          session_id: "run-1",
          agent: {},
          steps: [
            { step_id: 1, source: "user", message: "copied", is_copied_context: true },
            { step_id: 2, source: "agent", metrics: metrics([5], [6]) },
          ],
        },
      ],
    ]);
    const { rollout } = ok(value, { trajectories: filesOf(files), reward: 0 });
    expect(rollout.agents?.map((a) => [a.id, a.parent])).toEqual([
      ["run-1", null],
      ["s-sum", "run-1"],
    ]);
    expect(rollout.calls.map((c) => c.id)).toEqual(["run-1:2", "run-1:3", "s-sum:1", "run-1:cont-1:2"]);
  });

  it("rejects bad input in one line naming the trajectory and the step", () => {
    const cases: [(v: Record<string, any>) => void, string, string][] = [
      [
        (v) => delete v.steps[1].metrics.logprobs,
        "missing_field",
        "atif: steps[1] (step_id 2): metrics.logprobs is missing, expected an array",
      ],
      [
        (v) => (v.subagent_trajectories[0].steps[0].metrics.prompt_token_ids = "1 2"),
        "missing_field",
        'atif: subagent "helper" (subagent_trajectories[0]) steps[0] (step_id 1): metrics.prompt_token_ids is "1 2", expected an array',
      ],
      [
        (v) => (v.steps[0].metrics = metrics([1], [2])),
        "invalid_field",
        'atif: steps[0] (step_id 1): source is "user", but only agent steps carry token ids',
      ],
      [
        (v) => (v.steps[2].observation.results[0].subagent_trajectory_ref[0].trajectory_id = "nobody"),
        "unresolved_subagent",
        'atif: steps[2] (step_id 3): observation.results[0].subagent_trajectory_ref[0]: "nobody" is in no ' +
          "subagent_trajectories of this trajectory, and the ref has no trajectory_path",
      ],
      [
        (v) => (v.steps[1].observation = { results: [{ subagent_trajectory_ref: [{ trajectory_id: "helper" }] }] }),
        "duplicate_trajectory",
        "atif: steps[2] (step_id 3): observation.results[0].subagent_trajectory_ref[0]: subagent_trajectories[0] " +
          "is referenced twice (each trajectory is one agent)",
      ],
      [(v) => (v.steps[1] = 7), "invalid_field", "atif: steps[1] is 7, expected a step object"],
      [
        (v) => {
          delete v.session_id;
        },
        "missing_field",
        "atif: no rollout id: trajectory_id is missing and session_id is missing",
      ],
    ];
    for (const [breakIt, code, detail] of cases) {
      const value = leader();
      breakIt(value);
      expect(rejected(value, { reward: 0 }), detail).toMatchObject({ ok: false, format: "atif", code, detail });
    }
  });

  it("reads files only beside the input: no absolute path, no .., no link out, and says what is missing", () => {
    const dir = tmp();
    const outside = tmp();
    writeFileSync(join(outside, "secret.json"), "{}");
    symlinkSync(join(outside, "secret.json"), join(dir, "link.json"));
    writeFileSync(join(dir, "broken.json"), "{not json");
    const files = trajectoryFiles(dir);
    const withRef = (path: string) => {
      const value = leader();
      value.steps[2].observation.results[0].subagent_trajectory_ref = [{ trajectory_path: path }];
      return rejected(value, { trajectories: files, reward: 0 });
    };
    expect(withRef("/etc/passwd")).toMatchObject({ code: "unsafe_trajectory_path" });
    expect(withRef("../x.json")).toMatchObject({ code: "unsafe_trajectory_path" });
    expect(withRef("s3://bucket/x.json")).toMatchObject({ code: "unsafe_trajectory_path" });
    expect(withRef("link.json")).toMatchObject({ code: "unreadable_trajectory_file" });
    expect(withRef("gone.json")).toMatchObject({
      code: "unresolved_subagent",
      detail: `atif: steps[2] (step_id 3): observation.results[0].subagent_trajectory_ref[0]: ${join(dir, "gone.json")} not found`,
    });
    expect(withRef("broken.json")).toMatchObject({ code: "malformed_json", reason: "malformed_json" });
    expect(withRef("broken.json").detail).toMatch(/^atif: .*broken\.json: not JSON at byte 1/);
    // No directory to look in (stdin, bytes): the ref cannot be followed, and says so.
    const value = leader();
    value.steps[2].observation.results[0].subagent_trajectory_ref = [{ trajectory_path: "x.json" }];
    expect(rejected(value, { reward: 0 }).detail).toMatch(
      /cannot be read here \(no files beside this input: read the trajectory from its file/,
    );
  });

  it("a bad trajectory in a JSONL batch is one rejection; the others are read", async () => {
    const dir = tmp();
    const good = leader();
    const bad = leader();
    bad.session_id = "run-2";
    delete bad.steps[1].metrics.completion_token_ids;
    const third = { ...leader(), session_id: "run-3" };
    const file = join(dir, "runs.jsonl");
    writeFileSync(file, [good, bad, third].map((v) => JSON.stringify(v)).join("\n"));
    const items = [];
    for await (const item of readRollouts([file], { from: "atif", reward: 1 })) items.push(item);
    expect(items.map((i) => [i.where, i.result.ok])).toEqual([
      [`${file}:1`, true],
      [`${file}:2`, false],
      [`${file}:3`, true],
    ]);
    expect(items[1].result).toMatchObject({
      rolloutId: "run-2",
      detail: "atif: steps[1] (step_id 2): metrics.completion_token_ids is missing, expected an array",
    });
  });

  it("rows reads a JSONL of trajectories with files beside it, each line its own rollout, --reward for all", async () => {
    const dir = tmp();
    const sub = {
      session_id: "sub",
      agent: {},
      steps: [{ step_id: 1, source: "agent", metrics: metrics([1, 2, 3, 4, 5], [6]) }],
    };
    writeFileSync(join(dir, "sub.json"), JSON.stringify(sub));
    const first = leader();
    first.steps[2].observation.results[0].subagent_trajectory_ref = [{ trajectory_path: "sub.json" }];
    delete first.subagent_trajectories;
    const second: Record<string, any> = { ...leader(), session_id: "run-2" };
    second.steps[1].metrics.logprobs = [-0.5, -0.5];
    const file = join(dir, "runs.jsonl");
    writeFileSync(
      file,
      `${JSON.stringify(first)}\n${JSON.stringify(second)}\n${JSON.stringify({ ...leader(), session_id: "run-3" })}\n`,
    );
    const report = join(dir, "report.jsonl");
    const run = await cli(
      "rows",
      file,
      "--from",
      "atif",
      "--reward",
      "0.5",
      "-o",
      join(dir, "rows.jsonl"),
      "--report",
      report,
    );
    expect(run.code).toBe(0);
    const lines = (await import("node:fs"))
      .readFileSync(report, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.slice(0, 3).map((r) => [r.rollout_id, r.status, r.calls, r.reason ?? null])).toEqual([
      ["run-1", "ok", 3, null],
      ["run-2", "rejected", 3, "logprob_length_mismatch"],
      ["run-3", "ok", 3, null],
    ]);
    expect(lines[1].detail).toMatch(/run-2:2/);
    const bad = await cli("rows", file, "--reward", "high");
    expect([bad.code, bad.stderr.trim()]).toEqual([2, "callforest: --reward high: expected a finite number"]);
  });
});
