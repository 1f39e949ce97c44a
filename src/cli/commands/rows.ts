// `callforest rows`: rollouts in, training rows (SPEC's JSONL) and one report line per rollout out.
// The work is in src/ingest (streaming reader, WASM scanner, worker threads); this module is the
// command line around it.
import { availableParallelism } from "node:os";
import { basename } from "node:path";
import { Option, type Command } from "../vendor.js";
import { WORKERS_FROM_BYTES, addTotals, inputSize, noTotals, runRows, type RunTotals } from "../../ingest/run.js";
import { withSinks } from "../../ingest/sink.js";
import { lockOutputs } from "../output-lock.js";
import { runRecordLine } from "../run-record.js";
import { makeDatasetDirs, partsOf, shardsOf, REPORTS_DIR } from "../partitions.js";
import { DEFAULT_CHUNK } from "../../ingest/batches.js";
import type { ReaderName, WriterName } from "../../ingest/process.js";
import type { MaskFormat } from "../../output/jsonl.js";
import { inputsOrStdin } from "../../formats/text.js";
import { StrictFailure, UsageError } from "../errors.js";
import {
  addInputOptions,
  checkInputs,
  checkOutputs,
  parseBackend,
  parseInteger,
  parseLayout,
  inputHelp,
  type InputOptions,
} from "../inputs.js";
import { sharesStderrTerminal, startProgress } from "../progress.js";
import { countOf } from "../../messages.js";
import { parseRowsOutput, type RowsOutput } from "../output-format.js";
import type { ByteSink } from "../../ingest/sink.js";
import type { ColumnarWriter } from "../../columnar/types.js";
import type { DirectColumns } from "../../columnar/writer.js";
import { loadFeature, loadFeatureSync } from "../../optional-dependency.js";

interface RowsOptions extends InputOptions {
  output?: string;
  outputDir?: string;
  format?: string;
  compression?: string;
  rowGroupRows?: string;
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
    .description("Plan each rollout and write its training rows (one per leaf) as JSONL, Parquet or Arrow.")
    .argument("[input...]", inputHelp(true))
    .option(
      "-o, --output <file>",
      "rows here instead of stdout; .parquet, .arrow (Arrow IPC file) and .arrows (IPC stream) choose the format. " +
        "A file is written whole when the run succeeds, and left as it was otherwise",
    )
    .option(
      "--output-dir <dir>",
      "a partitioned dataset: one file per input shard (a directory stands for its files) at DIR/<shard>.<format>, " +
        `its report at DIR/${REPORTS_DIR}/<shard>.jsonl; each written whole, so a rerun of a shard replaces only its part`,
    )
    .option("--format <format>", "jsonl (default), parquet, arrow or arrows, for stdout or a name that says none")
    .option("--compression <codec>", "Parquet compression: zstd (default), snappy or none")
    .option(
      "--row-group-rows <n>",
      "Parquet row groups / Arrow record batches of at most this many records " +
        "(default 4096; a group also ends at about 16 MB of columns)",
    )
    .option("--report <file>", "one report line per input rollout, in input order, then the run record (docs/cli.md)")
    .option(
      "--layout <layout>",
      "rows (one per leaf, SPEC's rows) or packed (the token trie: one record per trie tree, every shared token once)",
    )
    .option(
      "--capacity <tokens>",
      "packed records as bins of at most this many tokens (implies --layout packed; reports get packed_tokens)",
    )
    .option("--mask-format <format>", "loss_mask as bits (base64 bitset, SPEC) or ints (0/1 list)", "bits")
    .option("--strict", "exit 1 when any rollout was rejected")
    .option(
      "--jobs <n>",
      `worker threads planning rollouts (default: the number of cores, less one for Parquet's encoder thread; ` +
        `in-process below ${WORKERS_FROM_BYTES >> 20} MB of input, where workers cost more than they gain; ` +
        `1 = no workers; small inputs, at most one ${DEFAULT_CHUNK >> 20} MB batch, run in-process). ` +
        "Workers pay only on idle cores and input of many small rollouts: each takes about 0.15 CPU s to start, " +
        `every batch a hand-off, and a rollout longer than ${DEFAULT_CHUNK >> 20} MB is planned on the main thread ` +
        "anyway. On 2 idle cores the bench's 1 GB of mostly small rollouts ran 1.33x faster with --jobs 2; " +
        "on 2 busy cores (load 10) --jobs 2 ran 0.90x at 1 GB and 0.77x at 300 MB with two 90 MB rollouts, " +
        "using about 1.25x the CPU time of one job (docs/performance.md)",
    )
    .option(
      "--quiet",
      "no progress bar and no summary line " +
        "(rejections still go to stderr without --report, and --strict says why it exits 1)",
    )
    // The JSON.parse reader, for comparisons and benchmarks; --backend ts uses it by default.
    .addOption(new Option("--reader <name>", "scan (WASM scanner) or json (JSON.parse)").hideHelp())
    // rowToJson instead of the WASM row writer: the plain path, for benchmarks.
    .addOption(new Option("--writer <name>", "wasm (WASM row writer) or js (rowToJson)").hideHelp())
    // Small batches let tests spread a small input over many batches and workers.
    .addOption(new Option("--batch-bytes <n>", "bytes of input per batch").hideHelp());
  addInputOptions(command, { media: true }).action(async (inputs: string[], options: RowsOptions) => {
    await rows(inputs, options, command);
  });
}

function parseMaskFormat(text: string): MaskFormat {
  if (text === "bits" || text === "ints") return text;
  throw new UsageError(`unknown --mask-format '${text}': expected bits or ints`);
}

/**
 * `--jobs` at most this many times the cores (64 jobs on a 137 MB input took 2.3 GB and 17 s, 2
 * took 302 MB and 7.7 s).
 */
const MAX_JOBS_PER_CORE = 4;

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

/**
 * Column buffers `rows` keeps for reuse when it writes Parquet or Arrow IPC (see BufferRecycler):
 * row groups' buffers, once written (Arrow) or put in IPC form for the encoder (Parquet). On the
 * mix (bench/versus.ts) a larger pool spared no more first touches.
 */
const RECYCLED_COLUMN_BYTES = 32 << 20;

/**
 * The columnar writer for `output`, writing to `sink` (apache-arrow and parquet-wasm load only
 * now), and `release`, which undoes what opening it set up on this thread: call it once the writer
 * is done with, however it ended. Row groups are filled on this thread, straight from the records
 * planned here (DirectColumns) or from the blocks of worker threads, with column buffers refilled
 * rather than fresh ones touched (BufferRecycler; for this writer only: a library writer later on
 * this thread, with `rows` run in-process, must not inherit the pool). Parquet is encoded on a
 * thread of its own, beside planning; Arrow IPC costs little more than copying and stays here.
 */
async function openColumnar(
  output: RowsOutput,
  layout: "rows" | "trees" | "bins",
  sink: ByteSink,
  jobs: number,
): Promise<{ columns: ColumnarWriter & { direct: DirectColumns | null }; release: () => void }> {
  const options = {
    format: output.format as "parquet" | "arrow" | "arrows",
    layout,
    compression: output.compression,
    rowGroupRows: output.rowGroupRows,
    direct: true,
    queued: true, // the sink is a Node stream
  };
  const bytes = { write: (chunk: Uint8Array, written?: () => void) => sink.write(chunk, written) };
  // Checked here, in one line, before the encoder thread would fail on a missing package.
  const [{ ColumnarWriter }, { loadArrowBundle, parquetWasmPath }, { recycler }, { ArrowCodec }] = await loadFeature(
    "Parquet and Arrow output",
    () =>
      Promise.all([
        import("../../columnar/writer.js"),
        import("../../columnar/load-node.js"),
        import("../../columnar/buffers.js"),
        import("../../columnar/arrow.js"),
      ]),
  );
  // apache-arrow's one-file build: nothing the CLI writes leaves as apache-arrow objects.
  const arrow = new ArrowCodec(loadFeatureSync("Parquet and Arrow output", loadArrowBundle));
  let columns: ColumnarWriter & { direct: DirectColumns | null };
  if (output.format === "parquet") {
    loadFeatureSync("Parquet and Arrow output", parquetWasmPath);
    const { ThreadedColumnarWriter, PARQUET_TIERING_BUDGET } = await import("../../columnar/threaded-writer.js");
    // parquet-wasm's higher tiering budget is set process-wide while the encoder compiles it;
    // with planning workers, which compile their modules as they start, V8's own is kept.
    const tieringBudget = jobs === 1 ? PARQUET_TIERING_BUDGET : undefined;
    columns = new ThreadedColumnarWriter({ ...options, tieringBudget }, bytes, arrow);
  } else {
    columns = new ColumnarWriter(options, bytes, { arrow });
  }
  const previous = recycler.limit;
  recycler.setLimit(RECYCLED_COLUMN_BYTES);
  recycler.growInPlace = true;
  return {
    columns,
    release: () => {
      recycler.setLimit(previous);
      recycler.growInPlace = false;
    },
  };
}

/** The line that says an input had prefix breaks (SPEC's prefix_break), and where to look. */
export function breaksLine(totals: { brokenCalls: number; brokenRollouts: number }): string {
  return (
    `callforest: prefix breaks in ${countOf(totals.brokenCalls, "call")} of ` +
    `${countOf(totals.brokenRollouts, "rollout")} (a prompt that resent an earlier call's prompt ` +
    "but not its exact generation, costing a tree); `callforest explain` says why\n"
  );
}

async function rows(inputs: string[], options: RowsOptions, command: Command): Promise<void> {
  const backend = parseBackend(options.backend);
  const maskFormat = parseMaskFormat(options.maskFormat);
  const { layout, capacity } = parseLayout(options.layout, options.capacity);
  const output = parseRowsOutput({ ...options, maskFormatGiven: command.getOptionValueSource("maskFormat") === "cli" });
  // By default one thread per core, and Parquet's encoder thread counts as one (on 2 cores:
  // planning in-process beside the encoder measured faster than two planning workers beside it).
  // Each worker holds its own cores and buffers: past a few per core they only cost memory.
  const maxJobs = MAX_JOBS_PER_CORE * availableParallelism();
  const jobs =
    options.jobs === undefined
      ? Math.max(1, availableParallelism() - (output.format === "parquet" ? 1 : 0))
      : parseInteger("--jobs", options.jobs, { max: maxJobs });
  const chunk =
    options.batchBytes === undefined
      ? undefined
      : parseInteger("--batch-bytes", options.batchBytes, { max: MAX_BATCH_BYTES });
  const reader = parseReader(options.reader, backend);
  const writer = parseWriter(options.writer);
  const settings: RunSettings = { backend, maskFormat, layout, capacity, output, jobs, chunk, reader, writer };
  const totals =
    options.outputDir === undefined
      ? await rowsRun(inputs, options.output, options.report, options, settings)
      : await rowsToDataset(inputs, options.outputDir, options, settings);
  const { rollouts: total, rejected, rows: rowCount } = totals;
  if (options.report === undefined && options.quiet !== true) {
    process.stderr.write(
      `callforest: ${countOf(total, "rollout")} (${total - rejected} ok, ${rejected} rejected), ` +
        `${countOf(rowCount, layout === "rows" ? "row" : capacity === undefined ? "packed tree" : "bin")}\n`,
    );
  }
  if (totals.brokenCalls > 0 && options.quiet !== true) process.stderr.write(breaksLine(totals));
  if (options.strict && rejected > 0) throw new StrictFailure(`${rejected} of ${countOf(total, "rollout")} rejected`);
}

/** `--output-dir DIR`: a part and a report under DIR for each shard (see partitions.ts), one run after another. */
async function rowsToDataset(
  inputs: string[],
  dir: string,
  options: RowsOptions,
  settings: RunSettings,
): Promise<RunTotals> {
  if (options.output !== undefined)
    throw new UsageError("--output-dir writes one file per input shard: drop -o (or --output-dir)");
  if (options.report !== undefined)
    throw new UsageError(`--output-dir writes each shard's report under ${REPORTS_DIR}/: drop --report`);
  const parts = partsOf(shardsOf(inputs), dir, settings.output.format);
  checkInputs(
    parts.map((part) => part.input),
    options,
  );
  makeDatasetDirs(dir);
  const totals = noTotals();
  // Each part is committed (and stays) before the next starts.
  for (const part of parts) {
    const done = await rowsRun([part.input], part.output, part.report, options, settings, basename(part.output));
    addTotals(totals, done);
  }
  return totals;
}

interface RunSettings {
  backend: ReturnType<typeof parseBackend>;
  maskFormat: MaskFormat;
  layout: "rows" | "packed";
  capacity: number | undefined;
  output: RowsOutput;
  jobs: number;
  chunk: number | undefined;
  reader: ReaderName;
  writer: WriterName;
}

/**
 * One run: `inputs` planned into `rowsPath` (undefined: stdout) and `reportPath`, whose last line
 * records the run (see run-record.ts), naming the rows output `recordName`.
 */
async function rowsRun(
  inputs: string[],
  rowsPath: string | undefined,
  reportPath: string | undefined,
  options: RowsOptions,
  settings: RunSettings,
  recordName = rowsPath ?? "-",
): Promise<RunTotals> {
  const sources = inputsOrStdin(inputs);
  const read = checkInputs(sources, options);
  checkOutputs(sources, [
    ["-o", rowsPath],
    ["--report", reportPath ?? null],
  ]);
  const unlock = lockOutputs([rowsPath, reportPath]);
  try {
    return await runWithSinks(inputs, rowsPath, reportPath, options, settings, recordName, read);
  } finally {
    unlock();
  }
}

/** rowsRun's outputs opened, planned into, and put in place (see withSinks). */
function runWithSinks(
  inputs: string[],
  rowsPath: string | undefined,
  reportPath: string | undefined,
  options: RowsOptions,
  settings: RunSettings,
  recordName: string,
  read: ReturnType<typeof checkInputs>,
): Promise<RunTotals> {
  const { backend, maskFormat, layout, capacity, output, jobs, chunk, reader, writer } = settings;
  return withSinks(
    [rowsPath, reportPath ?? null],
    async ([rowsOut, reportOut]) => {
      const progress = startProgress(
        inputSize(inputs),
        options.quiet === true || sharesStderrTerminal([rowsPath, ...(reportPath === undefined ? [] : [reportPath])]),
      );
      try {
        const opened =
          output.format === "jsonl"
            ? null
            : await openColumnar(
                output,
                layout === "rows" ? "rows" : capacity === undefined ? "trees" : "bins",
                rowsOut!,
                jobs,
              );
        const columns = opened?.columns ?? null;
        try {
          const totals = await runRows(
            inputs,
            {
              reader,
              writer,
              backend,
              from: read.from,
              tokensDir: options.tokens,
              mediaTokens: read.mediaTokens,
              reward: read.reward,
              maskFormat,
              layout,
              capacity,
              notes: reportOut === null,
              jobs,
              autoJobs: options.jobs === undefined,
              chunk,
              columns: columns !== null,
            },
            {
              rows: rowsOut!,
              ...(columns === null ? {} : { columns }),
              report: reportOut,
              notes: (text) => progress.write(text), // above the bar, when there is one
              progress: (counts) => progress.update(counts),
            },
          );
          await columns?.close();
          return totals;
        } catch (error) {
          columns?.abort();
          throw error;
        } finally {
          opened?.release();
        }
      } finally {
        progress.stop();
      }
    },
    {
      record: 1,
      described: 0,
      line: (outcome, digest) => runRecordLine(recordName, outcome, digest),
    },
  );
}
