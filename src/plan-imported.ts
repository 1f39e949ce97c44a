// Planning an imported rollout: the plan of what src/formats converted, and its report with the
// import's diagnostics in. Per input value, a reader (the CLI's commands, src/ingest, the page):
//   const result = toCanonical(value, from, { tokens, mediaTokens });
//   if (result.ok) report = usePlan(cf, result, line, (plan, report) => ...)   // report: withImport's
//   else report = reportOfImportRejection(result, line);
import type { Callforest, ForestCall, Plan, PlanOptions, Report } from "./types.js";
import { reportOfRejection } from "./plan/report.js";
import { callAtFault } from "./messages.js";
import { recordedParentNotes } from "./formats/gym-capture/recorded-lineage.js";
import type { Converted, FormatRejection } from "./formats/types.js";

/** The report of a value rejected before planning (SPEC's report with zero counts). */
export function reportOfImportRejection(rejection: FormatRejection, line?: number): Report {
  return reportOfRejection(rejection.rolloutId, 0, rejection.reason, rejection.detail, line);
}

/**
 * Plans an imported rollout: the plan (the caller releases it) and its report, withImport's (the
 * import's diagnostics and token sources in).
 */
export function planImported(
  cf: Callforest,
  imported: Converted,
  line: number | undefined,
  layout: Omit<PlanOptions, "line"> = {},
): { plan: Plan; report: Report } {
  const plan = cf.plan(imported.rollout, line === undefined ? layout : { ...layout, line });
  try {
    // The forest is built on first access: only a capture that recorded parents asks for it.
    const forest = imported.recordedParents?.size ? plan.forest : undefined;
    return { plan, report: withImport(plan.report, imported, forest) };
  } catch (error) {
    plan.release();
    throw error;
  }
}

/** planImported, handing `use` the plan and its report, then releasing the plan. */
export function usePlan<T>(
  cf: Callforest,
  imported: Converted,
  line: number | undefined,
  use: (plan: Plan, report: Report) => T,
  layout: Omit<PlanOptions, "line"> = {},
): T {
  const { plan, report } = planImported(cf, imported, line, layout);
  try {
    return use(plan, report);
  } finally {
    plan.release();
  }
}

/**
 * The core's report for an imported rollout: the import diagnostics in front of its own (with,
 * given the forest, `recorded_parent_differs` where a recorded parent is not the exact-prefix
 * one), and a rejection that names a call also names where that call's tokens were read
 * (gym-observed).
 */
export function withImport(
  report: Report,
  imported: Pick<Converted, "diagnostics" | "sources" | "recordedParents">,
  forest?: readonly ForestCall[],
): Report {
  const { sources, recordedParents } = imported;
  const lineage =
    recordedParents !== undefined && forest !== undefined && report.status === "ok"
      ? recordedParentNotes(recordedParents, forest)
      : [];
  // A rejected rollout's report has no diagnostics (SPEC "Output"), the import's neither.
  if (report.status === "rejected") imported = { ...imported, diagnostics: [] };
  const diagnostics = lineage.length === 0 ? imported.diagnostics : [...imported.diagnostics, ...lineage];
  let out = diagnostics.length === 0 ? report : { ...report, diagnostics: [...diagnostics, ...report.diagnostics] };
  const fault = report.status === "rejected" && report.detail !== undefined ? callAtFault(report.detail) : null;
  const source = fault?.id != null ? sources?.get(fault.id) : undefined;
  if (source !== undefined) out = { ...out, detail: `${report.detail} (token entry ${source})` };
  return out;
}
