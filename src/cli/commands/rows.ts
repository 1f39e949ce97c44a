// `callforest rows`: rollouts in, training rows (SPEC's JSONL) and one report line per rollout out.
// The work is in src/ingest (streaming reader, WASM scanner, worker threads); this module is the
// command line around it.
import { availableParallelism } from "node:os";
import { Option, type Command } from "commander";
import { inputSize, runRows } from "../../ingest/run.js";
import { withSinks } from "../../ingest/sink.js";
import { DEFAULT_CHUNK } from "../../ingest/batches.js";
import type { ReaderName, WriterName } from "../../ingest/process.js";
import type { MaskFormat } from "../../output.js";
import { inputsOrStdin } from "../../formats/text.js";
import { StrictFailure, UsageError } from "../errors.js";
import { addInputOptions, checkInputs, checkOutputs, parseBackend, parseInteger, inputHelp, type InputOptions } from "../inputs.js";
import { sharesStderrTerminal, startProgress } from "../progress.js";
import { countOf } from "../../rejection.js";

interface RowsOptions extends InputOptions {
  output?: string;
  report?: string;
  strict?: boolean;
  maskFormat: string;
  jobs?: string;
  quiet?: boolean;
  reader?: string;
  writer?: string;
  batchBytes?: string;
  layout?: string;
  capacity?: string;
}

export function register(program: Command): void {
  const command = program
    .command("rows")
    .description("Plan each rollout and write its training rows (one per leaf) as JSONL.")
    .argument("[input...]", inputHelp(true))
    .option("-o, --output <file>", "rows JSONL here instead of stdout")
    .option("--report <file>", "one report line per input rollout, in input order")
    .option("--layout <layout>", "rows (one per leaf, SPEC's rows) or packed (one record per tree, every token once)")
    .option("--capacity <tokens>", "packed records as bins of at most this many tokens (implies --layout packed; reports get packed_tokens)")
    .option("--mask-format <format>", "loss_mask as bits (base64 bitset, SPEC) or ints (0/1 list)", "bits")
    .option("--strict", "exit 1 when any rollout was rejected")
    .option("--jobs <n>", `worker threads planning rollouts (default: the number of cores; 1 = no workers; small inputs, at most one ${DEFAULT_CHUNK >> 20} MB batch, run in-process)`)
    .option("--quiet", "no progress bar and no summary line (rejections still go to stderr without --report, and --strict says why it exits 1)")
    // The JSON.parse reader, for comparisons and benchmarks; --backend ts uses it by default.
    .addOption(new Option("--reader <name>", "scan (WASM scanner) or json (JSON.parse)").hideHelp())
    // rowToJson instead of the WASM row writer: the plain path, for benchmarks.
    .addOption(new Option("--writer <name>", "wasm (WASM row writer) or js (rowToJson)").hideHelp())
    // Small batches let tests spread a small input over many batches and workers.
    .addOption(new Option("--batch-bytes <n>", "bytes of input per batch").hideHelp());
  addInputOptions(command, { media: true }).action(async (inputs: string[], options: RowsOptions) => {
    await rows(inputs, options);
  });
}

/** --layout and --capacity: what the rows output holds. */
function parseLayout(layout: string | undefined, capacity: string | undefined): { layout: "rows" | "packed"; capacity?: number } {
  if (layout !== undefined && layout !== "rows" && layout !== "packed") throw new UsageError(`unknown --layout '${layout}': expected rows or packed`);
  if (capacity === undefined) return { layout: layout ?? "rows" };
  if (layout === "rows") throw new UsageError("--capacity lays out bins of packed records: it needs --layout packed, not rows");
  return { layout: "packed", capacity: parseInteger("--capacity", capacity, { max: 2 ** 31 - 1 }) };
}

function parseMaskFormat(text: string): MaskFormat {
  if (text === "bits" || text === "ints") return text;
  throw new UsageError(`unknown --mask-format '${text}': expected bits or ints`);
}

/** Batch buffers are allocated whole: more than this is not a batch size but a mistake. */
const MAX_BATCH_BYTES = 1 << 30;

function parseWriter(text: string | undefined): WriterName {
  if (text === undefined || text === "wasm" || text === "js") return text ?? "wasm";
  throw new UsageError(`unknown --writer '${text}': expected wasm or js`);
}

function parseReader(text: string | undefined, backend: string): ReaderName {
  if (text === undefined) return backend === "ts" ? "json" : "scan";
  if (text === "scan" || text === "json") return text;
  throw new UsageError(`unknown --reader '${text}': expected scan or json`);
}

async function rows(inputs: string[], options: RowsOptions): Promise<void> {
  const backend = parseBackend(options.backend);
  const maskFormat = parseMaskFormat(options.maskFormat);
  const { layout, capacity } = parseLayout(options.layout, options.capacity);
  const jobs = options.jobs === undefined ? availableParallelism() : parseInteger("--jobs", options.jobs);
  const chunk = options.batchBytes === undefined ? undefined : parseInteger("--batch-bytes", options.batchBytes, { max: MAX_BATCH_BYTES });
  const reader = parseReader(options.reader, backend);
  const writer = parseWriter(options.writer);
  const sources = inputsOrStdin(inputs);
  const read = checkInputs(sources, options);
  checkOutputs(sources, [["-o", options.output], ["--report", options.report ?? null]]);
  const totals = await withSinks([options.output, options.report ?? null], async ([rowsOut, reportOut]) => {
    const progress = startProgress(inputSize(inputs), options.quiet === true || sharesStderrTerminal([options.output, ...(options.report === undefined ? [] : [options.report])]));
    try {
      return await runRows(
        inputs,
        { reader, writer, backend, from: read.from, tokensDir: options.tokens, mediaTokens: read.mediaTokens, maskFormat, layout, capacity, notes: reportOut === null, jobs, chunk },
        {
          rows: rowsOut!,
          report: reportOut,
          notes: (text) => progress.write(text), // above the bar, when there is one
          progress: (counts) => progress.update(counts),
        },
      );
    } finally {
      progress.stop();
    }
  });
  const { rollouts: total, rejected, rows: rowCount } = totals;
  if (options.report === undefined && options.quiet !== true) {
    process.stderr.write(`callforest: ${countOf(total, "rollout")} (${total - rejected} ok, ${rejected} rejected), ${countOf(rowCount, "row")}\n`);
  }
  if (options.strict && rejected > 0) throw new StrictFailure(`${rejected} of ${countOf(total, "rollout")} rejected`);
}
