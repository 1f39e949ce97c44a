// One process of bench/floor.ts: `rows --jobs 1`'s in-process pipeline on one JSONL file, run
// only up to `stage`, from the same library pieces the CLI uses (the batch reader, the scanner —
// which scans a long line as it is read — the format import, plan(), the row writer).
// Prints `FLOOR <seconds> <cpu seconds>` from module start to the end of the work.
//   node build/bench-out/bench/floor-stages.js <load|read|scan|plan|format> <file.jsonl>
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type * as Api from "../src/index.js";
import type * as Formats from "../src/formats/index.js";
import type * as PlanImported from "../src/plan-imported.js";
import type * as Batches from "../src/ingest/batches.js";
import type * as Scanner from "../src/ingest/scanner.js";
import type { LineStream, ScannedLine } from "../src/ingest/scanner.js";
import type * as Serialize from "../src/ingest/serialize.js";
import { STAGES, type Stage } from "./floor-stage-names.js";
import { root } from "./rows-process.js";

/** The package's built module (dist/), as the CLI runs it. */
const built = <T>(module: string): Promise<T> => import(pathToFileURL(join(root(), "dist", module)).href) as Promise<T>;
const { init } = await built<typeof Api>("index.js");
const { toCanonical } = await built<typeof Formats>("formats/index.js");
const { usePlan } = await built<typeof PlanImported>("plan-imported.js");
const { BufferPool, DEFAULT_CHUNK, batchBuffers, fileSource, forEachLine, lineParts, readBatches } =
  await built<typeof Batches>("ingest/batches.js");
const { LineScanner, SCANNER_MAX_LINE_BYTES } = await built<typeof Scanner>("ingest/scanner.js");
const { RowSerializer } = await built<typeof Serialize>("ingest/serialize.js");

const started = process.hrtime.bigint();
const cpuStarted = process.cpuUsage();
const [stage, path] = process.argv.slice(2) as [Stage, string];
const upTo = STAGES.indexOf(stage);
if (upTo < 0 || path === undefined) throw new Error(`usage: floor-stages.js <${STAGES.join("|")}> <file.jsonl>`);

const cf = await init({ backend: "wasm" });
const serializer = await RowSerializer.create();
const scanner = await LineScanner.create();
// Row bytes land in one reused block, as LineProcessor's RowBytes copies each chunk into its own.
const block = new Uint8Array(1 << 20);
let used = 0;
const keep = (chunk: Uint8Array) => {
  if (used + chunk.length > block.length) used = 0;
  block.set(chunk.subarray(0, Math.min(chunk.length, block.length)), used);
  used += chunk.length;
};
let rows = 0;

function handle(scanned: ScannedLine): void {
  if (!scanned.ok) throw new Error(`a line did not scan: ${scanned.code}`);
  if (upTo < STAGES.indexOf("plan")) return;
  const converted = toCanonical(scanned.value, "auto");
  if (!converted.ok) throw new Error(`a line did not convert: ${converted.detail}`);
  usePlan(cf, converted, undefined, (plan) => {
    rows += plan.rows.length;
    if (upTo >= STAGES.indexOf("format")) for (const row of plan.rows) serializer.writeRow(row, "bits", keep);
  });
}

const scanning = upTo >= STAGES.indexOf("scan");
// As `rows` reads in-process: the next batch is read while one is planned, and a long line goes
// to the scanner once every batch before it is done, scanned as it is read (window mode). The
// read stage reads it the same way, piece by piece into one reused region, and scans nothing.
let done = 0;
const waiting: { index: number; resolve: () => void }[] = [];
let streamed: LineStream | null = null;
const region = new Uint8Array(8 << 20);
const readOnly = {
  space: (length: number) => region.subarray(0, Math.min(length, region.length)),
  scanned: () => true,
  finish: () => true,
};
const longLines = async (index: number) => {
  if (done < index) await new Promise<void>((resolve) => waiting.push({ index, resolve }));
  return {
    room: (length: number) => scanner.inputBuffer(length),
    stream: () => (scanning ? (streamed = scanner.streamLine()) : readOnly),
  };
};
const step = () => {
  done++;
  for (const wait of waiting.splice(0))
    if (wait.index <= done) wait.resolve();
    else waiting.push(wait);
};
if (upTo >= STAGES.indexOf("read")) {
  const pool = new BufferPool(DEFAULT_CHUNK);
  const batches = readBatches(await fileSource(path), pool, SCANNER_MAX_LINE_BYTES, longLines);
  let next = batches.next();
  for (;;) {
    const current = await next;
    if (current.done) break;
    next = batches.next();
    const batch = current.value;
    if (scanning) {
      if (batch.placed?.streamed) handle(streamed!.value);
      else if (batch.placed !== undefined) handle(scanner.scanInput(batch.placed.bytes));
      else if (batch.parts !== undefined) handle(scanner.scan(lineParts(batch)));
      else forEachLine(batch, (start, end) => end > start && handle(scanner.scan(batch.bytes.subarray(start, end))));
    }
    for (const buffer of batchBuffers(batch)) pool.give(buffer); // reused, as `rows` does
    step();
  }
}

const seconds = Number(process.hrtime.bigint() - started) / 1e9;
const cpu = process.cpuUsage(cpuStarted);
process.stdout.write(`FLOOR ${seconds} ${(cpu.user + cpu.system) / 1e6} ${rows}\n`);
