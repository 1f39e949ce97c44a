import { describe, expect, it } from "vitest";
import { CompactionError } from "../../src/compaction/errors.js";
import type { SemanticHistory } from "../../src/compaction/history.js";
import { recencyPolicy } from "../../src/compaction/policies.js";
import { createScheduler, rolling, turnChunked } from "../../src/compaction/schedules.js";
import { sampleHistory } from "./fixtures.js";

/** Appends one more turn (reasoning, call, output) to a history. */
function addTurn(history: SemanticHistory, t: number) {
  history.append({ kind: "reasoning", origin: "model", turn: t, id: `rs_x${t}`, text: `more ${t}` });
  history.append({
    kind: "function_call",
    origin: "model",
    turn: t,
    id: `fc_x${t}`,
    callId: `cx_${t}`,
    name: "look",
    arguments: "{}",
  });
  history.append({ kind: "function_output", origin: "environment", turn: t, callId: `cx_${t}`, output: "seen" });
}

const policy = recencyPolicy({ reasoning: { keepLastBlocks: 1 } });

describe("schedules", () => {
  it("rolling recomputes the view on every call", async () => {
    const { history } = await sampleHistory(2);
    const s = createScheduler(rolling(), policy);
    const a = s.view(history.entries());
    expect(a.trigger).toBe("rolling");
    expect(a.plan).toEqual(policy.plan(history.entries()));
    addTurn(history, 2);
    expect(s.view(history.entries()).plan).toEqual(policy.plan(history.entries()));
    expect(s.chunks()).toEqual([]);
  });

  it("turnChunked freezes one compacted base for N actions and appends a growing tail", async () => {
    const { history } = await sampleHistory(3);
    const s = createScheduler(turnChunked(2), policy);
    const first = s.view(history.entries());
    expect(first.trigger).toBe("chunk_opened");
    expect(first.plan.items).toEqual(policy.plan(history.entries()).items);
    s.recordCall("c0");
    addTurn(history, 3);
    const second = s.view(history.entries());
    expect(second.trigger).toBe("chunk_tail");
    // the old view is a prefix of the new one: the base stayed, the tail grew
    expect(second.plan.items.slice(0, first.plan.items.length)).toEqual(first.plan.items);
    expect(second.plan.items.slice(first.plan.items.length).map((i) => i.entry)).toEqual([13, 14, 15]);
    expect(second.plan.retained.reasoning).toBe(2);
    s.recordCall("c1");
    addTurn(history, 4);
    const third = s.view(history.entries());
    expect(third.trigger).toBe("chunk_opened");
    expect(third.plan.items).toEqual(policy.plan(history.entries()).items);
    s.finish();
    expect(s.chunks()).toEqual([
      { chunk: 0, base_entries: 13, first_call: "c0", last_call: "c1", actions: 2, closed_by: "full" },
      { chunk: 1, base_entries: 19, first_call: null, last_call: null, actions: 0, closed_by: "end" },
    ]);
  });

  it("a chunk that took its N actions is full even when the run ends before the next view", async () => {
    const { history } = await sampleHistory(3);
    const s = createScheduler(turnChunked(2), policy);
    s.view(history.entries());
    s.recordCall("c0");
    addTurn(history, 3);
    s.view(history.entries());
    s.recordCall("c1");
    s.finish();
    expect(s.chunks()).toEqual([
      { chunk: 0, base_entries: 13, first_call: "c0", last_call: "c1", actions: 2, closed_by: "full" },
    ]);
  });

  it("closes a nonempty chunk early for a guard, and refuses to close an empty one", async () => {
    const { history } = await sampleHistory(2);
    const s = createScheduler(turnChunked(5), policy);
    s.view(history.entries());
    expect(s.closeChunkEarly()).toBe(false);
    s.recordCall("c0");
    addTurn(history, 2);
    expect(s.view(history.entries()).trigger).toBe("chunk_tail");
    expect(s.closeChunkEarly()).toBe(true);
    const recompacted = s.view(history.entries());
    expect(recompacted.trigger).toBe("guard_recompaction");
    expect(recompacted.chunk).toBe(1);
    expect(s.chunks()[0].closed_by).toBe("guard");
  });

  it("a guard recompaction marks only the chunk it opens: the chunk after it opens normally", async () => {
    const { history } = await sampleHistory(2);
    const s = createScheduler(turnChunked(2), policy);
    s.view(history.entries());
    s.recordCall("c0");
    addTurn(history, 2);
    expect(s.closeChunkEarly()).toBe(true);
    expect(s.view(history.entries()).trigger).toBe("guard_recompaction");
    s.recordCall("c1");
    addTurn(history, 3);
    expect(s.view(history.entries()).trigger).toBe("chunk_tail");
    s.recordCall("c2"); // fills the recompacted chunk
    addTurn(history, 4);
    const next = s.view(history.entries());
    expect(next.trigger).toBe("chunk_opened");
    expect(next.chunk).toBe(2);
    expect(s.chunks().map((c) => c.closed_by)).toEqual(["guard", "full", null]);
  });

  it("rejects a chunk size below one", () => {
    expect(() => turnChunked(0)).toThrow(CompactionError);
    expect(() => turnChunked(1.5)).toThrow(/actionsPerChunk must be a positive integer \(got 1.5\)/);
  });
});
