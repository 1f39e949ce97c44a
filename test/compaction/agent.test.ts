import { describe, expect, it } from "vitest";
import { runAgent } from "../../src/compaction/agent.js";
import type { Environment } from "../../src/compaction/environment.js";
import { CompactionError } from "../../src/compaction/errors.js";
import { imagesOf } from "../../src/compaction/history.js";
import { identityPolicy, recencyPolicy } from "../../src/compaction/policies.js";
import { rolling } from "../../src/compaction/schedules.js";
import { createGridWorld } from "../../src/compaction/testbed/index.js";
import { expectTrainsOnceAlongLineage, withServer } from "./support.js";

const compaction = { policy: identityPolicy(), schedule: rolling() };

describe("agent loop", () => {
  it("stops when the environment says the episode is over, with the environment's reward", async () => {
    await withServer({ seed: 1 }, async (_server, model) => {
      const result = await runAgent({
        model,
        environment: createGridWorld({ size: 2, goal: true }),
        compaction,
        maxTurns: 60,
        agent: "solver",
        rolloutId: "r-goal",
      });
      expect(result.stopReason).toBe("environment_done");
      expect(result.evidence).toMatchObject({
        rollout_id: "r-goal",
        reward: 1,
        agent: "solver",
        stop_reason: "environment_done",
      });
      expect(result.evidence.calls.length).toBeLessThan(60);
      expect(result.evidence.calls.every((c, i) => c.call_id === `solver-c${i}`)).toBe(true);
      expect(result.rollout.agents).toEqual([{ id: "solver", parent: null, mode: "leader" }]);
      await expectTrainsOnceAlongLineage(result.evidence, result.rollout);
    });
  });

  it("stops on a final message when the model has no tools to call", async () => {
    const chat: Environment = {
      tools: [],
      start: () => ({ text: "Say hi." }),
      call: () => ({ text: "unused" }),
      reward: () => 0.5,
    };
    await withServer({ seed: 1 }, async (_server, model) => {
      const result = await runAgent({ model, environment: chat, compaction, maxTurns: 5 });
      expect(result.stopReason).toBe("final_message");
      expect(result.evidence.calls).toHaveLength(1);
      expect(result.response?.output.map((o) => o.type)).toEqual(["reasoning", "message"]);
      expect(result.history.entries().map((e) => e.kind)).toEqual(["user", "reasoning", "message"]);
      expect(result.rollout.reward).toBe(0.5);
    });
  });

  it("keeps the whole logical history whatever the view showed", async () => {
    await withServer({ seed: 1 }, async (_server, model) => {
      const result = await runAgent({
        model,
        environment: createGridWorld({ seed: 2 }),
        compaction: {
          policy: recencyPolicy({ images: { keepLastGroups: 1 }, reasoning: { keepLastBlocks: 1 } }),
          schedule: rolling(),
        },
        maxTurns: 6,
      });
      const kinds = result.history.entries().map((e) => e.kind);
      expect(kinds.filter((k) => k === "reasoning")).toHaveLength(6);
      expect(kinds.filter((k) => k === "function_call")).toHaveLength(6);
      expect(result.evidence.calls[5].view.omitted.reasoning).toBe(4);
      // every stored image is in the evidence's media table, in order of first occurrence
      const firstSeen = [...new Set(result.history.entries().flatMap((e) => imagesOf(e)))];
      expect(result.evidence.media.map((m) => m.id)).toEqual(firstSeen);
      expect(result.evidence.media).toHaveLength(result.media.size);
    });
  });

  it("records as appended items exactly what a continuation adds to its parent's input", async () => {
    await withServer({ seed: 1 }, async (_server, model) => {
      const result = await runAgent({ model, environment: createGridWorld({ seed: 2 }), compaction, maxTurns: 4 });
      const [first, ...rest] = result.evidence.calls;
      expect(first.appended_items).toBe(0);
      expect(rest).toHaveLength(3);
      for (const call of rest) {
        const parent = result.evidence.calls.find((c) => c.call_id === call.parent_call)!;
        expect(call.appended_items).toBe(call.view.input_items - parent.view.input_items);
        // at least the parent's function call and the function output that answered it
        expect(call.appended_items).toBeGreaterThanOrEqual(2);
      }
    });
  });

  it("rejects a turn budget below one", async () => {
    await expect(runAgent({ model: null as never, environment: createGridWorld(), maxTurns: 0 })).rejects.toThrow(
      CompactionError,
    );
  });
});
