// Which call a rejection is about. The planner names the call at fault first in its detail, as
// `call "ID" (calls[N])` or, when the call has no usable id, `calls[N]` (src/rejection.ts).
import type { Report } from "../types.js";

export interface Fault {
  /** Position in the rollout's call list. */
  index: number;
  /** The call's id, when it had a usable one. */
  id: string | null;
}

// Anchored: only the call the detail starts with (an importer's detail may mention other
// `calls[N]`, e.g. `ng_model_call_capture.calls[0]`, which are not the rollout's calls).
const NAMED = /^(?:call ("(?:[^"\\]|\\.)*") \(calls\[(\d+)\]\)|calls\[(\d+)\])/;

export function faultOf(report: Report): Fault | null {
  if (report.status !== "rejected" || report.detail === undefined) return null;
  const match = NAMED.exec(report.detail);
  if (match === null) return null;
  if (match[1] !== undefined) {
    let id: string | null = null;
    try {
      id = JSON.parse(match[1]) as string;
    } catch {
      id = null;
    }
    return { index: Number(match[2]), id };
  }
  return { index: Number(match[3]), id: null };
}
