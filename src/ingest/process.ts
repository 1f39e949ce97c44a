// Plans the lines of one batch: bytes -> parsed value -> canonical rollout -> plan -> row bytes and
// one report line. The same code runs in a worker thread (--jobs N) and in-process (--jobs 1), so
// the output cannot depend on N.
import { isUtf8 } from "node:buffer";
import { init, type Callforest } from "../index.js";
import { rejectedReport, toCanonical, withDiagnostics, type ConvertResult, type FormatContext, type FromOption } from "../formats/index.js";
import { tokenDirectory } from "../formats/tokens-dir.js";
import { reportToJson, type MaskFormat } from "../output.js";
import type { BackendName, Report } from "../types.js";
import { forEachLine, type Batch } from "./batches.js";
import { rowToJson } from "../output.js";
import type { Row } from "../types.js";

// DEV STAND-IN (remove when src/ingest/scanner.ts and serialize.ts land).
class LineScanner {
  static async create(): Promise<LineScanner> {
    return new LineScanner();
  }
  scan(line: Uint8Array): { ok: true; value: unknown } | { ok: false; code: "malformed_json"; detail: string } {
    try {
      const value = JSON.parse(decode(line), (key, v) =>
        Array.isArray(v) && (key === "prompt_token_ids" || key === "generation_token_ids") && v.every((x) => Number.isInteger(x) && x >= 0 && x < 2 ** 31)
          ? Int32Array.from(v)
          : Array.isArray(v) && key === "generation_log_probs" && v.every((x) => typeof x === "number")
            ? Float32Array.from(v)
            : v,
      );
      return { ok: true, value };
    } catch (error) {
      return { ok: false, code: "malformed_json", detail: String(error) };
    }
  }
}
function serializeRow(row: Row, maskFormat: MaskFormat, emit: (chunk: Uint8Array) => void): void {
  emit(Buffer.from(rowToJson(row, maskFormat) + "\n"));
}
// END DEV STAND-IN

/** How lines are parsed: the WASM scanner (token arrays straight to typed arrays) or JSON.parse. */
export type ReaderName = "scan" | "json";

/** Everything a processor needs; plain data, so it can be posted to a worker. */
export interface IngestOptions {
  reader: ReaderName;
  backend: BackendName;
  from: FromOption;
  /** gym-observed: the `--tokens DIR`. */
  tokensDir?: string;
  maskFormat: MaskFormat;
  /** Write a one-line note per rejection (for stderr, when there is no report file). */
  notes: boolean;
}

/** Output of (part of) a batch, in input order. */
export interface Piece {
  rows: Uint8Array[];
  /** Report JSONL lines. */
  reports: string;
  /** Rejection notes for stderr. */
  notes: string;
  rollouts: number;
  rejected: number;
  rowCount: number;
  /** Input bytes finished (for progress). */
  bytes: number;
  /** The batch's last piece. */
  last: boolean;
}

export type Flush = (piece: Piece) => void | Promise<void>;

/** Lines longer than this never become JS strings (V8's limit is ~512 MB; copies double it). */
export const MAX_STRING_BYTES = 256 << 20;
/** Malformed lines up to this size get JSON.parse's own message, as on the JSON.parse path. */
const PARSE_MESSAGE_LIMIT = 16 << 20;
/** Row bytes are handed on once this much is pending. */
const FLUSH_BYTES = 1 << 20;

const SPACE = 32;
const TAB = 9;
const CR = 13;

function isBlank(bytes: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const b = bytes[i];
    if (b !== SPACE && b !== TAB && b !== CR) return false;
  }
  return true;
}

/** Offset of the first byte that breaks UTF-8 (only called once isUtf8 said no). */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i];
    const need = b < 0x80 ? 0 : b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : -1;
    if (need < 0) return i;
    if (need > 0) {
      if (i + need >= bytes.length) return i;
      const b1 = bytes[i + 1];
      const lo = b === 0xe0 ? 0xa0 : b === 0xf0 ? 0x90 : 0x80;
      const hi = b === 0xed ? 0x9f : b === 0xf4 ? 0x8f : 0xbf;
      if (b1 === undefined || b1 < lo || b1 > hi) return i;
      for (let k = 2; k <= need; k++) {
        const bk = bytes[i + k];
        if (bk === undefined || bk < 0x80 || bk > 0xbf) return i;
      }
    }
    i += need + 1;
  }
  return -1;
}

function decode(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
}

function malformed(detail: string): ConvertResult {
  return { ok: false, format: null, reason: "malformed_json", code: "malformed_json", detail, rolloutId: null };
}

function tooLarge(detail: string, rolloutId: string | null = null): ConvertResult {
  return { ok: false, format: null, reason: "rollout_too_large", code: "rollout_too_large", detail, rolloutId };
}

/** JSON.parse's message for a line that is not JSON (the same text the JSON.parse path reports). */
function parseMessage(text: string): string | null {
  try {
    JSON.parse(text);
    return null;
  } catch (error) {
    return error instanceof Error ? error.message.split("\n")[0] : String(error);
  }
}

function isOutOfMemory(error: unknown): boolean {
  return error instanceof RangeError || (typeof WebAssembly !== "undefined" && error instanceof WebAssembly.RuntimeError);
}

/** Collects row bytes into owned blocks of about FLUSH_BYTES (few messages, few writes). */
class RowBytes {
  chunks: Uint8Array[] = [];
  size = 0;
  private block: Uint8Array | null = null;
  private used = 0;

  add = (chunk: Uint8Array): void => {
    this.size += chunk.length;
    if (chunk.length >= FLUSH_BYTES >> 2) {
      this.seal();
      // Own the bytes: the serializer may reuse its chunk, and a transfer needs a whole buffer.
      this.chunks.push(chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength ? chunk : chunk.slice());
      return;
    }
    if (this.block === null || this.used + chunk.length > this.block.length) {
      this.seal();
      this.block = new Uint8Array(FLUSH_BYTES);
    }
    this.block.set(chunk, this.used);
    this.used += chunk.length;
  };

  private seal(): void {
    if (this.block !== null && this.used > 0) this.chunks.push(this.block.slice(0, this.used));
    this.block = null;
    this.used = 0;
  }

  take(): Uint8Array[] {
    this.seal();
    const out = this.chunks;
    this.chunks = [];
    this.size = 0;
    return out;
  }
}

export class LineProcessor {
  private scanner: LineScanner | null = null;
  private readonly rowBytes = new RowBytes();
  private reports = "";
  private notes = "";
  private rollouts = 0;
  private rejected = 0;
  private rowCount = 0;

  private constructor(
    private readonly cf: Callforest,
    private readonly options: IngestOptions,
  ) {}

  static async create(options: IngestOptions): Promise<LineProcessor> {
    const processor = new LineProcessor(await init({ backend: options.backend }), options);
    if (options.reader === "scan") processor.scanner = await LineScanner.create();
    return processor;
  }

  private get context(): FormatContext {
    return this.options.tokensDir === undefined ? {} : { tokens: tokenDirectory(this.options.tokensDir) };
  }

  /** Plans every line of a batch; `flush` gets the output in order, the last piece with `last`. */
  async processBatch(batch: Batch, name: string, flush: Flush): Promise<void> {
    const context = this.context;
    const lines: [number, number, number][] = [];
    forEachLine(batch, (start, end, line) => lines.push([start, end, line]));
    let done = 0;
    for (const [start, end, line] of lines) {
      if (this.scanner === null && this.options.reader === "scan") this.scanner = await LineScanner.create();
      this.processLine(batch.bytes.subarray(start, end), `${name}:${line}`, line, context);
      done = end + 1;
      if (this.rowBytes.size >= FLUSH_BYTES) await flush(this.take(Math.min(done, batch.bytes.length), false));
      else if (end - start >= FLUSH_BYTES) await flush(this.take(Math.min(done, batch.bytes.length), false));
    }
    await flush(this.take(batch.bytes.length, true));
  }

  private bytesDone = 0;

  private take(upTo: number, last: boolean): Piece {
    const piece: Piece = {
      rows: this.rowBytes.take(),
      reports: this.reports,
      notes: this.notes,
      rollouts: this.rollouts,
      rejected: this.rejected,
      rowCount: this.rowCount,
      bytes: upTo - this.bytesDone,
      last,
    };
    this.reports = "";
    this.notes = "";
    this.rollouts = this.rejected = this.rowCount = 0;
    this.bytesDone = last ? 0 : upTo;
    return piece;
  }

  /** One input line (without its `\n`); blank lines are skipped (no report, line numbers kept). */
  private processLine(bytes: Uint8Array, where: string, line: number, context: FormatContext): void {
    if (isBlank(bytes, 0, bytes.length)) return;
    let result: ConvertResult;
    let value: unknown;
    if (!isUtf8(bytes)) {
      result = malformed(`not JSON (invalid UTF-8 at byte ${firstInvalidUtf8(bytes)} of the line)`);
    } else if (this.scanner !== null) {
      let scanned: ReturnType<LineScanner["scan"]>;
      try {
        scanned = this.scanner.scan(bytes);
      } catch (error) {
        if (!isOutOfMemory(error)) throw error;
        this.scanner = null; // a trapped instance is not reused
        scanned = { ok: false, code: "rollout_too_large", detail: `the line does not fit in the scanner's memory (${(error as Error).message})` } as never;
      }
      if (scanned.ok) {
        value = scanned.value;
        result = this.convert(value, context);
      } else if ((scanned as { code: string }).code === "rollout_too_large") {
        result = tooLarge((scanned as { detail: string }).detail);
      } else {
        const message = bytes.length <= PARSE_MESSAGE_LIMIT ? parseMessage(decode(bytes)) : null;
        result = malformed(`not JSON (${message ?? scanned.detail})`);
      }
    } else if (bytes.length > MAX_STRING_BYTES) {
      result = tooLarge(`the line has ${bytes.length} bytes, more than the JSON.parse reader takes (${MAX_STRING_BYTES >> 20} MB); use the wasm backend`);
    } else {
      const text = decode(bytes);
      try {
        value = JSON.parse(text);
        result = this.convert(value, context);
      } catch (error) {
        result = malformed(`not JSON (${error instanceof Error ? error.message.split("\n")[0] : String(error)})`);
      }
    }
    this.finish(result, where, line);
  }

  private convert(value: unknown, context: FormatContext): ConvertResult {
    return toCanonical(value, this.options.from, context);
  }

  /** Plans a converted value and records its rows, report and note. */
  finish(result: ConvertResult, where: string, line: number | undefined): void {
    this.rollouts++;
    let report: Report;
    if (result.ok) {
      const plan = this.cf.plan(result.rollout, line === undefined ? {} : { line });
      try {
        for (const row of plan.rows) serializeRow(row, this.options.maskFormat, this.rowBytes.add);
        this.rowCount += plan.rows.length;
      } finally {
        plan.release();
      }
      report = withDiagnostics(plan.report, result.diagnostics);
    } else {
      report = rejectedReport(result, line);
    }
    if (report.status === "rejected") {
      this.rejected++;
      if (this.options.notes) this.notes += `${where}: rejected (${report.reason}): ${report.detail}\n`;
    }
    this.reports += reportToJson(report) + "\n";
  }

  /** Output of values given through finish() (the .json files), as one last piece. */
  takeAll(bytes: number): Piece {
    this.bytesDone = 0;
    return this.take(bytes, true);
  }
}
