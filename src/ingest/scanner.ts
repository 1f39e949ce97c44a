// LineScanner: one JSONL line's bytes → its value, with every token array (`prompt_token_ids`,
// `generation_token_ids`) as an Int32Array and every `generation_log_probs` as a Float32Array,
// both views over the scanner's own linear memory, parsed there by assembly/scan. Views may
// overlap (a prompt that repeats the previous prompt and generation is a view over them), so
// they are read, never written. Only the remaining metadata goes through JSON.parse, with a
// placeholder string where each array was.
import { isStringTooLong, notJsonDetail } from "../formats/text.js";
import { errorLine } from "../messages.js";
import { lineLength, type StreamedLine } from "./batches.js";
import { WASM_MEMORY_MAX_BYTES } from "../core/types.js";
import { instantiateScan, type ScanInstance, type ScanModuleOptions } from "./scan-module.js";

export type ScannedLine =
  | { ok: true; value: unknown }
  | { ok: false; code: "malformed_json"; detail: string }
  | { ok: false; code: "rollout_too_large"; detail: string };

export type LineScannerOptions = ScanModuleOptions;

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const ARRAY_KEYS = new Set(["prompt_token_ids", "generation_token_ids", "generation_log_probs"]);
// assembly/scan/scan.ts's STATUS_OK (scan()'s result) and KIND_I32 (an array table entry's kind).
const STATUS_OK = 0;
const KIND_I32 = 0;
const NONCE_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/**
 * 16 random characters (the scanner puts `\u0000` before them): no line can guess them, so no user
 * string is taken for a placeholder.
 */
function makeNonce(): string {
  const random = new Uint8Array(16);
  globalThis.crypto.getRandomValues(random);
  let nonce = "";
  for (const r of random) nonce += NONCE_CHARS[r % NONCE_CHARS.length];
  return nonce;
}

export class LineScanner {
  /** The parsed placeholder text (after JSON.parse): "\0" + nonce; the array index follows. */
  private readonly placeholder: string;

  private constructor(
    private readonly wasm: ScanInstance,
    nonce: string,
  ) {
    this.placeholder = "\u0000" + nonce;
    const raw = '"\\u0000' + nonce; // as written into the metadata text
    for (let i = 0; i < raw.length; i++) wasm.setPrefixByte(i, raw.charCodeAt(i));
  }

  /** A scanner with its own WebAssembly instance (SIMD build unless `{ simd: false }`). */
  static async create(options: LineScannerOptions = {}): Promise<LineScanner> {
    return new LineScanner(await instantiateScan(options), makeNonce());
  }

  /**
   * Scans one line's bytes (or the parts it was read into, in order). Views in the result stay
   * valid until the next scan() (memory only grows inside scan(), before any view is made).
   */
  scan(line: Uint8Array | readonly Uint8Array[]): ScannedLine {
    // A long line comes in the parts it was read into: they are copied in one after another.
    const parts = line instanceof Uint8Array ? [line] : line;
    const length = lineLength(parts);
    const input = this.inputBuffer(length);
    if (input === null) return tooLargeLine(length);
    let at = 0;
    for (const part of parts) {
      input.set(part, at);
      at += part.length;
    }
    return this.scanInput(length);
  }

  /** Bytes of linear memory it holds (grown to the largest line so far; never shrinks). */
  get memoryBytes(): number {
    return this.wasm.memory.buffer.byteLength;
  }

  /**
   * Zero-copy input: a view of `length` bytes inside linear memory where a reader can put the
   * line itself, then call scanInput(length). Null when memory cannot hold it. The view (and the
   * views of the previous result) may be detached by the next inputBuffer() call.
   */
  inputBuffer(length: number): Uint8Array | null {
    const address = this.wasm.inputAddress(length) >>> 0; // addresses past 2 GiB come back negative
    return address === 0 ? null : new Uint8Array(this.wasm.memory.buffer, address, length);
  }

  /**
   * Starts scanning one long line as it is read (window mode, see LineStream): its text goes
   * through a region of memory that is reused, never into memory all at once. Null when memory
   * cannot hold the region. Views of the previous result may be detached.
   */
  streamLine(window: StreamWindow = STREAM_WINDOW): LineStream | null {
    if (!(window.regionBytes <= MAX_REGION_BYTES)) return null; // (addresses are 32-bit)
    const region = this.wasm.streamBegin(window.regionBytes, window.historyBytes) >>> 0;
    return region === 0 ? null : new LineStream(this.wasm, region, window.regionBytes, (meta) => this.parsed(meta));
  }

  /** The line's value from its metadata text; null when JSON.parse takes no such text. */
  private parsed(meta: string): { ok: true; value: unknown } | null {
    let value: unknown;
    try {
      value = JSON.parse(meta);
    } catch {
      return null;
    }
    const wasm = this.wasm;
    const count = wasm.arrayCount();
    if (count > 0) this.attach(value, wasm.memory.buffer, wasm.tableAddress() >>> 0, count);
    return { ok: true, value };
  }

  /** Scans the `length` bytes written into inputBuffer(length). */
  scanInput(length: number): ScannedLine {
    const wasm = this.wasm;
    if (wasm.scan(length) !== STATUS_OK) return tooLargeLine(length);
    const buffer = wasm.memory.buffer;
    const metaLength = wasm.metaLength();
    let value: unknown;
    try {
      value = JSON.parse(decoder.decode(new Uint8Array(buffer, wasm.metaAddress() >>> 0, metaLength)));
    } catch (error) {
      // Longer than a JS string may be (~512 M characters): this line cannot be read here at all.
      if (isStringTooLong(error)) return textTooLong(length, `its text without the token arrays (${metaLength} bytes)`);
      // The line is still in memory, and nothing grows from here on: a view will do.
      return notJson(new Uint8Array(buffer, wasm.inputAddress(length) >>> 0, length));
    }
    const count = wasm.arrayCount();
    if (count > 0) this.attach(value, buffer, wasm.tableAddress() >>> 0, count);
    return { ok: true, value };
  }

  /** Replaces each placeholder string by its array's view. Iterative: any nesting depth. */
  private attach(root: unknown, buffer: ArrayBuffer, table: number, count: number): void {
    const entries = new Uint32Array(buffer, table, count * 3);
    const prefix = this.placeholder;
    let left = count;
    const stack: unknown[] = [root];
    while (stack.length > 0 && left > 0) {
      const node = stack.pop();
      if (Array.isArray(node)) {
        for (const item of node) if (typeof item === "object" && item !== null) stack.push(item);
        continue;
      }
      const object = node as Record<string, unknown>;
      for (const key of Object.keys(object)) {
        const child = object[key];
        if (typeof child === "object") {
          if (child !== null) stack.push(child);
        } else if (typeof child === "string" && ARRAY_KEYS.has(key) && child.startsWith(prefix)) {
          const index = Number(child.slice(prefix.length));
          if (!(index >= 0 && index < count && child === prefix + index)) continue;
          const address = entries[index * 3];
          const length = entries[index * 3 + 1];
          // `key` is one of three plain names: assignment cannot reach a prototype.
          object[key] =
            entries[index * 3 + 2] === KIND_I32
              ? new Int32Array(buffer, address, length)
              : new Float32Array(buffer, address, length);
          left--;
        }
      }
    }
  }
}

/**
 * Window mode's region (assembly/scan/scan.ts): the line's text moves down to its start when a
 * piece does not fit after it, keeping `historyBytes` of scanned text (and the newest long token
 * array) when there is room. A string or array longer than the region is read whole instead.
 */
export interface StreamWindow {
  regionBytes: number;
  historyBytes: number;
}

/**
 * 8 MiB: about 2,000 pages to touch once, where a 90 MB line read whole takes 22,000 (a larger
 * region touches more pages: 16 and 32 MiB were slower on the bench's mix), and room for an
 * array of about a million tokens. The 2 MiB of history holds an agent's last prompt up to
 * ~280K tokens; a longer one is kept as the newest long array.
 */
export const STREAM_WINDOW: StreamWindow = { regionBytes: 8 << 20, historyBytes: 2 << 20 };

/**
 * The window for a reader's pieces of `pieceBytes`: STREAM_WINDOW, or, for larger pieces
 * (`--batch-bytes`), a region of four pieces that keeps one of history.
 */
export function streamWindow(pieceBytes: number): StreamWindow {
  return {
    regionBytes: Math.max(STREAM_WINDOW.regionBytes, 4 * pieceBytes),
    historyBytes: Math.max(STREAM_WINDOW.historyBytes, pieceBytes),
  };
}

/** The largest region a scanner makes (a line whose pieces need more is read whole). */
const MAX_REGION_BYTES = 1 << 30;

/** A piece is never smaller than this (or what is left of the region, if smaller). */
const LEAST_PIECE = 64 << 10;

/**
 * One long line scanned as it is read: the reader asks for space(n), reads up to n bytes of the
 * line into it, and hands them on with scanned(); the scanner goes as far as the first string or
 * token array whose end it has not read yet, and keeps the rest for the next piece. Once the
 * last piece is in, finish() parses the metadata; the value is then what scan() would have
 * given for the whole line (`value`: views over the scanner's memory, valid until it scans
 * again). Any line this cannot take — a string or array
 * longer than the region, memory short, or metadata that is not JSON (whose message needs the
 * whole line) — makes space(), scanned() or finish() say so, and the reader reads the line
 * whole instead, so every rejection reads as it does for a line read whole.
 */
export class LineStream implements StreamedLine {
  private readonly decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  private readonly meta: string[] = [];
  private failed = false;
  private result: { ok: true; value: unknown } | null = null;
  /** Each piece of metadata as the scanner hands it out: decoded (a piece may end inside a character). */
  private readonly take = (bytes: Uint8Array) => {
    this.meta.push(this.decoder.decode(bytes, { stream: true }));
  };

  constructor(
    private readonly wasm: ScanInstance,
    private readonly region: number,
    private readonly regionBytes: number,
    private readonly parse: (meta: string) => { ok: true; value: unknown } | null,
  ) {}

  /** Room for up to `length` bytes (less when the region is short of it, never none). */
  space(length: number): Uint8Array | null {
    const at = this.failed ? -1 : this.wasm.streamRoom(length, Math.min(length, LEAST_PIECE));
    if (at < 0) return this.fail();
    return new Uint8Array(this.wasm.memory.buffer, this.region + at, Math.min(length, this.regionBytes - at));
  }

  scanned(got: number, last: boolean): boolean {
    if (this.failed) return false;
    const wasm = this.wasm;
    wasm.onMeta = this.take;
    try {
      if (wasm.streamScan(got, last ? 1 : 0) !== STATUS_OK) {
        this.fail();
        return false;
      }
      if (last) this.meta.push(this.decoder.decode());
    } catch (error) {
      if (!(error instanceof TypeError)) throw error; // not UTF-8 (TextDecoder's fatal error)
      this.fail();
      return false;
    } finally {
      wasm.onMeta = null;
    }
    return true;
  }

  finish(): boolean {
    if (this.failed) return false;
    try {
      this.result = this.parse(this.meta.join(""));
    } catch (error) {
      if (!isStringTooLong(error)) throw error;
    }
    this.meta.length = 0;
    return this.result !== null;
  }

  /** The line's value, once finish() said true. */
  get value(): ScannedLine {
    if (this.result === null) throw new Error("LineStream: no value before finish() succeeds");
    return this.result;
  }

  private fail(): null {
    this.failed = true;
    this.meta.length = 0;
    return null;
  }
}

function tooLargeLine(bytes: number): ScannedLine {
  return { ok: false, code: "rollout_too_large", detail: linePastScannerDetail(bytes) };
}

/** Why a line of `bytes` was not read: it does not fit in the scanner's linear memory. */
export function linePastScannerDetail(bytes: number): string {
  return `a line of ${bytes} bytes does not fit in the scanner's memory`;
}

/** No line longer than this fits in a scanner: its linear memory holds at most 4 GiB, the line and more. */
export const SCANNER_MAX_LINE_BYTES = WASM_MEMORY_MAX_BYTES;

function textTooLong(bytes: number, what: string): ScannedLine {
  return {
    ok: false,
    code: "rollout_too_large",
    detail: `a line of ${bytes} bytes: ${what} is longer than a JavaScript string can be`,
  };
}

/** Why a line the scanner could not read is not JSON, in the words every reader uses (notJsonDetail). */
function notJson(line: Uint8Array): ScannedLine {
  let tooLong = false;
  const detail = notJsonDetail(line, () => {
    // The checker accepted what JSON.parse rejects (e.g. nesting too deep for JSON.parse).
    try {
      JSON.parse(decoder.decode(line));
    } catch (error) {
      tooLong = isStringTooLong(error);
      return errorLine(error);
    }
    throw new Error("LineScanner: metadata failed to parse although the line is JSON (a scanner bug)");
  });
  return tooLong ? textTooLong(line.length, "its text") : { ok: false, code: "malformed_json", detail };
}
