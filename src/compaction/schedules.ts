// Schedules decide when the policy recomputes the view:
// `rolling` every call; `turnChunked(n)` freezes one compacted base for n actions and appends a tail.
// An action is one model call, as in Gym (`action-{turn}`): a response with two function calls is
// one action, and so is the final message.
import { CompactionError } from "./errors.js";
import type { HistoryEntry } from "./history.js";
import { planOf, type Policy, type ViewPlan } from "./policies.js";

export type ScheduleConfig = { type: "rolling" } | { type: "turn_chunked"; actionsPerChunk: number };

export function rolling(): ScheduleConfig {
  return { type: "rolling" };
}

export function turnChunked(actionsPerChunk: number): ScheduleConfig {
  if (!Number.isInteger(actionsPerChunk) || actionsPerChunk < 1) {
    throw new CompactionError(`turnChunked: actionsPerChunk must be a positive integer (got ${actionsPerChunk})`);
  }
  return { type: "turn_chunked", actionsPerChunk };
}

/** Why the view of a call looks the way it does. */
export type ViewTrigger = "rolling" | "chunk_opened" | "chunk_tail" | "guard_recompaction";

export type ChunkClose = "full" | "guard" | "end";

export interface ChunkRecord {
  chunk: number;
  /** History length when the chunk's base was computed. */
  base_entries: number;
  /** First model call made in the chunk (null if none was). */
  first_call: string | null;
  last_call: string | null;
  actions: number;
  closed_by: ChunkClose | null;
}

export interface ScheduledView {
  plan: ViewPlan;
  trigger: ViewTrigger;
  chunk: number | null;
}

export interface Scheduler {
  readonly config: ScheduleConfig;
  /** The view for the next call over the current history. */
  view(entries: readonly HistoryEntry[]): ScheduledView;
  /** Notes the model call just acknowledged: one action of the open chunk. */
  recordCall(callId: string): void;
  /** Closes a nonempty chunk early so the next view recompacts; false when there is nothing to close. */
  closeChunkEarly(): boolean;
  /** Closes the open chunk at the end of the run. */
  finish(): void;
  chunks(): ChunkRecord[];
}

export function createScheduler(config: ScheduleConfig, policy: Policy): Scheduler {
  return config.type === "rolling" ? rollingScheduler(config, policy) : chunkedScheduler(config, policy);
}

function rollingScheduler(config: ScheduleConfig, policy: Policy): Scheduler {
  return {
    config,
    view: (entries) => ({ plan: policy.plan(entries), trigger: "rolling", chunk: null }),
    recordCall: () => {},
    closeChunkEarly: () => false,
    finish: () => {},
    chunks: () => [],
  };
}

function chunkedScheduler(config: Extract<ScheduleConfig, { type: "turn_chunked" }>, policy: Policy): Scheduler {
  const records: ChunkRecord[] = [];
  let base: ViewPlan | null = null;
  let baseEnd = 0;
  let closedEarly = false;
  const open = (): ChunkRecord | undefined => {
    const last = records[records.length - 1];
    return last && last.closed_by === null ? last : undefined;
  };
  const close = (how: ChunkClose) => {
    const current = open();
    if (current) current.closed_by = how;
    base = null;
  };
  return {
    config,
    view(entries) {
      const current = open();
      if (current && current.actions >= config.actionsPerChunk) close("full");
      let trigger: ViewTrigger = "chunk_tail";
      if (base === null) {
        base = policy.plan(entries);
        baseEnd = entries.length;
        records.push({
          chunk: records.length,
          base_entries: baseEnd,
          first_call: null,
          last_call: null,
          actions: 0,
          closed_by: null,
        });
        trigger = closedEarly ? "guard_recompaction" : "chunk_opened";
        closedEarly = false;
      }
      const items = [...base.items];
      for (let i = baseEnd; i < entries.length; i++) items.push({ entry: i });
      return { plan: planOf(base.policy, entries, items), trigger, chunk: records.length - 1 };
    },
    recordCall(callId) {
      const current = open();
      if (!current) return;
      current.first_call ??= callId;
      current.last_call = callId;
      current.actions += 1;
    },
    closeChunkEarly() {
      const current = open();
      if (!current || current.actions === 0) return false;
      close("guard");
      closedEarly = true;
      return true;
    },
    finish() {
      // A chunk that took its n actions is full, whether or not another view came after it.
      const current = open();
      close(current && current.actions >= config.actionsPerChunk ? "full" : "end");
    },
    chunks: () => records.map((r) => ({ ...r })),
  };
}
