// The last line of a `rows` report: how the run ended and what its output holds. Rows and report
// files are each renamed into place, the report last; a kill between the two renames (or a
// report kept from another run) leaves a pair whose record does not match the rows file, and a
// reader can tell (see recordMatches). A streamed report gets this line last either way: one with
// status "failed" says the outputs its earlier lines describe were not written.
import { createHash } from "node:crypto";
import { failureOf } from "./errors.js";
import type { Outcome, OutputDigest } from "../ingest/sink.js";

export interface RunTotalsLike {
  rollouts: number;
  rejected: number;
  rows: number;
}

export interface RunRecordLine {
  run: {
    status: "ok" | "failed";
    /** Failed: the one-line reason the CLI also prints. */
    error?: string;
    rollouts?: number;
    rejected?: number;
    /** Records written (rows, packed trees or bins). */
    records?: number;
    /** The output as named on the command line (`-` for stdout). */
    output?: string;
    /** The output's size in bytes and the SHA-256 (hex) of those bytes. */
    bytes?: number;
    sha256?: string;
  };
}

/** The record line (with its newline) for a run that ended with `outcome`, its output `output`. */
export function runRecordLine(output: string, outcome: Outcome<RunTotalsLike>, digest: OutputDigest | null): string {
  const record: RunRecordLine = outcome.ok
    ? {
        run: {
          status: "ok",
          rollouts: outcome.value.rollouts,
          rejected: outcome.value.rejected,
          records: outcome.value.rows,
          output,
          ...(digest === null ? {} : { bytes: digest.bytes, sha256: digest.sha256 }),
        },
      }
    : { run: { status: "failed", error: failureOf(outcome.error).message || "the output was closed" } };
  return JSON.stringify(record) + "\n";
}

/** The record line that ends `report` (JSONL text), or null when its last line is none (a killed run). */
export function runRecordOf(report: string): RunRecordLine["run"] | null {
  const last = report.trimEnd().split("\n").at(-1) ?? "";
  try {
    const value = JSON.parse(last) as Partial<RunRecordLine>;
    return typeof value.run === "object" && value.run !== null ? value.run : null;
  } catch {
    return null;
  }
}

/** Whether `report` ends with the record of a successful run whose output is exactly `rows`. */
export function recordMatches(report: string, rows: Uint8Array): boolean {
  const record = runRecordOf(report);
  return (
    record !== null &&
    record.status === "ok" &&
    record.bytes === rows.byteLength &&
    record.sha256 === createHash("sha256").update(rows).digest("hex")
  );
}
