// SPEC's report object: the empty shape every report starts from.
import type { RejectionCode, Report } from "../types.js";

/** A report with zero counts; `line` only when the rollout came from an input line. */
export function emptyReport(rolloutId: string | null, calls: number, line?: number): Report {
  const report: Report = {
    rollout_id: rolloutId,
    status: "ok",
    calls,
    eligible: 0,
    roots: 0,
    leaves: 0,
    rows: 0,
    captured_tokens: 0,
    trained_tokens: 0,
    row_tokens: 0,
    unique_tokens: 0,
    diagnostics: [],
  };
  if (line !== undefined) report.line = line;
  return report;
}

/** The report of a rejected rollout: zero counts, SPEC's reason and a one-line detail. */
export function reportOfRejection(
  rolloutId: string | null,
  calls: number,
  reason: RejectionCode,
  detail: string,
  line?: number,
): Report {
  const report = emptyReport(rolloutId, calls, line);
  report.status = "rejected";
  report.reason = reason;
  report.detail = detail;
  return report;
}
