// Input text as rollouts, by the rules every reader shares (the CLI's src/ingest/read.ts and
// src/ingest, and the page in web/): a name ending in .json is one JSON value (an array: one
// rollout per element); anything else is JSONL, one value a line. Lines end at `\n` only; a line
// of nothing but spaces, tabs and CRs is blank (skipped, but counted, so line numbers stay
// true). JSON text is UTF-8 (RFC 8259): invalid UTF-8 is `malformed_json`, never silently
// replaced; a byte order mark opening the input is skipped (RFC 8259 allows a reader to).
// Free of Node APIs, so the browser build uses it too.
import { describeNotJson } from "./not-json.js";
import { toCanonical } from "./index.js";
import type { ConvertResult, FormatContext, FormatRejection, FromOption } from "./types.js";
import { errorLine } from "../messages.js";

export interface ReadItem {
  /** Where the value came from, for messages: `file:line`, `file`, `file[i]`, `<stdin>:line`. */
  where: string;
  /**
   * 1-based input line: a JSONL value's line; in a `.json` input, the line its value (or, in an
   * array, its element) starts on.
   */
  line?: number;
  result: ConvertResult;
}

export interface ReadOptions extends FormatContext {
  from?: FromOption;
}

/** The inputs a command reads: the ones named, or stdin (`-`) when none is. */
export function inputsOrStdin(inputs: readonly string[]): readonly string[] {
  return inputs.length === 0 ? ["-"] : inputs;
}

/** How messages name an input: its path, or `<stdin>` for `-`. */
export function inputName(input: string): string {
  return input === "-" ? "<stdin>" : input;
}

/** A `.json` input holds one value (possibly pretty-printed), not JSONL; `-` (stdin) never does. */
export function isJsonName(name: string): boolean {
  return name !== "-" && name.toLowerCase().endsWith(".json");
}

/** A `.jsonl` (or `.ndjson`) input is JSONL by its name. */
export function isJsonlName(name: string): boolean {
  const lower = name.toLowerCase();
  return name !== "-" && (lower.endsWith(".jsonl") || lower.endsWith(".ndjson"));
}

const SPACE = 32;
const TAB = 9;
const CR = 13;
const NEWLINE = 10;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;

/** Whether text[start, end) holds only spaces, tabs and CRs (a blank line). */
export function isBlankLine(text: Uint8Array | string, start = 0, end = text.length): boolean {
  for (let i = start; i < end; i++) {
    const c = typeof text === "string" ? text.charCodeAt(i) : text[i];
    if (c !== SPACE && c !== TAB && c !== CR) return false;
  }
  return true;
}

/** SPEC's malformed_json rejection with `detail`. */
export function malformedJson(detail: string): FormatRejection {
  return { ok: false, format: null, reason: "malformed_json", code: "malformed_json", detail, rolloutId: null };
}

/** A rollout rejected because it does not fit (SPEC's table + rollout_too_large). */
export function tooLarge(detail: string, rolloutId: string | null = null): FormatRejection {
  return { ok: false, format: null, reason: "rollout_too_large", code: "rollout_too_large", detail, rolloutId };
}

/**
 * Why bytes are not JSON, the same on every reader: the byte-level checker names the offset; in
 * the rare case it accepts what JSON.parse refused (nesting too deep), JSON.parse's message.
 */
export function notJsonDetail(bytes: Uint8Array, fallback: () => string): string {
  return describeNotJson(bytes) ?? `not JSON (${fallback()})`;
}

const encoder = new TextEncoder();
// fatal: invalid UTF-8 throws; ignoreBOM: a BOM stays in the text (and JSON.parse refuses it, as
// the scanner does), rather than being dropped.
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Text longer than V8's longest string (2^29 - 24 characters), from the decoder or a string op. */
export function isStringTooLong(error: unknown): boolean {
  if ((error as { code?: unknown } | null)?.code === "ERR_STRING_TOO_LONG") return true;
  return error instanceof RangeError && /invalid string length|string longer than/i.test(error.message);
}

const TOO_LONG = Symbol("longer than a JS string");

/** No text of more bytes decodes to a JS string: a UTF-16 unit takes at most 3 bytes of UTF-8. */
export const MAX_TEXT_BYTES = 3 * (2 ** 29 - 24);

/**
 * What the JSON.parse readers take as one string (rows' JSON.parse reader, `.json` files): V8's
 * limit is ~512 M characters, and a parse holds copies, so they stop well before it.
 */
export const MAX_STRING_BYTES = 256 << 20;

/** Why `bytes` of text were not parsed: longer than a JS string can be. */
export function textTooLongDetail(bytes: number): string {
  return (
    `${bytes} bytes of text are more than JSON.parse can read ` +
    `(a JavaScript string holds at most 2^29 - 24 characters); ` +
    `\`callforest rows\` reads longer lines when most of their bytes are token arrays`
  );
}

/** The text of `input`; null when its bytes are not UTF-8, TOO_LONG past V8's longest string. */
function decode(input: Uint8Array | string): string | null | typeof TOO_LONG {
  if (typeof input === "string") return input;
  try {
    return decoder.decode(input);
  } catch (error) {
    return isStringTooLong(error) ? TOO_LONG : null;
  }
}

/** Text some faster decoder already checked and decoded, with the bytes it came from (for messages). */
export interface DecodedText {
  text: string;
  bytes: Uint8Array;
}

/** JSON.parse of strictly decoded text; a malformed_json rejection when it is not JSON. */
function parseJson(input: Uint8Array | string | DecodedText): { ok: true; value: unknown } | FormatRejection {
  const decoded = typeof input === "object" && !(input instanceof Uint8Array) ? input : null;
  const text = decoded !== null ? decoded.text : decode(input as Uint8Array | string);
  const bytes = () =>
    decoded !== null ? decoded.bytes : typeof input === "string" ? encoder.encode(input) : (input as Uint8Array);
  if (text === TOO_LONG) return tooLarge(textTooLongDetail((input as Uint8Array).length));
  if (text === null) return malformedJson(notJsonDetail(bytes(), () => "invalid UTF-8"));
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    // The byte-level checker runs only when JSON.parse failed (it is slower).
    return malformedJson(notJsonDetail(bytes(), () => errorLine(error)));
  }
}

/** One JSON text (a line, or a whole .json input) to a canonical rollout, or a rejection. */
export function parseValue(
  input: Uint8Array | string | DecodedText,
  from: FromOption = "auto",
  context: FormatContext = {},
): ConvertResult {
  const parsed = parseJson(input);
  return parsed.ok ? toCanonical(parsed.value, from, context) : parsed;
}

/** A whole `.json` input: one item, or one per element of a top-level array. */
export function parseJsonInput(name: string, input: Uint8Array | string, options: ReadOptions = {}): ReadItem[] {
  const from = options.from ?? "auto";
  const parsed = parseJson(withoutByteOrderMark(input));
  if (!parsed.ok) return [{ where: name, result: parsed }];
  const value = parsed.value;
  const lines = startLines(withoutByteOrderMark(input), Array.isArray(value));
  if (Array.isArray(value))
    return value.map((v, i) => ({ where: `${name}[${i}]`, line: lines[i + 1], result: toCanonical(v, from, options) }));
  return [{ where: name, line: lines[0], result: toCanonical(value, from, options) }];
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/**
 * The 1-based line each value of one JSON text (known to parse) starts on: [0] the whole value's,
 * then, when `elements`, each top-level array element's, in order. UTF-8 bytes and strings are
 * walked alike: no byte of a multi-byte character is ASCII.
 */
export function startLines(input: Uint8Array | string, elements: boolean): number[] {
  const at = typeof input === "string" ? (i: number) => input.charCodeAt(i) : (i: number) => input[i];
  const lines: number[] = [];
  let line = 1;
  let depth = 0;
  let inString = false;
  let expecting = true; // the next character that is not space starts a value to number
  for (let i = 0; i < input.length; i++) {
    const c = at(i);
    if (c === NEWLINE) {
      line++;
    } else if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c !== 0x20 && c !== 0x09 && c !== 0x0d) {
      if (expecting && c !== CLOSE_ARRAY) lines.push(line);
      expecting = false;
      if (c === QUOTE) inString = true;
      else if (c === OPEN_ARRAY || c === OPEN_OBJECT) depth++;
      else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) depth--;
      // The top array's first element follows its `[`, each other one a `,` at depth 1.
      if (elements && depth === 1 && (c === COMMA || (c === OPEN_ARRAY && lines.length === 1))) expecting = true;
    }
  }
  return lines;
}

/** The items of one JSONL line (none if blank), numbered `line`. */
export function parseLine(
  name: string,
  input: Uint8Array | string,
  line: number,
  options: ReadOptions = {},
): ReadItem | null {
  if (isBlankLine(input)) return null;
  return { where: `${name}:${line}`, line, result: parseValue(input, options.from ?? "auto", options) };
}

/** The input without a UTF-8 byte order mark at its start (Windows tools write one). */
export function withoutByteOrderMark<T extends Uint8Array | string>(input: T): T {
  if (typeof input === "string") return (input.startsWith("\uFEFF") ? input.slice(1) : input) as T;
  return (isByteOrderMark(input) ? input.subarray(3) : input) as T;
}

/** True when `bytes` starts with EF BB BF. */
export function isByteOrderMark(bytes: Uint8Array): boolean {
  return bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
}

/** Where each JSONL line of `input` is: [start, end) without its `\n`, numbered from 1. */
function* lineRanges(input: Uint8Array): Generator<{ line: number; start: number; end: number }> {
  let start = 0;
  for (let line = 1; start < input.length; line++) {
    let end = input.indexOf(NEWLINE, start);
    if (end === -1) end = input.length;
    yield { line, start, end };
    start = end + 1;
  }
}

/**
 * The items of a JSONL input held in memory, one by one (the page plans them a slice at a time):
 * each with the offset where its line ends (for progress) and a way to read it again.
 */
export function* jsonlItems(
  name: string,
  input: Uint8Array,
  options: ReadOptions = {},
): Generator<{ item: ReadItem; end: number; again: () => ReadItem }> {
  const bytes = withoutByteOrderMark(input);
  for (const { line, start, end } of lineRanges(bytes)) {
    const read = () => parseLine(name, bytes.subarray(start, end), line, options);
    const item = read();
    if (item !== null) yield { item, end, again: () => read()! };
  }
}

/** How far into an input its first non-blank line is looked for: past this, the input is JSONL. */
export const DOCUMENT_SNIFF_LIMIT = 16 << 20;

/**
 * Whether `bytes` (a whole input) open with a line that is `{` or `[` alone, blank lines before
 * it aside, within DOCUMENT_SNIFF_LIMIT bytes (as sniffDocument reads a stream).
 */
export function opensDocument(bytes: Uint8Array): boolean {
  const body = withoutByteOrderMark(bytes);
  const start = documentStart(body.subarray(0, DOCUMENT_SNIFF_LIMIT - (bytes.length - body.length)), "blanks");
  if (start.opens !== null) return start.opens;
  return start.state === "opened" && bytes.length < DOCUMENT_SNIFF_LIMIT; // the input ends after `{` and blanks
}

/** Where documentStart is: among the blanks before the first other byte, or just past a `{` or `[`. */
export type DocumentSniff = "blanks" | "opened";

/**
 * Reads on from `state` through `bytes` (the next part of an input, byte order mark removed):
 * `opens` is true once a `{` or `[` alone on its line is seen, false once anything else shows
 * (a byte other than a blank before it, or after it on its line), null while it could go either
 * way (only blanks so far, or a `{` and blanks) — then `state` is where the next part starts.
 */
export function documentStart(
  bytes: Uint8Array,
  state: DocumentSniff,
): { opens: boolean | null; state: DocumentSniff } {
  for (const byte of bytes) {
    if (state === "blanks") {
      if (byte === SPACE || byte === TAB || byte === CR || byte === NEWLINE) continue;
      if (byte !== OPEN_BRACE && byte !== OPEN_BRACKET) return { opens: false, state };
      state = "opened";
    } else if (byte === NEWLINE) {
      return { opens: true, state };
    } else if (byte !== SPACE && byte !== TAB && byte !== CR) {
      return { opens: false, state };
    }
  }
  return { opens: null, state };
}

/**
 * Whether a whole input held in memory is one JSON value rather than JSONL, as the CLI reads
 * files: a `.json` name is, a `.jsonl` name is not, any other goes by its first line (opensDocument).
 */
export function holdsOneValue(name: string, bytes: Uint8Array): boolean {
  return isJsonName(name) || (!isJsonlName(name) && opensDocument(bytes));
}
