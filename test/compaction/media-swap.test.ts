// A screenshot replaced in place: the test bed's screen, whose latest screenshot the view shows
// where the first one stood. A same-size image has the same tokens, so only the rollout's media
// keep callforest from linking a call under the stale screenshot (SPEC "Linking", media clause).
import { describe, expect, it } from "vitest";
import { runAgent, type RunAgentResult } from "../../src/compaction/agent.js";
import { materialize } from "../../src/compaction/materialize.js";
import { latestScreenshotPolicy } from "../../src/compaction/policies.js";
import { rolling } from "../../src/compaction/schedules.js";
import { createScreen } from "../../src/compaction/testbed/index.js";
import type { Rollout } from "../../src/index.js";
import { sampleHistory } from "./fixtures.js";
import { backends, expectTrainsOnceAlongLineage, withServer } from "./support.js";

// Entry layout of sampleHistory: 0 = task (+ image); turn t: 1+4t reasoning, 2+4t call, 3+4t output, 4+4t image.
const group = (t: number) => 4 + 4 * t;

describe("the latest-screenshot view", () => {
  it("shows the newest image where the first one stood, and drops the other images without a marker", async () => {
    const { history, media, images } = await sampleHistory(3);
    const plan = latestScreenshotPolicy().plan(history.entries());
    expect(plan.items[0]).toEqual({ entry: 0, images: [images[3]] });
    for (const t of [0, 1, 2]) expect(plan.items[group(t)]).toEqual({ entry: group(t), dropImages: true });
    expect(plan.retained).toEqual({ images: 1, imageGroups: 1, reasoning: 3 });
    expect(plan.omitted).toEqual({ images: 3, imageGroups: 3, reasoning: 0 });
    const view = await materialize(plan, history.entries(), media);
    expect(view.mediaIds).toEqual([images[3]]);
    expect(view.input[0]).toEqual({
      type: "message",
      role: "user",
      content: [
        { type: "input_text", text: "Task." },
        { type: "input_image", image_url: media.dataUrl(images[3]), detail: "auto" },
      ],
    });
    // the image-only observations have nothing left to show
    expect(view.input).toHaveLength(history.length - 3);
  });

  it("is the identity on a history without images", () => {
    const plan = latestScreenshotPolicy().plan([
      { kind: "user", origin: "initial", turn: -1, seq: 0, parts: [{ type: "text", text: "hi" }] },
    ]);
    expect(plan.items).toEqual([{ entry: 0 }]);
  });
});

describe("the screen", () => {
  it("returns a same-size screenshot every step: a new one per key typed, the same bytes after a wait", async () => {
    const screen = createScreen();
    const first = (await screen.start()).images![0].bytes;
    const typed = await screen.call("type", { key: "b" });
    const waited = await screen.call("wait", {});
    expect(typed.text).toBe("Typed b (1 of 32 cells).");
    expect(Buffer.from(typed.images![0].bytes).equals(Buffer.from(first))).toBe(false);
    expect(Buffer.from(waited.images![0].bytes).equals(Buffer.from(typed.images![0].bytes))).toBe(true);
    expect(typed.images![0].bytes.length).toBeGreaterThan(0);
    expect((await screen.call("type", { key: "z" })).text).toMatch(/^error: type needs key a\|b\|c\|d/);
    expect([screen.typed, screen.reward()]).toEqual(["b", 1 / 32]);
  });

  it("ends the episode when the text field is full", async () => {
    const screen = createScreen({ columns: 2, rows: 1 });
    expect((await screen.call("type", { key: "a" })).done).toBe(false);
    expect((await screen.call("type", { key: "c" })).done).toBe(true);
    expect(screen.reward()).toBe(1);
  });
});

/** The same rollout as tokens alone see it. */
const withoutMedia = (rollout: Rollout): Rollout => ({
  ...rollout,
  calls: rollout.calls.map(({ media: _media, ...call }) => call),
});

/** An episode on the screen: no reasoning, so a re-rendered context repeats the earlier tokens exactly. */
function screenEpisode(): Promise<RunAgentResult> {
  return withServer({ seed: 5, reasoningWords: [0, 0] }, (_server, model) =>
    runAgent({
      model,
      environment: createScreen(),
      compaction: { policy: latestScreenshotPolicy(), schedule: rolling() },
      maxTurns: 8,
    }),
  );
}

describe("a screenshot swapped in place, end to end", () => {
  it(
    "starts a new tree with media_mismatch where tokens alone would continue under the stale screenshot; " +
      "every token is trained once",
    async () => {
      const result = await screenEpisode();
      const e = result.evidence;
      const screenOf = (i: number) => e.calls[i].media[0];
      const swapped = e.calls.filter((_, i) => i > 0 && screenOf(i) !== screenOf(i - 1)).map((c) => c.call_id);
      const kept = e.calls.filter((_, i) => i > 0 && screenOf(i) === screenOf(i - 1)).map((c) => c.call_id);
      // The episode has both: keys typed (a new screenshot) and waits (the same one).
      expect([swapped.length > 0, kept.length > 0]).toEqual([true, true]);
      // The controller saw each swap as a rewrite of the first item, yet the prompt kept every token.
      expect(e.boundaries.map((b) => [b.first_call, b.reason, b.changed_ranges[0]?.old_start])).toEqual(
        swapped.map((id) => [id, "history_rewritten", 0]),
      );
      for (const id of swapped) {
        const i = e.calls.findIndex((c) => c.call_id === id);
        const previous = [...e.calls[i - 1].prompt_token_ids, ...e.calls[i - 1].generation_token_ids];
        expect(e.calls[i].prompt_token_ids.slice(0, previous.length)).toEqual(previous);
        expect(result.rollout.calls[i].media).toEqual([{ ...result.rollout.calls[i - 1].media![0], id: screenOf(i) }]);
      }
      await expectTrainsOnceAlongLineage(e, result.rollout);

      for (const cf of await backends()) {
        const withMedia = cf.plan(result.rollout);
        const tokensOnly = cf.plan(withoutMedia(result.rollout));
        try {
          for (const plan of [withMedia, tokensOnly]) {
            expect(plan.report.status, cf.backend).toBe("ok");
            expect(plan.report.trained_tokens).toBe(plan.report.captured_tokens);
          }
          const byId = new Map(withMedia.forest.map((c) => [c.id, c]));
          const tokenParent = new Map(tokensOnly.forest.map((c) => [c.id, c.parent]));
          for (const id of swapped) {
            const i = e.calls.findIndex((c) => c.call_id === id);
            expect(byId.get(id), `${cf.backend} ${id}`).toMatchObject({
              root: true,
              parent: null,
              mediaMismatch: true,
            });
            // tokens alone put it under the call that saw the old screenshot
            expect(tokenParent.get(id), `${cf.backend} ${id} by tokens`).toBe(e.calls[i - 1].call_id);
          }
          for (const id of kept)
            expect(byId.get(id), `${cf.backend} ${id}`).toMatchObject({ root: false, mediaMismatch: false });
          expect(withMedia.report.diagnostics.filter((d) => d.code === "media_mismatch")).toEqual(
            swapped.map((call) => ({ code: "media_mismatch", call })),
          );
          expect(tokensOnly.report.diagnostics.some((d) => d.code === "media_mismatch")).toBe(false);
          expect(withMedia.report.roots).toBe(1 + swapped.length);
          expect(tokensOnly.report.roots).toBe(1);
          // each row carries its leaf's screenshot, at the leaf's span
          for (const row of withMedia.rows)
            expect(row.media).toEqual(result.rollout.calls.find((c) => c.id === row.leaf)!.media);
        } finally {
          withMedia.release();
          tokensOnly.release();
        }
      }
    },
  );
});
