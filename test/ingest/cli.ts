// Runs the CLI in-process (main() from src/cli/main.ts) with stdout/stderr captured, and builds
// the JSONL inputs the `rows` tests share.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { vi } from "vitest";
import { main } from "../../src/cli/main.js";
import { rolloutToJson } from "../../src/ingest/read.js";
import type { ByteSink } from "../../src/ingest/sink.js";
import { generateSmallRollouts } from "../../bench/generate.js";
import { LOGIN_BUG } from "../support/fixtures.js";
import { tempDirs } from "../support/temp-dirs.js";

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

const text = (chunk: unknown) => (chunk instanceof Uint8Array ? Buffer.from(chunk).toString("utf8") : String(chunk));

/** `callforest ...argv` in this process. */
export async function cli(...argv: string[]): Promise<Run> {
  const out: string[] = [];
  const err: string[] = [];
  const stdout = vi
    .spyOn(process.stdout, "write")
    .mockImplementation((chunk: unknown) => (out.push(text(chunk)), true));
  const stderr = vi
    .spyOn(process.stderr, "write")
    .mockImplementation((chunk: unknown) => (err.push(text(chunk)), true));
  try {
    const code = await main(argv);
    return { code, stdout: out.join(""), stderr: err.join("") };
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
  }
}

/** Fresh directories for the rows tests, removed after the test file. */
export const tempDir = tempDirs("rows");

export const read = (path: string) => readFileSync(path, "utf8");
/** A report's run record (its last line, see src/cli/run-record.ts) starts so; no rollout's line does. */
const RECORD = '{"run":';

/** The lines of a JSONL output; of a report, its rollouts' lines (the run record aside). */
export const lines = (text: string) => text.split("\n").filter((line) => line !== "" && !line.startsWith(RECORD));

/**
 * A report's text without its run record, which must be its last line (the record names the
 * run's own output, so two runs' reports differ there even when they say the same of each rollout).
 */
export function withoutRecord(report: string): string {
  const end = report.lastIndexOf("\n", report.length - 2) + 1;
  if (!report.startsWith(RECORD, end))
    throw new Error(`the report does not end with a run record: ${report.slice(end)}`);
  return report.slice(0, end);
}

/** Canonical rollouts as JSONL lines: the worked example and `count` small generated ones. */
export function goodLines(count: number, seed = 7): string[] {
  const example = JSON.stringify(JSON.parse(read(LOGIN_BUG)));
  return [example, ...generateSmallRollouts(count, seed, { arrays: "plain" }).map((r) => rolloutToJson(r))];
}

/** Runs `rows` on `lines` written to a file; returns the rows and report files' text. */
export async function rowsOf(dir: string, name: string, content: string | Uint8Array, ...argv: string[]) {
  const input = join(dir, `${name}.jsonl`);
  writeFileSync(input, content);
  const rowsFile = join(dir, `${name}.rows.jsonl`);
  const reportFile = join(dir, `${name}.report.jsonl`);
  const run = await cli("rows", input, "-o", rowsFile, "--report", reportFile, ...argv);
  const report = read(reportFile);
  return {
    run,
    rows: read(rowsFile),
    report: withoutRecord(report),
    record: report.slice(withoutRecord(report).length),
    input,
  };
}

/** A ByteSink that keeps what is written, for runRows in process. */
export function memorySink(): ByteSink & { text(): string } {
  const parts: Buffer[] = [];
  return {
    write(data, written) {
      parts.push(Buffer.from(typeof data === "string" ? Buffer.from(data) : Buffer.from(data)));
      written?.();
    },
    async close() {},
    text: () => Buffer.concat(parts).toString("utf8"),
  };
}
