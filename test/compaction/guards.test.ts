import { describe, expect, it, vi } from "vitest";
import { CompactionError, identityPolicy, materialize, measureGuards, projectVisionTokens, validateGuards } from "../../src/compaction/index.js";
import { sampleHistory } from "./fixtures.js";

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
    const checks = await measureGuards({ maxActiveImages: 2, maxVisionTokens: 8, maxTotalTokens: 150, reserveGenerationTokens: 64 }, view, media, preflight);
    expect(checks).toEqual([
      { guard: "total_tokens", measured: 164, limit: 150, ok: false },
      { guard: "active_images", measured: 3, limit: 2, ok: false },
      { guard: "vision_tokens", measured: 4 + 2 + 2, limit: 8, ok: true },
    ]);
    expect(preflight).toHaveBeenCalledTimes(1);
    const noTokenGuard = vi.fn(async () => 0);
    expect(await measureGuards({ maxActiveImages: 3 }, view, media, noTokenGuard)).toEqual([{ guard: "active_images", measured: 3, limit: 3, ok: true }]);
    expect(noTokenGuard).not.toHaveBeenCalled();
  });

  it("rejects limits that are not non-negative integers", () => {
    expect(() => validateGuards({ maxActiveImages: -1 })).toThrow(CompactionError);
    expect(() => validateGuards({ patchSize: 0 })).toThrow(/patchSize must be a positive integer \(got 0\)/);
    expect(validateGuards({ maxVisionTokens: 0 })).toEqual({ maxVisionTokens: 0 });
  });
});
