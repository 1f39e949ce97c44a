// Which call a rejection is about. The planner names the call at fault first in its detail, as
// `call "ID" (calls[N])` or, when the call has no usable id, `calls[N]` (src/plan/rejection.ts).
import { callAtFault } from "../messages.js";
import type { Report } from "../types.js";

export interface Fault {
  /** Position in the rollout's call list. */
  index: number;
  /** The call's id, when it had a usable one. */
  id: string | null;
}

export function faultOf(report: Report): Fault | null {
  if (report.status !== "rejected" || report.detail === undefined) return null;
  return callAtFault(report.detail);
}
