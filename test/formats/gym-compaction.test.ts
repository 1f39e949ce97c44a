// `gym-compaction`: NeMo Gym's compaction-agent responses (the internal ContextCompactedResponse
// and the transport response), bare or row-wrapped, with media placed by `--media-token`.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { init, type Callforest } from "../../src/index.js";
import { detectFormat, toCanonical, type Converted, type FormatContext } from "../../src/formats/index.js";
import { placeholderRuns } from "../../src/formats/media-spans.js";
import { COMPETITIVE_CODING, LOGIN_BUG, ROOT } from "../support/fixtures.js";
import { cli, lines, read, rowsOf, tempDir } from "../ingest/cli.js";
import { clone, readJson, readJsonl } from "./helpers.js";

const FIXTURES = join(ROOT, "test", "fixtures", "gym-compaction");
const INTERNAL = join(FIXTURES, "context_compacted_response.json");
const TRANSPORT = join(FIXTURES, "context_compacted_transport_response.json");
const internal = readJson(INTERNAL);
const transport = readJson(TRANSPORT);

const C1 = "completion-000001-7083d762a650";
const C2 = "completion-000002-d2dfc4450e89";
const IMAGE_A = "media-0c9174693a226a34bc9dc759";
const IMAGE_B = "media-e6f1a8803043033f58030eff";
/** The example's media: C1 shows image A twice, C2 (after the rewrite boundary) image B once. */
const C1_MEDIA = [
  { id: IMAGE_A, offset: 3, length: 2 },
  { id: IMAGE_A, offset: 7, length: 2 },
];
const C2_MEDIA = [{ id: IMAGE_B, offset: 8, length: 1 }];
const WITH_900: FormatContext = { mediaTokens: [900] };

/** A Gym rollout row around a compaction response. */
const row = (response: unknown, reward = 0.75) => ({ _ng_task_index: 7, _ng_rollout_index: 0, reward, response });

let cf: Callforest;
beforeAll(async () => {
  cf = await init();
});

function accepted(result: ReturnType<typeof toCanonical>): Converted {
  if (!result.ok) throw new Error(`rejected: ${result.code}: ${result.detail}`);
  return result;
}

function rejected(value: unknown, context: FormatContext = WITH_900) {
  const result = toCanonical(value, "auto", context);
  if (result.ok) throw new Error("expected a rejection");
  return result;
}

describe("the shared example data", () => {
  it("has two completions whose 900 runs match their media occurrences, the second after a rewrite", () => {
    const [first, second] = internal.completion_evidence;
    expect(placeholderRuns(first.prompt_token_ids, new Set([900]))).toEqual([
      { offset: 3, length: 2 },
      { offset: 7, length: 2 },
    ]);
    expect(
      first.media_occurrences.map((o: any) => [o.media_id, o.occurrence_ordinal, o.placeholder_span_or_position]),
    ).toEqual([
      [IMAGE_A, 0, null],
      [IMAGE_A, 1, null],
    ]);
    expect(placeholderRuns(second.prompt_token_ids, new Set([900]))).toEqual([{ offset: 8, length: 1 }]);
    expect([second.compaction_event_id, second.context_epoch, second.segment_index]).toEqual([
      internal.boundary_events[0].event_id,
      1,
      1,
    ]);
    // The rewrite replaced the old image: the second prompt does not extend the first call.
    const full = [...first.prompt_token_ids, ...first.sampled_token_ids];
    expect(second.prompt_token_ids.slice(0, full.length)).not.toEqual(full);
  });
});

describe("gym-compaction: the internal response (completion_evidence)", () => {
  it("gives one call per completion, in ledger order, with the sampled arrays and placed media", () => {
    const result = accepted(toCanonical(internal, "gym-compaction", WITH_900));
    const { rollout } = result;
    expect(result.format).toBe("gym-compaction");
    expect([rollout.rollout_id, rollout.reward, rollout.agents]).toEqual(["rollout-7-0", 0, undefined]);
    expect(rollout.calls).toEqual([
      {
        id: C1,
        prompt_token_ids: [1, 10, 11, 900, 900, 12, 13, 900, 900, 14],
        generation_token_ids: [20, 21, 22, 2],
        generation_log_probs: [-0.5, -0.25, -0.125, -0.0625],
        media: C1_MEDIA,
      },
      {
        id: C2,
        prompt_token_ids: [1, 10, 11, 30, 12, 13, 40, 41, 900, 42],
        generation_token_ids: [50, 51, 2],
        generation_log_probs: [-0.75, -0.5, -0.03125],
        media: C2_MEDIA,
      },
    ]);
    // The arrays are the evidence's own (nothing copied).
    expect(rollout.calls[0].generation_token_ids).toBe(internal.completion_evidence[0].sampled_token_ids);
    expect(rollout.calls[1].generation_log_probs).toBe(internal.completion_evidence[1].sampled_logprobs);
    expect(result.diagnostics).toEqual([
      {
        code: "context_compaction",
        call: C2,
        detail: "boundary boundary-000002-a1a9089ca7ec: history_policy_rewrite, policy recency",
      },
    ]);
  });

  it("plans to two roots and two rows whose media cover the 900 runs", () => {
    const { rollout } = accepted(toCanonical(internal, "auto", WITH_900));
    const plan = cf.plan(rollout);
    try {
      expect(plan.report).toMatchObject({
        status: "ok",
        roots: 2,
        leaves: 2,
        rows: 2,
        captured_tokens: 7,
        trained_tokens: 7,
      });
      expect(plan.rows.map((r) => r.media)).toEqual([C1_MEDIA, C2_MEDIA]);
      for (const r of plan.rows)
        for (const m of r.media)
          expect([...r.tokenIds.slice(m.offset, m.offset + m.length)].every((t) => t === 900)).toBe(true);
    } finally {
      plan.release();
    }
  });

  it("uses placeholder_span_or_position when the capture gives it: [start, end) or one position", () => {
    const value = clone(internal);
    value.completion_evidence[0].media_occurrences[0].placeholder_span_or_position = [3, 5];
    value.completion_evidence[0].media_occurrences[1].placeholder_span_or_position = [7, 9];
    value.completion_evidence[1].media_occurrences[0].placeholder_span_or_position = 8;
    const { rollout } = accepted(toCanonical(value)); // no --media-token needed
    expect(rollout.calls.map((c) => c.media)).toEqual([C1_MEDIA, C2_MEDIA]);
    // With --media-token as well, a given span must be its run.
    expect(accepted(toCanonical(value, "auto", WITH_900)).rollout.calls.map((c) => c.media)).toEqual([
      C1_MEDIA,
      C2_MEDIA,
    ]);
    value.completion_evidence[0].media_occurrences[1].placeholder_span_or_position = [7, 8];
    expect(rejected(value)).toMatchObject({
      code: "media_unlocated",
      detail:
        `gym-compaction: completion_evidence[0] (call "${C1}"): ` +
        `media_occurrences[1].placeholder_span_or_position is [7, 8), but run 2 of placeholder token 900 is [7, 9)`,
    });
    value.completion_evidence[0].media_occurrences[1].placeholder_span_or_position = "7-9";
    expect(rejected(value)).toMatchObject({
      code: "missing_field",
      detail:
        'gym-compaction: completion_evidence[0].media_occurrences[1].placeholder_span_or_position is "7-9", ' +
        "expected [start, end], a position or null",
    });
  });

  it("takes several placeholder ids: a run is any mix of them", () => {
    const value = clone(internal);
    value.completion_evidence[0].prompt_token_ids[4] = 901; // 900 901: still one image
    const { rollout } = accepted(toCanonical(value, "auto", { mediaTokens: [900, 901] }));
    expect(rollout.calls[0].media).toEqual(C1_MEDIA);
  });

  it("leaves a completion without media occurrences or placeholder runs without media", () => {
    const value = clone(internal);
    const second = value.completion_evidence[1];
    second.prompt_token_ids[8] = 43;
    second.media_ids = [];
    second.media_occurrences = [];
    const { rollout } = accepted(toCanonical(value, "auto", WITH_900));
    expect(rollout.calls[1]).not.toHaveProperty("media");
  });

  it("makes a completion marked not eligible a call nobody kept, with a note, whatever its media", () => {
    const value = clone(internal);
    value.completion_evidence[0].eligible = false;
    value.completion_evidence[1].media_occurrences[0].placeholder_span_or_position = 8;
    const result = accepted(toCanonical(value)); // the first one's media would need --media-token
    expect(result.rollout.calls[0]).toMatchObject({ id: C1, kept: false });
    expect(result.rollout.calls[0]).not.toHaveProperty("media");
    expect(result.diagnostics[0]).toEqual({
      code: "ineligible_completion",
      call: C1,
      detail: "completion_evidence[0]: eligible is false",
    });
  });
});

describe("gym-compaction: the transport response (output items + model_call_metadata)", () => {
  it("gives the same calls as the internal response, tokens from the output items", () => {
    const fromTransport = accepted(toCanonical(transport, "auto", WITH_900));
    const fromInternal = accepted(toCanonical(internal, "auto", WITH_900));
    expect(fromTransport.format).toBe("gym-compaction");
    expect(fromTransport.rollout).toEqual(fromInternal.rollout);
    expect(fromTransport.diagnostics).toEqual(fromInternal.diagnostics);
    expect(fromTransport.rollout.calls[1].prompt_token_ids).toBe(transport.output[3].prompt_token_ids);
  });

  it("refuses records and token-carrying items that do not pair up", () => {
    const missing = clone(transport);
    missing.model_call_metadata.pop();
    expect(rejected(missing)).toMatchObject({
      code: "evidence_mismatch",
      detail: "gym-compaction: output has 2 items with generation_token_ids, but model_call_metadata has 1 entry",
    });
    const swapped = clone(transport);
    swapped.model_call_metadata.reverse();
    expect(rejected(swapped)).toMatchObject({
      code: "evidence_mismatch",
      detail:
        `gym-compaction: model_call_metadata[0] (call "${C2}"): its policy output span ends at 3, ` +
        `but output[0] has 4 generated tokens`,
    });
  });
});

describe("gym-compaction: --from auto", () => {
  it("detects the response bare or in a row, internal or transport; other Gym rows stay gym-rollout", () => {
    for (const value of [internal, transport, row(internal), row(transport)])
      expect(detectFormat(value)).toBe("gym-compaction");
    expect(detectFormat(readJsonl(COMPETITIVE_CODING)[0])).toBe("gym-rollout");
    // A canonical rollout stays canonical whatever it carries.
    expect(detectFormat({ ...readJson(LOGIN_BUG), completion_evidence: [] })).toBe("callforest");
  });
});

describe("gym-compaction: a row-wrapped response", () => {
  it("takes the row's reward and <task>-<rollout> id, and names paths inside response.", () => {
    const { rollout } = accepted(toCanonical(row(internal), "auto", WITH_900));
    expect([rollout.rollout_id, rollout.reward, rollout.calls.map((c) => c.id)]).toEqual(["7-0", 0.75, [C1, C2]]);
    const unindexed: Record<string, unknown> = row(internal);
    delete unindexed._ng_task_index;
    expect(accepted(toCanonical(unindexed, "auto", WITH_900)).rollout.rollout_id).toBe("rollout-7-0"); // the contract's
    expect(rejected(row(internal), {})).toMatchObject({
      rolloutId: "7-0",
      detail: expect.stringMatching(/^gym-compaction: response\.completion_evidence\[0\] /),
    });
    expect(rejected({ ...row(internal), reward: null })).toMatchObject({
      code: "missing_field",
      detail: "gym-compaction: reward is null, expected a finite number",
      rolloutId: "7-0",
    });
  });
});

describe("gym-compaction: the runtime's rollout id", () => {
  it("takes context_compaction_rollout_id, else <task>-<rollout> with -a<attempt> after the first", () => {
    const id = (extra: Record<string, unknown>) =>
      accepted(toCanonical({ ...row(internal), ...extra }, "auto", WITH_900)).rollout.rollout_id;
    expect(id({ _ng_attempt_index: 0 })).toBe("7-0");
    expect(id({ _ng_attempt_index: 2 })).toBe("7-0-a2");
    expect(id({ _ng_attempt_index: "3" })).toBe("7-0-a3");
    expect(id({ context_compaction_rollout_id: "episode-b", _ng_attempt_index: 2 })).toBe("episode-b");
    expect(id({})).toBe("7-0");
    expect(id({ _ng_attempt_index: null })).toBe("7-0");
    expect(rejected({ ...row(internal), _ng_attempt_index: -1 })).toMatchObject({
      code: "missing_field",
      detail: "gym-compaction: _ng_attempt_index is -1, expected a non-negative integer",
    });
    // a rejected row is reported under the id it would have been read under
    expect(rejected({ ...row(internal), context_compaction_rollout_id: "episode-b", reward: null })).toMatchObject({
      code: "missing_field",
      rolloutId: "episode-b",
    });
  });
});

describe("gym-compaction: media that cannot be placed", () => {
  it("without --media-token: media_unlocated naming the completion and the option", () => {
    expect(rejected(internal, {})).toEqual({
      ok: false,
      format: "gym-compaction",
      reason: "invalid_rollout",
      code: "media_unlocated",
      detail:
        `gym-compaction: completion_evidence[0] (call "${C1}"): ` +
        `2 media occurrences without placeholder_span_or_position: ` +
        `give --media-token ID (the model's media placeholder token ids) to place them`,
      rolloutId: "rollout-7-0",
    });
  });

  it("when the runs and the occurrences differ in count, either way", () => {
    expect(rejected(internal, { mediaTokens: [12] })).toMatchObject({
      code: "media_unlocated",
      detail:
        `gym-compaction: completion_evidence[0] (call "${C1}"): ` +
        `2 media occurrences but 1 run of placeholder token 12 in completion_evidence[0].prompt_token_ids`,
    });
    const merged = clone(internal);
    merged.completion_evidence[0].prompt_token_ids.splice(5, 2, 900, 900); // the two images' runs touch
    expect(rejected(merged)).toMatchObject({
      code: "media_unlocated",
      detail: expect.stringContaining("2 media occurrences but 1 run of placeholder token 900"),
    });
    const extra = clone(internal);
    extra.completion_evidence[1].prompt_token_ids[3] = 900; // a placeholder no occurrence names
    expect(rejected(extra)).toMatchObject({
      code: "media_unlocated",
      detail:
        `gym-compaction: completion_evidence[1] (call "${C2}"): ` +
        `1 media occurrence but 2 runs of placeholder token 900 in completion_evidence[1].prompt_token_ids`,
    });
  });

  it("when the occurrences are not in prompt order or disagree with media_ids", () => {
    const reordered = clone(internal);
    reordered.completion_evidence[0].media_occurrences.reverse();
    expect(rejected(reordered)).toMatchObject({
      code: "media_unlocated",
      detail:
        `gym-compaction: completion_evidence[0] (call "${C1}"): media_occurrences[0] (media "${IMAGE_A}") ` +
        `has occurrence_ordinal 1, expected 0: the occurrences are not in prompt order`,
    });
    const dropped = clone(internal);
    dropped.completion_evidence[1].media_occurrences = [];
    expect(rejected(dropped)).toMatchObject({
      code: "media_unlocated",
      detail:
        `gym-compaction: completion_evidence[1] (call "${C2}"): media_occurrences (0 occurrences) ` +
        `do not list media_ids (1 id) in order`,
    });
  });

  it("other broken fields are missing_field, naming the path", () => {
    const noId = clone(internal);
    delete noId.completion_evidence[1].completion_id;
    expect(rejected(noId)).toMatchObject({
      code: "missing_field",
      detail: "gym-compaction: completion_evidence[1].completion_id is missing, expected a non-empty string",
    });
    const noTokens = clone(internal);
    delete noTokens.completion_evidence[0].sampled_logprobs;
    expect(rejected(noTokens)).toMatchObject({
      code: "missing_field",
      detail: `gym-compaction: completion_evidence[0] (call "${C1}"): sampled_logprobs is missing, expected an array`,
    });
    expect(toCanonical(readJsonl(COMPETITIVE_CODING)[0], "gym-compaction")).toMatchObject({
      ok: false,
      detail:
        "gym-compaction: response.completion_evidence is missing and response.model_call_metadata is missing, " +
        "expected an array",
    });
  });
});

describe("gym-compaction: the CLI", () => {
  const bin = join(ROOT, "bin", "callforest.js");

  it("`node bin/callforest.js rows --from gym-compaction --media-token 900 FILE`: two rows, media last", () => {
    const run = spawnSync(
      process.execPath,
      [bin, "rows", "--from", "gym-compaction", "--media-token", "900", INTERNAL],
      { encoding: "utf8" },
    );
    expect([run.status, run.stderr]).toEqual([0, "callforest: 1 rollout (1 ok, 0 rejected), 2 rows\n"]);
    const rows = lines(run.stdout).map((l) => JSON.parse(l));
    expect(rows.map((r) => [r.rollout_id, r.leaf, r.calls, r.reward, r.media])).toEqual([
      ["rollout-7-0", C1, [C1], 0, C1_MEDIA],
      ["rollout-7-0", C2, [C2], 0, C2_MEDIA],
    ]);
    expect(Object.keys(rows[0]).slice(-3)).toEqual(["reward", "group_id", "media"]);
    expect(rows[1].token_ids).toEqual([1, 10, 11, 30, 12, 13, 40, 41, 900, 42, 50, 51, 2]);
  });

  it("rows of JSONL: a row-wrapped response takes its reward; without --media-token it alone is rejected", async () => {
    const dir = tempDir();
    const input =
      [JSON.stringify(row(internal, 0.5)), JSON.stringify(readJson(LOGIN_BUG)), JSON.stringify(row(transport, 1))].join(
        "\n",
      ) + "\n";
    const good = await rowsOf(dir, "good", input, "--media-token", "900", "--jobs", "1");
    expect(good.run.code).toBe(0);
    const reports = lines(good.report).map((l) => JSON.parse(l));
    expect(reports.map((r) => [r.rollout_id, r.status, r.roots, r.rows])).toEqual([
      ["7-0", "ok", 2, 2],
      ["login-bug", "ok", 4, 5],
      ["7-0", "ok", 2, 2],
    ]);
    const rows = lines(good.rows).map((l) => JSON.parse(l));
    expect(rows.filter((r) => r.rollout_id === "7-0").map((r) => [r.reward, r.media])).toEqual([
      [0.5, C1_MEDIA],
      [0.5, C2_MEDIA],
      [1, C1_MEDIA],
      [1, C2_MEDIA],
    ]);

    // No --media-token: each compaction rollout is one report line and one stderr note; the rest go on.
    const bare = await rowsOf(dir, "bare", input, "--jobs", "1");
    expect(bare.run.code).toBe(0);
    const again = lines(bare.report).map((l) => JSON.parse(l));
    expect(again.map((r) => [r.rollout_id, r.status, r.reason, r.line])).toEqual([
      ["7-0", "rejected", "invalid_rollout", 1],
      ["login-bug", "ok", undefined, 2],
      ["7-0", "rejected", "invalid_rollout", 3],
    ]);
    expect(again[0].detail).toBe(
      `gym-compaction: response.completion_evidence[0] (call "${C1}"): ` +
        `2 media occurrences without placeholder_span_or_position: ` +
        `give --media-token ID (the model's media placeholder token ids) to place them`,
    );
    expect(lines(bare.rows).length).toBe(5);
    const noted = await cli("rows", bare.input, "-o", join(dir, "noted.rows.jsonl"), "--jobs", "1");
    expect(lines(noted.stderr)).toEqual([
      `${bare.input}:1: rejected (invalid_rollout, media_unlocated): ${again[0].detail}`,
      `${bare.input}:3: rejected (invalid_rollout, media_unlocated): ${again[2].detail}`,
      "callforest: 3 rollouts (1 ok, 2 rejected), 5 rows",
    ]);
  });

  it("rows: mismatched counts are rejected, and --media-token reaches worker threads", async () => {
    const dir = tempDir();
    const input =
      Array.from({ length: 6 }, (_, i) => JSON.stringify(row(i % 2 === 0 ? internal : transport, i))).join("\n") + "\n";
    const mismatch = await rowsOf(dir, "mismatch", input, "--media-token", "12", "--jobs", "1");
    const reports = lines(mismatch.report).map((l) => JSON.parse(l));
    expect(
      reports.every(
        (r) => r.status === "rejected" && r.detail.includes("2 media occurrences but 1 run of placeholder token 12"),
      ),
    ).toBe(true);
    const inProcess = await rowsOf(dir, "one", input, "--media-token", "900", "--jobs", "1");
    const workers = await rowsOf(
      dir,
      "workers",
      input,
      "--media-token",
      "900",
      "--jobs",
      "2",
      "--batch-bytes",
      "30000",
    );
    expect(workers.run.code).toBe(0);
    expect(lines(workers.rows).length).toBe(12);
    expect(workers.rows).toBe(inProcess.rows);
    expect(workers.report).toBe(inProcess.report);
  });

  it("convert, show and draw take --media-token too", async () => {
    const converted = await cli("convert", "--media-token", "900", INTERNAL);
    expect(converted.code).toBe(0);
    expect(JSON.parse(converted.stdout).calls.map((c: any) => c.media)).toEqual([C1_MEDIA, C2_MEDIA]);
    const refused = await cli("convert", INTERNAL);
    expect([refused.code, refused.stdout, lines(refused.stderr).length]).toEqual([0, "", 1]);
    expect(refused.stderr).toMatch(
      /^.*context_compacted_response\.json: rejected \(invalid_rollout, media_unlocated\): /,
    );
    const shown = await cli("show", "--media-token", "900", INTERNAL);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(C2);
    const svg = join(tempDir(), "forest.svg");
    const drawn = await cli("draw", "--media-token", "900", INTERNAL, "-o", svg);
    expect([drawn.code, drawn.stdout]).toEqual([0, `${svg}\n`]);
    expect(read(svg)).toContain("<svg");
  });

  const BAD = ["", "x", "-1", "1.5", "1e3", "0x10", "2147483648", "900,", ",900", "900,,901", "900, 901", " 900"];
  for (const value of BAD) {
    it(`refuses --media-token ${JSON.stringify(value)}: one line, exit 2`, async () => {
      for (const command of [["rows"], ["convert"], ["show"], ["draw", "-o", "-"]]) {
        const run = await cli(...command, "--media-token", value, INTERNAL);
        expect([command[0], run.code, run.stdout, run.stderr]).toEqual([
          command[0],
          2,
          "",
          `callforest: --media-token must be token ids (integers in [0, 2147483647]) separated by commas, ` +
            `got '${value}'\n`,
        ]);
      }
    });
  }

  it("takes the largest token id and a list", async () => {
    const input = join(tempDir(), "r.json");
    writeFileSync(input, JSON.stringify(internal));
    for (const value of ["0,2147483647,900", "900,900"]) {
      const run = await cli("convert", "--media-token", value, input);
      expect([value, run.code, run.stderr]).toEqual([value, 0, ""]);
    }
  });
});
