// Plans the lines of one batch: bytes -> parsed value -> canonical rollout -> plan -> row bytes and
// one report line. The same code runs in a worker thread (--jobs N) and in-process (--jobs 1), so
// the output cannot depend on N.
import { isUtf8 } from "node:buffer";
import { init, type Callforest } from "../index.js";
import { toCanonical, type ConvertResult, type FormatContext, type FromOption } from "../formats/index.js";
import { reportOfImportRejection, usePlan } from "../plan-imported.js";
import { MAX_STRING_BYTES, isBlankLine, malformedJson, notJsonDetail, parseValue, tooLarge } from "../formats/text.js";
import { tokenDirectory } from "../files/tokens-dir.js";
import { besideInput } from "./beside.js";
import { isOutOfMemory } from "../plan/assembler.js";
import { KEPT_MEMORY_MAX_BYTES } from "../core/types.js";
import { errorLine, rejectionLine } from "../messages.js";
import { packedToJson, reportToJson, rowToJson, type MaskFormat } from "../output/jsonl.js";
import type { BackendName, PackedBin, PackedTree, PlanOptions, Report, Row } from "../types.js";
import {
  batchLength,
  forEachLine,
  joinParts,
  lineLength,
  lineParts,
  type Batch,
  type LongLinePlace,
  type PlacedLine,
} from "./batches.js";
import {
  LineScanner,
  type LineStream,
  type StreamWindow,
  SCANNER_MAX_LINE_BYTES,
  streamWindow,
  linePastScannerDetail,
  type ScannedLine,
} from "./scanner.js";
import { RowSerializer } from "./serialize.js";
import { RecordColumns, type ColumnBlock } from "../columnar/columns.js";
import type { DirectColumns } from "../columnar/writer.js";

/** How lines are parsed: the WASM scanner (token arrays straight to typed arrays) or JSON.parse. */
export type ReaderName = "scan" | "json";

/** How rows become bytes: the WASM row writer, or rowToJson (the plain path, for comparisons). */
export type WriterName = "wasm" | "js";

/** Everything a processor needs; plain data, so it can be posted to a worker. */
export interface IngestOptions {
  reader: ReaderName;
  /** Default "wasm". */
  writer?: WriterName;
  backend: BackendName;
  from: FromOption;
  /** gym-observed: the `--tokens DIR`. */
  tokensDir?: string;
  /** gym-compaction: the `--media-token` ids (see FormatContext.mediaTokens). */
  mediaTokens?: readonly number[];
  /** atif: `--reward` (see FormatContext.reward). */
  reward?: number;
  maskFormat: MaskFormat;
  /** What to write: rows (default), or packed records (trees; bins with `capacity`). */
  layout?: "rows" | "packed";
  /** Bins of at most this many tokens (with layout "packed"); reports get packed_tokens. */
  capacity?: number;
  /** Write a one-line note per rejection (for stderr, when there is no report file). */
  notes: boolean;
  /** Columnar output: records go out as column blocks (Piece.columns), not JSONL bytes. */
  columns?: boolean;
  /**
   * With `scan`, a long line of a file is scanned as it is read, through a region of the
   * scanner's memory that is reused (LineScanner.streamLine): the region's sizes (default
   * streamWindow() of the batch size; others are for tests), or `false` to read each long line
   * whole first.
   */
  window?: StreamWindow | false;
}

/** Output of (part of) a batch, in input order. */
export interface Piece {
  rows: Uint8Array[];
  /** With `columns`: the piece's records as columns (none when it has no records). */
  columns?: ColumnBlock;
  /** Report JSONL lines. */
  reports: string;
  /** Rejection notes for stderr. */
  notes: string;
  rollouts: number;
  rejected: number;
  rowCount: number;
  /** Calls with SPEC's prefix_break, and the rollouts that have any. */
  brokenCalls: number;
  brokenRollouts: number;
  /** Input bytes finished (for progress). */
  bytes: number;
  /** The batch's last piece. */
  last: boolean;
}

export type Flush = (piece: Piece) => void | Promise<void>;

const ENCODER = new TextEncoder();

/** Calls of a report with SPEC's prefix_break. */
function countBreaks(report: Report): number {
  let n = 0;
  for (const d of report.diagnostics) if (d.code === "prefix_break") n++;
  return n;
}

/** The longest line `reader` could ever read: readBatches drops longer ones unread (see Batch.dropped). */
export function maxLineBytes(reader: ReaderName): number {
  return reader === "scan" ? SCANNER_MAX_LINE_BYTES : MAX_STRING_BYTES;
}

/** Rejected lines up to this size are read a second time, by JSON.parse, for their detail (see processLine). */
const EXACT_AGAIN_BYTES = 1 << 20;
/** Row bytes are handed on once this much is pending. */
const FLUSH_BYTES = 1 << 20;
/** Written row blocks kept for reuse. */
const MAX_SPARE_BLOCKS = 64;

function decode(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
}

/** Why a line of `bytes` was not read by the JSON.parse reader. */
function pastJsonReaderDetail(bytes: number): string {
  return (
    `the line has ${bytes} bytes, more than the JSON.parse reader takes (${MAX_STRING_BYTES >> 20} MB); ` +
    `the WASM scanner (--backend wasm) reads lines of up to 4 GiB`
  );
}

/**
 * Collects row bytes into blocks of FLUSH_BYTES (few messages, few writes). Blocks come back
 * through giveBlock() once written, so a long run reuses a few instead of allocating (and
 * garbage-collecting) fresh memory for every megabyte of output.
 */
class RowBytes {
  chunks: Uint8Array[] = [];
  size = 0;
  private block: Uint8Array | null = null;
  private used = 0;
  private readonly spare: ArrayBuffer[] = [];

  /** Copies `chunk` in: it is valid only during the call (RowSerializer's emit contract). */
  add = (chunk: Uint8Array): void => {
    this.size += chunk.length;
    if (chunk.length > FLUSH_BYTES) {
      this.seal();
      // Own the bytes: the serializer may reuse its chunk, and a transfer needs a whole buffer.
      this.chunks.push(chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength ? chunk : chunk.slice());
      return;
    }
    if (this.block === null || this.used + chunk.length > this.block.length) {
      this.seal();
      const spare = this.spare.pop();
      this.block = new Uint8Array(spare ?? Buffer.allocUnsafeSlow(FLUSH_BYTES).buffer, 0, FLUSH_BYTES);
    }
    this.block.set(chunk, this.used);
    this.used += chunk.length;
  };

  /** A written block, back for reuse. */
  giveBlock(buffer: ArrayBuffer): void {
    if (buffer.byteLength === FLUSH_BYTES && this.spare.length < MAX_SPARE_BLOCKS) this.spare.push(buffer);
  }

  private seal(): void {
    // The block leaves whole (a transfer moves its entire buffer); no copy.
    if (this.block !== null && this.used > 0) this.chunks.push(this.block.subarray(0, this.used));
    this.block = null;
    this.used = 0;
  }

  /** Where the output stands, to undo one rollout's rows if it fails half-way. */
  mark(): { chunks: number; block: Uint8Array | null; used: number; size: number } {
    return { chunks: this.chunks.length, block: this.block, used: this.used, size: this.size };
  }

  /** Back to `mark`: bytes before it are untouched (blocks are only appended to). */
  rollback(mark: ReturnType<RowBytes["mark"]>): void {
    this.chunks.length = mark.chunks;
    this.block = mark.block;
    this.used = mark.used;
    this.size = mark.size;
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
  /** The long line the scanner is reading in window mode (see longLineRoom), or read last. */
  private streamed: LineStream | null = null;
  /** A scanner a line grew past this is replaced before the next line (see KEPT_MEMORY_MAX_BYTES). */
  private readonly keepScannerBytes = KEPT_MEMORY_MAX_BYTES;
  private readonly rowBytes = new RowBytes();
  /** With `columns`: the records since the last piece (none with `direct`). */
  private readonly columns: RecordColumns | null;
  /** With `columns` on the writer's own thread: the writer's groups, filled in place. */
  private readonly direct: DirectColumns | null;
  /** What each rollout becomes (--layout, --capacity), and the plan options that make it. */
  private readonly kind: "rows" | "trees" | "bins";
  private readonly planOptions: Omit<PlanOptions, "line">;
  private reports = "";
  private notes = "";
  private rollouts = 0;
  private rejected = 0;
  private brokenCalls = 0;
  private brokenRollouts = 0;
  private rowCount = 0;
  private bytesDone = 0;
  /** Where gym-observed token entries come from (`--tokens DIR`) and the `--media-token` ids, for every reader. */
  readonly context: FormatContext;
  /** The context of the input being read: `context` and the trajectory files beside it (atif). */
  private inputContext: { name: string; context: FormatContext } | null = null;

  private constructor(
    private readonly cf: Callforest,
    private readonly serializer: RowSerializer,
    private readonly options: IngestOptions,
    direct: DirectColumns | null,
  ) {
    this.kind = options.layout !== "packed" ? "rows" : options.capacity === undefined ? "trees" : "bins";
    this.planOptions =
      this.kind === "rows" ? {} : this.kind === "trees" ? { trees: true } : { capacity: options.capacity };
    this.direct = options.columns ? direct : null;
    this.columns = options.columns && this.direct === null ? new RecordColumns(this.kind) : null;
    this.context = {
      ...(options.tokensDir === undefined ? {} : { tokens: tokenDirectory(options.tokensDir) }),
      ...(options.mediaTokens === undefined ? {} : { mediaTokens: options.mediaTokens }),
      ...(options.reward === undefined ? {} : { reward: options.reward }),
    };
  }

  /** The context for the lines of input `name` (a JSONL file: no trial reward, see besideInput). */
  private contextOf(name: string): FormatContext {
    if (this.inputContext?.name !== name)
      this.inputContext = { name, context: besideInput(name, this.context, { oneValue: false }) };
    return this.inputContext.context;
  }

  /**
   * Its own instances: the core (per `backend`), the row writer and, for `scan`, the scanner.
   * With `direct` (columnar output written on this thread), records go straight into the
   * writer's groups, and pieces carry no columns: the writer's drain() writes them.
   */
  static async create(options: IngestOptions, direct: DirectColumns | null = null): Promise<LineProcessor> {
    const [cf, serializer] = await Promise.all([init({ backend: options.backend }), RowSerializer.create()]);
    const processor = new LineProcessor(cf, serializer, options, direct);
    if (options.reader === "scan") processor.scanner = await LineScanner.create();
    return processor;
  }

  /** Plans every line of a batch; `flush` gets the output in order, the last piece with `last`. */
  async processBatch(batch: Batch, name: string, flush: Flush): Promise<void> {
    this.contextOf(name);
    if (batch.dropped !== undefined) {
      // Too long for this reader: rejected as it would be if it had been kept (blank: skipped).
      const { bytes, blank } = batch.dropped;
      if (!blank)
        this.record(
          tooLarge(this.options.reader === "scan" ? linePastScannerDetail(bytes) : pastJsonReaderDetail(bytes)),
          `${name}:${batch.firstLine}`,
          batch.firstLine,
        );
      await flush(this.take(batchLength(batch), true));
      return;
    }
    if (batch.placed !== undefined) {
      // One long line, read straight into the scanner's input buffer (see longLineRoom).
      this.processLine(batch.placed, `${name}:${batch.firstLine}`, batch.firstLine);
      await flush(this.take(batchLength(batch), true));
      return;
    }
    if (batch.parts !== undefined) {
      // One long line, still in the chunks it was read into (the scanner copies them in).
      await this.ensureScanner();
      this.processLine(lineParts(batch), `${name}:${batch.firstLine}`, batch.firstLine);
      await flush(this.take(batchLength(batch), true));
      return;
    }
    const lines: number[] = [];
    forEachLine(batch, (start, end, line) => lines.push(start, end, line));
    for (let i = 0; i < lines.length; i += 3) {
      const [start, end, line] = [lines[i], lines[i + 1], lines[i + 2]];
      if (this.scanner === null) await this.ensureScanner(); // no await per line otherwise
      this.processLine(batch.bytes.subarray(start, end), `${name}:${line}`, line);
      // Hand on output as it grows (a huge rollout's rows, or many small ones).
      if (this.rowBytes.size >= FLUSH_BYTES || (this.columns?.bytes ?? this.direct?.bytes ?? 0) >= FLUSH_BYTES)
        await flush(this.take(Math.min(end + 1, batch.bytes.length), false));
    }
    await flush(this.take(batch.bytes.length, true));
  }

  /**
   * For `scan`: where readBatches may read a long line (see LongLines) — the scanner's own input
   * buffer, so the line is neither held in batch buffers nor copied. The next batch planned must
   * be that line's (the buffer holds one line at a time). Null for the JSON.parse reader.
   */
  async longLineRoom(): Promise<LongLinePlace | null> {
    if (this.options.reader !== "scan") return null;
    await this.ensureScanner();
    const scanner = this.scanner!;
    return {
      room: (length) => (this.scanner === scanner ? scanner.inputBuffer(length) : null),
      stream: (pieceBytes) => {
        const window = this.options.window ?? streamWindow(pieceBytes);
        if (window === false || this.scanner !== scanner) return null;
        return (this.streamed = scanner.streamLine(window));
      },
      again: EXACT_AGAIN_BYTES, // see processLine
    };
  }

  /** For `scan`: a scanner again once the last one was dropped (out of memory, or grown past keepScannerBytes). */
  private async ensureScanner(): Promise<void> {
    if (this.scanner === null && this.options.reader === "scan") this.scanner = await LineScanner.create();
  }

  private take(upTo: number, last: boolean): Piece {
    const piece: Piece = {
      rows: this.rowBytes.take(),
      ...(this.columns !== null && this.columns.length > 0 ? { columns: this.columns.finish() } : {}),
      reports: this.reports,
      notes: this.notes,
      rollouts: this.rollouts,
      rejected: this.rejected,
      rowCount: this.rowCount,
      brokenCalls: this.brokenCalls,
      brokenRollouts: this.brokenRollouts,
      bytes: upTo - this.bytesDone,
      last,
    };
    this.reports = "";
    this.notes = "";
    this.rollouts = this.rejected = this.rowCount = this.brokenCalls = this.brokenRollouts = 0;
    this.bytesDone = last ? 0 : upTo;
    return piece;
  }

  /**
   * One input line without its `\n` (a long one in parts); blank lines are skipped (no report,
   * line numbers kept).
   */
  private processLine(line: Uint8Array | Uint8Array[] | PlacedLine, where: string, number: number): void {
    // The line's bytes (none for a long line scanned as it was read), and how to read it.
    let bytes: Uint8Array | Uint8Array[] | undefined;
    let parse: () => ConvertResult;
    if (line instanceof Uint8Array || Array.isArray(line)) {
      bytes = line;
      parse = () => this.parse(line);
    } else if (line.streamed) {
      // Scanned as it was read (longLineRoom's stream): JSON, so never blank.
      const streamed = this.streamed!;
      this.streamed = null;
      bytes = line.text;
      parse = () => this.scanned(() => streamed.value);
    } else {
      // In the scanner already (longLineRoom); a copy only of a line short enough to read again.
      const placed = this.scanner!.inputBuffer(line.bytes)!;
      bytes = placed.length <= EXACT_AGAIN_BYTES ? placed.slice() : placed;
      parse = () => this.parsePlaced(line.bytes);
    }
    if (
      bytes !== undefined &&
      (bytes instanceof Uint8Array ? isBlankLine(bytes) : bytes.every((part) => isBlankLine(part)))
    )
      return;
    // A rejection's detail may quote a value holding token arrays, which the scanner made typed
    // arrays (a logprob shown rounded to float32): a small rejected line is read again as
    // JSON.parse does, for the exact words. A big one is not (that would undo bounded memory).
    const again =
      this.scanner !== null && bytes !== undefined && lineLength(bytes) <= EXACT_AGAIN_BYTES ? bytes : undefined;
    let result: ConvertResult;
    try {
      result = parse();
    } catch (error) {
      if (!isOutOfMemory(error)) throw error;
      result = tooLarge(`the line does not fit in memory (${errorLine(error)})`);
    }
    this.record(result, where, number, again);
    if (this.scanner !== null && this.scanner.memoryBytes > this.keepScannerBytes) this.scanner = null;
  }

  /** A line of `length` bytes in the scanner's input buffer to a canonical rollout or a rejection. */
  private parsePlaced(length: number): ConvertResult {
    return this.scanned(() => this.scanner!.scanInput(length));
  }

  /** Bytes to a canonical rollout or a rejection, on the chosen reader. */
  private parse(line: Uint8Array | Uint8Array[]): ConvertResult {
    if (this.scanner !== null) {
      const scanner = this.scanner;
      return this.scanned(() => scanner.scan(line));
    }
    return this.parseJson(line);
  }

  /** What the scanner made of a line (`scan` scans it) as a canonical rollout or a rejection. */
  private scanned(scan: () => ScannedLine): ConvertResult {
    let scanned: ScannedLine;
    try {
      scanned = scan();
    } catch (error) {
      if (!isOutOfMemory(error)) throw error;
      this.scanner = null; // an instance that failed half-way is not reused
      return tooLarge(`the line does not fit in the scanner's memory (${errorLine(error)})`);
    }
    if (scanned.ok) return toCanonical(scanned.value, this.options.from, this.inputContext?.context ?? this.context);
    if (scanned.code === "rollout_too_large") {
      // Its memory grew as far as it could and can never shrink: the next line gets a fresh one.
      this.scanner = null;
      return tooLarge(scanned.detail);
    }
    return malformedJson(scanned.detail);
  }

  /** The JSON.parse reader: bytes to a canonical rollout or a rejection. */
  private parseJson(line: Uint8Array | Uint8Array[]): ConvertResult {
    const length = lineLength(line);
    if (length > MAX_STRING_BYTES) return tooLarge(pastJsonReaderDetail(length));
    const bytes = line instanceof Uint8Array ? line : joinParts(line);
    // JSON text is UTF-8 (RFC 8259). The scanner checks it itself (strictly, like a fatal
    // TextDecoder); JSON.parse of a decoded string would see bad bytes silently replaced. Node's
    // check and decode are faster than parseValue's TextDecoder (~20% on an 80 MB line).
    if (!isUtf8(bytes)) return malformedJson(notJsonDetail(bytes, () => "invalid UTF-8"));
    return parseValue({ text: decode(bytes), bytes }, this.options.from, this.inputContext?.context ?? this.context);
  }

  /**
   * Plans a converted value and records its rows, report and note. `rereadable`, when given, is
   * the line's bytes: a rejection then takes its detail from reading them again with JSON.parse.
   */
  record(result: ConvertResult, where: string, line: number | undefined, rereadable?: Uint8Array | Uint8Array[]): void {
    this.rollouts++;
    let report = this.plan(result, line);
    if (
      report.status === "rejected" &&
      rereadable !== undefined &&
      report.reason !== "malformed_json" &&
      report.reason !== "rollout_too_large"
    ) {
      try {
        const again = this.plan(this.parseJson(rereadable), line, false);
        if (again.reason === report.reason) report = again;
      } catch (error) {
        if (!isOutOfMemory(error)) throw error; // too large to read twice: the first words stand
      }
    }
    if (report.status === "rejected") {
      this.rejected++;
      if (this.options.notes)
        this.notes += rejectionLine(where, report.reason!, report.detail, result.ok ? undefined : result.code) + "\n";
    }
    const broken = countBreaks(report);
    if (broken > 0) {
      this.brokenCalls += broken;
      this.brokenRollouts++;
    }
    this.reports += reportToJson(report) + "\n";
  }

  /** The report of a converted value; its rows are written (unless `writeRows` is false). */
  private plan(result: ConvertResult, line: number | undefined, writeRows = true): Report {
    let report: Report;
    if (result.ok) {
      const mark = this.rowBytes.mark();
      const columnMark = this.columns?.length ?? 0;
      const directMark = this.direct?.mark();
      try {
        const { writer, maskFormat } = this.options;
        report = usePlan(
          this.cf,
          result,
          line,
          (plan, report) => {
            if (!writeRows) return report;
            const records = this.kind === "rows" ? plan.rows : this.kind === "trees" ? plan.trees : plan.bins;
            this.rowCount += records.length;
            if (this.columns !== null) {
              for (const record of records) this.columns.add(record as never);
              return report;
            }
            if (this.direct !== null) {
              for (const record of records) this.direct.add(record as never);
              return report;
            }
            for (const record of records) {
              if (this.kind === "rows") {
                const row = record as Row;
                if (writer === "js") this.rowBytes.add(ENCODER.encode(rowToJson(row, maskFormat) + "\n"));
                else this.serializer.writeRow(row, maskFormat, this.rowBytes.add);
              } else {
                const packed = record as PackedTree | PackedBin;
                if (writer === "js") this.rowBytes.add(ENCODER.encode(packedToJson(packed, maskFormat) + "\n"));
                else this.serializer.writePacked(packed, maskFormat, this.rowBytes.add);
              }
            }
            return report;
          },
          this.planOptions,
        );
      } catch (error) {
        // Out of memory half-way (a buffer or string too large): this rollout only, no rows.
        if (!isOutOfMemory(error)) throw error;
        this.rowBytes.rollback(mark);
        this.columns?.truncate(columnMark);
        if (directMark !== undefined) this.direct!.rollback(directMark);
        report = reportOfImportRejection(
          tooLarge(`the rollout does not fit in memory (${errorLine(error)})`, result.rollout.rollout_id),
          line,
        );
      }
    } else {
      report = reportOfImportRejection(result, line);
    }
    return report;
  }

  /** A row block of a piece, written: back for reuse. */
  giveBlock(buffer: ArrayBuffer): void {
    this.rowBytes.giveBlock(buffer);
  }

  /** Output of values given through record() (the .json files), as one last piece. */
  takeAll(bytes: number): Piece {
    this.bytesDone = 0;
    return this.take(bytes, true);
  }
}
