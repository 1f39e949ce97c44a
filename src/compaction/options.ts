// How runAgent compacts (a type of its own, so the modules runAgent uses can name it without
// importing the agent).
import type { GuardConfig } from "./guards.js";
import type { Policy } from "./policies.js";
import type { ScheduleConfig } from "./schedules.js";

/** Compaction on: a policy, a schedule, and optional guards. */
export interface CompactionOptions {
  policy: Policy;
  schedule: ScheduleConfig;
  guards?: GuardConfig;
}
