import { describe, expect, it } from "vitest";
import { canonicalJson, sha256Hex } from "../../src/compaction/digest.js";
import { CompactionError } from "../../src/compaction/errors.js";
import { OMISSION_MARKER, identityPolicy, policyIdentity, recencyPolicy } from "../../src/compaction/policies.js";
import { sampleHistory } from "./fixtures.js";

// Entry layout of sampleHistory: 0 = task (+ image); turn t: 1+4t reasoning, 2+4t call, 3+4t output, 4+4t image.
const group = (t: number) => 4 + 4 * t;
const reasoning = (t: number) => 1 + 4 * t;

describe("policies", () => {
  it("identity shows every entry and omits nothing", async () => {
    const { history } = await sampleHistory(3);
    const plan = identityPolicy().plan(history.entries());
    expect(plan.items).toEqual(history.entries().map((e) => ({ entry: e.seq })));
    expect(plan.retained).toEqual({ images: 4, imageGroups: 4, reasoning: 3 });
    expect(plan.omitted).toEqual({ images: 0, imageGroups: 0, reasoning: 0 });
  });

  it("image recency keeps the newest groups and the task's images; one marker per omitted run", async () => {
    const { history } = await sampleHistory(6);
    const plan = recencyPolicy({ images: { keepLastGroups: 2, protectInitialContext: true } }).plan(history.entries());
    const byEntry = new Map(plan.items.map((i) => [i.entry, i]));
    expect(byEntry.get(0)).toEqual({ entry: 0 });
    expect(byEntry.get(group(0))).toEqual({ entry: group(0), dropImages: true, marker: OMISSION_MARKER });
    for (const t of [1, 2, 3]) expect(byEntry.get(group(t))).toEqual({ entry: group(t), dropImages: true });
    for (const t of [4, 5]) expect(byEntry.get(group(t))).toEqual({ entry: group(t) });
    for (let t = 0; t < 6; t++) expect(byEntry.get(reasoning(t))).toEqual({ entry: reasoning(t) });
    expect(plan.retained).toEqual({ images: 3, imageGroups: 3, reasoning: 6 });
    expect(plan.omitted).toEqual({ images: 4, imageGroups: 4, reasoning: 0 });
    expect(OMISSION_MARKER).toBe("[Earlier image omitted]"); // Gym's default omission_marker
  });

  it("without protection the task's images are part of the omitted run", async () => {
    const { history } = await sampleHistory(3);
    const plan = recencyPolicy({ images: { keepLastGroups: 1, protectInitialContext: false } }).plan(history.entries());
    expect(plan.items[0]).toEqual({ entry: 0, dropImages: true, marker: OMISSION_MARKER });
    expect(plan.retained.images).toBe(1);
  });

  it("reasoning recency keeps the newest blocks and optionally the first", async () => {
    const { history } = await sampleHistory(6);
    const shown = (keepFirstBlock: boolean) =>
      recencyPolicy({ reasoning: { keepLastBlocks: 2, keepFirstBlock } })
        .plan(history.entries())
        .items.filter((i) => history.at(i.entry).kind === "reasoning")
        .map((i) => i.entry);
    expect(shown(false)).toEqual([reasoning(4), reasoning(5)]);
    expect(shown(true)).toEqual([reasoning(0), reasoning(4), reasoning(5)]);
    const plan = recencyPolicy({ reasoning: { keepLastBlocks: 0 } }).plan(history.entries());
    expect(plan.omitted).toEqual({ images: 0, imageGroups: 0, reasoning: 6 });
    expect(plan.items.every((i) => !i.dropImages)).toBe(true);
  });

  it("never changes the history it reads", async () => {
    const { history } = await sampleHistory(5);
    const before = JSON.stringify(history.entries());
    recencyPolicy({ images: { keepLastGroups: 1 }, reasoning: { keepLastBlocks: 1 } }).plan(history.entries());
    expect(JSON.stringify(history.entries())).toBe(before);
  });

  it("identifies decisions by name, version and config digest", async () => {
    const a = recencyPolicy({ images: { keepLastGroups: 2, protectInitialContext: true } });
    const b = recencyPolicy({ images: { protectInitialContext: true, keepLastGroups: 2 } });
    const c = recencyPolicy({ images: { keepLastGroups: 3 } });
    expect(a.identity).toEqual(b.identity);
    expect(a.identity).toEqual(policyIdentity("recency", "2", a.config));
    expect(a.identity.name).toBe("recency");
    expect(a.identity.version).toBe("2");
    expect(a.identity.config_digest).toBe(await sha256Hex(canonicalJson(a.config)));
    expect(c.identity.config_digest).not.toBe(a.identity.config_digest);
    const { history } = await sampleHistory(2);
    expect(a.plan(history.entries()).policy).toBe(a.identity);
    expect(identityPolicy().plan(history.entries()).policy.name).toBe("identity");
  });

  it("digests Gym's canonical form of the policy block, so an equal policy has Gym's config_digest", () => {
    // The digest in Gym's own example (recency, images only: protect_initial_context false, keep_last_groups 1).
    const gym = recencyPolicy({ images: { keepLastGroups: 1, protectInitialContext: false } });
    expect(gym.config).toEqual({
      type: "recency",
      config: {
        images: {
          enabled: true,
          protect_initial_context: false,
          keep_last_groups: 1,
          omission_marker: "[Earlier image omitted]",
        },
        reasoning: { enabled: false, keep_first_block: false, keep_last_blocks: 3 },
      },
    });
    expect(gym.identity).toEqual({
      name: "recency",
      version: "2",
      config_digest: "6c6b9773ff9f4b425812c584e4cc4d7a97cd51b8068177662bb858968e31764f",
    });
    expect(identityPolicy().config).toEqual({ type: "identity" });
  });

  it("keeps the observations the next action responds to, whatever the window (Gym's pending groups)", async () => {
    const { history } = await sampleHistory(3);
    const plan = recencyPolicy({ images: { keepLastGroups: 0, protectInitialContext: false } }).plan(history.entries());
    expect(
      plan.items.filter((i) => !i.dropImages && history.at(i.entry).kind === "user" && i.entry > 0).map((i) => i.entry),
    ).toEqual([group(2)]);
    expect(plan.retained.images).toBe(1);
  });

  it("refuses a knob of a half that is switched off, and a policy with both halves off (Gym's validators)", () => {
    expect(() => recencyPolicy({ images: { enabled: false, keepLastGroups: 2 }, reasoning: {} })).toThrow(
      "recency policy: images.keepLastGroups is set but images.enabled is false",
    );
    expect(() => recencyPolicy({})).toThrow("recency policy: images or reasoning must be enabled");
  });

  it("rejects bad knobs with the knob's name", () => {
    expect(() => recencyPolicy({ images: { keepLastGroups: -1 } })).toThrow(CompactionError);
    expect(() => recencyPolicy({ images: { keepLastGroups: 1.5 } })).toThrow(
      /images.keepLastGroups must be a non-negative integer \(got 1.5\)/,
    );
    expect(() => recencyPolicy({ reasoning: { keepFirstBlock: "yes" as unknown as boolean } })).toThrow(
      /reasoning.keepFirstBlock must be a boolean/,
    );
  });
});
