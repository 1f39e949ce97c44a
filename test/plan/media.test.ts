// Media-aware linking (SPEC v2 "Linking", the media clause): SPEC's screenshot-swap example on
// every backend, through the API, the builder and the CLI's two readers; the words of
// invalid_media; media as rows, the forest and the report carry them.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, test } from "vitest";
import type { Callforest } from "../../src/index.js";
import { main } from "../../src/cli/main.js";
import { rowToJson } from "../../src/output/jsonl.js";
import type { Rollout } from "../../src/types.js";
import { captureOutput } from "../support/capture.js";
import { tempDirs } from "../support/temp-dirs.js";
import { buildFrom } from "../support/worked-example.js";
import { everyBackend } from "../support/backends.js";

const EXAMPLE_PATH = new URL("../../examples/screenshot-swap.json", import.meta.url).pathname;
const tmp = tempDirs("media");
const example = (): Rollout => JSON.parse(readFileSync(EXAMPLE_PATH, "utf8")) as Rollout;

let backends: { name: string; cf: Callforest }[] = [];
beforeAll(async () => {
  backends = await everyBackend();
});

const AAAA = [{ id: "sha256:aaaa", offset: 3, length: 3 }];
const BBBB = [{ id: "sha256:bbbb", offset: 3, length: 3 }];

describe("SPEC's screenshot-swap example", () => {
  test("C3 is a root with media_mismatch; two rows, C1 C2 and C3 C4, with their media", () => {
    for (const { name, cf } of backends) {
      for (const [how, plan] of [
        ["plan", cf.plan(example())],
        ["builder", buildFrom(cf, example())],
      ] as const) {
        const label = `${name} ${how}`;
        expect([label, plan.report.status, plan.report.diagnostics]).toEqual([
          label,
          "ok",
          [{ code: "media_mismatch", call: "C3" }],
        ]);
        expect([label, plan.rows.map((r) => [r.calls.join(" "), r.trained.join(" ")])]).toEqual([
          label,
          [
            ["C1 C2", "C1 C2"],
            ["C3 C4", "C3 C4"],
          ],
        ]);
        expect([label, plan.rows.map((r) => r.media)]).toEqual([label, [AAAA, BBBB]]);
        expect([label, plan.forest.map((c) => [c.id, c.parent, c.mediaMismatch])]).toEqual([
          label,
          [
            ["C1", null, false],
            ["C2", "C1", false],
            ["C3", null, true],
            ["C4", "C3", false],
          ],
        ]);
        expect([label, plan.forest[2].media]).toEqual([label, BBBB]);
        expect(plan.report).toMatchObject({ roots: 2, rows: 2, captured_tokens: 6, trained_tokens: 6 });
        plan.release();
      }
    }
  });

  test("without media the same tokens link C3 under C2, as tokens alone would (one row)", () => {
    const rollout = example();
    for (const c of rollout.calls) delete c.media;
    for (const { cf } of backends) {
      const plan = cf.plan(rollout);
      expect(plan.report.diagnostics).toEqual([]);
      expect(plan.rows.map((r) => r.calls.join(" "))).toEqual(["C1 C2 C3 C4"]);
      expect(plan.rows[0].media).toEqual([]);
      plan.release();
    }
  });

  test("a shorter parent that still had the image: C3 continues C1 when only C2 saw another one", () => {
    const rollout = example();
    // C2 is told another image stood there: C3 (image aaaa) can continue C1 but not C2.
    rollout.calls[1].media = [{ id: "sha256:cccc", offset: 3, length: 3 }];
    rollout.calls[2].media = AAAA;
    rollout.calls[3].media = AAAA;
    for (const { cf } of backends) {
      const plan = cf.plan(rollout);
      expect(plan.report.diagnostics).toEqual([
        { code: "media_mismatch", call: "C2" },
        { code: "media_mismatch", call: "C3" },
      ]);
      expect(plan.forest.map((c) => c.parent)).toEqual([null, null, "C1", "C3"]);
      plan.release();
    }
  });

  test("media: null and [] are none", () => {
    for (const empty of [null, []]) {
      const rollout = example();
      for (const c of rollout.calls) c.media = empty;
      for (const { cf } of backends) {
        const plan = cf.plan(rollout);
        expect(plan.report.status).toBe("ok");
        expect(plan.rows.map((r) => [r.calls.length, r.media])).toEqual([[4, []]]);
        plan.release();
      }
    }
  });

  test("a media item's extra fields are ignored and not passed on", () => {
    const rollout = example();
    for (const c of rollout.calls) c.media = c.media!.map((m) => ({ ...m, kind: "image" }));
    const plan = backends[0].cf.plan(rollout);
    expect(plan.rows[0].media).toEqual(AAAA);
    expect(rowToJson(plan.rows[0])).toContain(
      `"reward":1,"group_id":null,"media":[{"id":"sha256:aaaa","offset":3,"length":3}]}`,
    );
    plan.release();
  });

  test("the CLI writes the same rows and report with either reader", async () => {
    const dir = tmp();
    const outputs: string[] = [];
    for (const backend of ["wasm", "ts"]) {
      const rows = join(dir, `rows-${backend}.jsonl`);
      const report = join(dir, `report-${backend}.jsonl`);
      const run = await captureOutput(() =>
        main(["rows", EXAMPLE_PATH, "-o", rows, "--report", report, "--backend", backend]),
      );
      expect(run.code).toBe(0);
      // The report's run record (its last line) names the run's own rows file.
      outputs.push(readFileSync(rows, "utf8") + readFileSync(report, "utf8").replace(/\{"run":.*\n$/, ""));
    }
    expect(outputs[1]).toBe(outputs[0]);
    const [row0, row1, report] = outputs[0]
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(Object.keys(row0).at(-1)).toBe("media");
    expect([row0.media, row1.media]).toEqual([AAAA, BBBB]);
    expect(report.diagnostics).toEqual([{ code: "media_mismatch", call: "C3" }]);
  });
});

describe("invalid_media names the call and the occurrence", () => {
  const withMedia = (media: unknown) => ({
    rollout_id: "r",
    reward: 0,
    calls: [
      { id: "C1", prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-1] },
      { id: "C2", prompt_token_ids: [1, 2], generation_token_ids: [3], generation_log_probs: [-1] },
      { id: "C3", prompt_token_ids: [1, 2, 3, 4, 5, 6], generation_token_ids: [7], generation_log_probs: [-1], media },
    ],
  });
  const cases: [unknown, string][] = [
    [
      [
        { id: "a", offset: 0, length: 3 },
        { id: "b", offset: 2, length: 1 },
      ],
      "media[1] overlaps media[0]",
    ],
    [
      [
        { id: "a", offset: 3, length: 1 },
        { id: "b", offset: 1, length: 1 },
      ],
      "media[1] starts before media[0] (occurrences must be in prompt order)",
    ],
    [[{ id: "a", offset: 4, length: 3 }], "media[0] ends at 7, past the prompt's 6 tokens"],
    [{ id: "a" }, 'media must be an array of {id, offset, length}, got {"id":"a"}'],
    [["a"], 'media[0] must be an object {id, offset, length}, got "a"'],
    [[{ id: "", offset: 0, length: 1 }], 'media[0].id must be a non-empty string, got ""'],
    [[{ id: "a", length: 1 }], "media[0].offset must be an integer >= 0, got undefined"],
    [[{ id: "a", offset: 1, length: 0 }], "media[0].length must be an integer >= 1, got 0"],
  ];
  test.each(cases)("%j", (media, words) => {
    for (const { cf } of backends) {
      const plan = cf.plan(withMedia(media));
      expect([plan.report.reason, plan.report.detail]).toEqual(["invalid_media", `call "C3" (calls[2]): ${words}`]);
      plan.release();
    }
  });

  test("the builder checks media against the staged prompt", () => {
    for (const { cf } of backends) {
      const b = cf.builder({ rollout_id: "r", reward: 0 });
      const slot = b.stage(2, 1);
      slot.promptTokenIds.set([1, 2]);
      slot.generationTokenIds.set([3]);
      expect(b.commit({ id: "C1", media: [{ id: "a", offset: 1, length: 2 }] })).toBe(false);
      const plan = b.finish();
      expect([plan.report.reason, plan.report.detail]).toEqual([
        "invalid_media",
        `call "C1" (calls[0]): media[0] ends at 3, past the prompt's 2 tokens`,
      ]);
    }
  });
});
