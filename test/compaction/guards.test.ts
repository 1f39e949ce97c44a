import { describe, expect, it, vi } from "vitest";
import { runAgent } from "../../src/compaction/agent.js";
import type { ModelClient } from "../../src/compaction/client.js";
import { CompactionError, GuardRejectedError } from "../../src/compaction/errors.js";
import { partialRunOf } from "../../src/compaction/partial.js";
import { measureGuards, projectVisionTokens, validateGuards } from "../../src/compaction/guards.js";
import { materialize } from "../../src/compaction/materialize.js";
import { identityPolicy } from "../../src/compaction/policies.js";
import { rolling } from "../../src/compaction/schedules.js";
import { hasGuards } from "../../src/compaction/guards.js";
import { createGridWorld } from "../../src/compaction/testbed/index.js";
import { sampleHistory } from "./fixtures.js";
import { failureOf } from "./support.js";

describe("guards", () => {
  it("projects vision tokens per 16-pixel patch, rounding up", () => {
    expect(projectVisionTokens(80, 80)).toBe(25);
    expect(projectVisionTokens(17, 16)).toBe(2);
    expect(projectVisionTokens(32, 32, 32)).toBe(1);
  });

  it("measures images, vision tokens and (through the preflight) total tokens against their limits", async () => {
    const { history, media } = await sampleHistory(2); // images: 32x32 task, two 32x16 observations
    const view = await materialize(identityPolicy().plan(history.entries()), history.entries(), media);
    const preflight = vi.fn(async () => 100);
    const checks = await measureGuards(
      { maxActiveImages: 2, maxVisionTokens: 8, maxTotalTokens: 150, reserveGenerationTokens: 64 },
      view,
      media,
      preflight,
    );
    expect(checks).toEqual([
      { guard: "total_tokens", measured: 164, limit: 150, ok: false },
      { guard: "active_images", measured: 3, limit: 2, ok: false },
      { guard: "vision_tokens", measured: 4 + 2 + 2, limit: 8, ok: true },
    ]);
    expect(preflight).toHaveBeenCalledTimes(1);
    const noTokenGuard = vi.fn(async () => 0);
    expect(await measureGuards({ maxActiveImages: 3 }, view, media, noTokenGuard)).toEqual([
      { guard: "active_images", measured: 3, limit: 3, ok: true },
    ]);
    expect(noTokenGuard).not.toHaveBeenCalled();
  });

  it("admits a total exactly at the limit: prompt + reserve <= maxTotalTokens", async () => {
    const { history, media } = await sampleHistory(1);
    const view = await materialize(identityPolicy().plan(history.entries()), history.entries(), media);
    const config = { maxTotalTokens: 10, reserveGenerationTokens: 2 };
    expect(await measureGuards(config, view, media, async () => 8)).toEqual([
      { guard: "total_tokens", measured: 10, limit: 10, ok: true },
    ]);
    expect(await measureGuards(config, view, media, async () => 9)).toEqual([
      { guard: "total_tokens", measured: 11, limit: 10, ok: false },
    ]);
  });

  it("counts any one limit as a guard; the patch size alone is not one", () => {
    for (const only of [{ maxTotalTokens: 0 }, { maxActiveImages: 0 }, { maxVisionTokens: 0 }])
      expect(hasGuards(only)).toBe(true);
    expect(hasGuards(undefined)).toBe(false);
    expect(hasGuards({})).toBe(false);
    expect(hasGuards({ patchSize: 16, reserveGenerationTokens: 64 })).toBe(false);
  });

  it("applies a vision-token limit configured on its own: the first call is rejected before it is sent", async () => {
    // The grid world's first observation is an image; a zero vision budget cannot admit it.
    const model: ModelClient = {
      model: "unused",
      respond: async () => {
        throw new Error("sent a call the guard should have rejected");
      },
      countTokens: async () => 0,
    };
    const compaction = { policy: identityPolicy(), schedule: rolling(), guards: { maxVisionTokens: 0 } };
    const rejection = {
      call_id: "agent-c0",
      outcome: "reject",
      rounds: [
        { view_digest: expect.any(String), checks: [{ guard: "vision_tokens", measured: 25, limit: 0, ok: false }] },
      ],
      chunk: null,
      completed_actions: 0,
    };
    // Gym's agent raises: the sample fails, nothing truncated is scored.
    const error = await failureOf(runAgent({ model, environment: createGridWorld(), compaction, maxTurns: 2 }));
    expect(error).toBeInstanceOf(GuardRejectedError);
    expect((error as Error).message).toBe(
      "context guard rejected model call agent-c0 at complete action boundary: step=1 guards=vision_tokens",
    );
    expect(partialRunOf(error)!.evidence.guards).toEqual([rejection]);
    // Kept on request, and marked partial.
    const kept = await runAgent({
      model,
      environment: createGridWorld(),
      compaction,
      maxTurns: 2,
      onGuardReject: "end_episode",
    });
    expect(kept.stopReason).toBe("guard_rejected");
    expect(kept.partial).toBe(true);
    expect(kept.evidence.calls).toEqual([]);
    expect(kept.evidence.guards).toEqual([rejection]);
  });

  it("rejects limits that are not non-negative integers", () => {
    expect(() => validateGuards({ maxActiveImages: -1 })).toThrow(CompactionError);
    expect(() => validateGuards({ patchSize: 0 })).toThrow(/patchSize must be a positive integer \(got 0\)/);
    expect(validateGuards({ maxVisionTokens: 0 })).toEqual({ maxVisionTokens: 0 });
  });
});
