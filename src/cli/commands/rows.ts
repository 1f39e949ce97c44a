// `callforest rows`: rollouts in, training rows (SPEC's JSONL) and one report line per rollout out.
import type { Command } from "commander";
import { init } from "../../index.js";
import { readRollouts } from "../../formats/read.js";
import { rejectedReport, withDiagnostics } from "../../formats/index.js";
import { reportToJson, rowToJson, type MaskFormat } from "../../output.js";
import type { Report } from "../../types.js";
import { StrictFailure, UsageError } from "../errors.js";
import { addInputOptions, checkInputs, parseBackend, type InputOptions } from "../inputs.js";
import { openSink } from "../sink.js";

interface RowsOptions extends InputOptions {
  output?: string;
  report?: string;
  strict?: boolean;
  maskFormat: string;
}

export function register(program: Command): void {
  const command = program
    .command("rows")
    .description("Plan each rollout and write its training rows (one per leaf) as JSONL.")
    .argument("[input...]", ".jsonl (one rollout a line), .json (one rollout), or - for stdin (default)")
    .option("-o, --output <file>", "rows JSONL here instead of stdout")
    .option("--report <file>", "one report line per input rollout, in input order")
    .option("--mask-format <format>", "loss_mask as bits (base64 bitset, SPEC) or ints (0/1 list)", "bits")
    .option("--strict", "exit 1 when any rollout was rejected");
  addInputOptions(command).action(async (inputs: string[], options: RowsOptions) => {
    await rows(inputs, options);
  });
}

function parseMaskFormat(text: string): MaskFormat {
  if (text === "bits" || text === "ints") return text;
  throw new UsageError(`unknown --mask-format '${text}': expected bits or ints`);
}

async function rows(inputs: string[], options: RowsOptions): Promise<void> {
  const backend = parseBackend(options.backend);
  const maskFormat = parseMaskFormat(options.maskFormat);
  const read = checkInputs(inputs, options);
  const cf = await init({ backend });
  const rowsOut = openSink(options.output);
  const reportOut = options.report === undefined ? null : openSink(options.report);
  let total = 0;
  let rejected = 0;
  let rowCount = 0;
  try {
    for await (const item of readRollouts(inputs, read)) {
      total++;
      let report: Report;
      if (item.result.ok) {
        const plan = cf.plan(item.result.rollout, { line: item.line });
        try {
          for (const row of plan.rows) await rowsOut.write(rowToJson(row, maskFormat) + "\n");
        } finally {
          plan.release();
        }
        rowCount += plan.rows.length;
        report = withDiagnostics(plan.report, item.result.diagnostics);
      } else {
        report = rejectedReport(item.result, item.line);
      }
      if (report.status === "rejected") {
        rejected++;
        // Without a report file, rejections still get their one line on stderr.
        if (reportOut === null) process.stderr.write(`${item.where}: rejected (${report.reason}): ${report.detail}\n`);
      }
      if (reportOut !== null) await reportOut.write(reportToJson(report) + "\n");
    }
  } finally {
    await rowsOut.close();
    await reportOut?.close();
  }
  if (reportOut === null) {
    process.stderr.write(`callforest: ${total} rollouts (${total - rejected} ok, ${rejected} rejected), ${rowCount} rows\n`);
  }
  if (options.strict && rejected > 0) throw new StrictFailure(`${rejected} of ${total} rollouts rejected`);
}
