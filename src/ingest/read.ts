// Reading input files as canonical rollouts (Node), by the rules of src/formats/text.ts: JSONL one value a line
// (split on `\n` only, blank lines skipped but counted), a `.json` file as one value (or, when it
// holds an array, one value per element), `-` = stdin; an input named neither .json nor .jsonl
// is JSONL, or one value when it opens like a pretty-printed one. JSONL is read as bytes in
// batches by ./batches.ts, the same line splitter `rows` uses, so every command numbers
// lines alike.
import { readFile } from "node:fs/promises";
import type { Diagnostic, Rollout } from "../types.js";
import { formatFloat32 } from "../codecs/float32.js";
import {
  BufferPool,
  DEFAULT_CHUNK,
  batchBuffers,
  fileSource,
  forEachLine,
  joinParts,
  lineParts,
  readBatches,
  readWhole,
  sniffDocument,
  streamSource,
  type Batch,
  type ByteSource,
  type DroppedLine,
} from "./batches.js";
import { FileError, isSystemError } from "../files/file-error.js";
import { besideInput } from "./beside.js";
import {
  MAX_STRING_BYTES,
  MAX_TEXT_BYTES,
  inputName,
  inputsOrStdin,
  isJsonName,
  isJsonlName,
  parseJsonInput,
  parseLine,
  textTooLongDetail,
  tooLarge,
  type ReadItem,
  type ReadOptions,
} from "../formats/text.js";

export type { ReadItem, ReadOptions } from "../formats/text.js";

/** Every input value of every file in order, converted. A file that cannot be read throws a FileError. */
export async function* readRollouts(inputs: readonly string[], options: ReadOptions = {}): AsyncGenerator<ReadItem> {
  for (const file of inputsOrStdin(inputs)) {
    if (isJsonName(file)) {
      yield* parseJsonInput(file, await readBytes(file), besideInput(file, options, { oneValue: true }));
      continue;
    }
    const input = await openInput(file);
    if (input.document)
      yield* (await readDocument(file, input.source, besideInput(file, options, { oneValue: true }))).items;
    else yield* readJsonLines(file, input.source, besideInput(file, options, { oneValue: false }));
  }
}

/**
 * A JSONL input (not `.json`): a `.jsonl` file as it is; any other (stdin, /dev/stdin, a pipe,
 * a file of another name), which has no name to go by, is JSONL unless it opens like one
 * pretty-printed value (see sniffDocument). Throws a FileError when it cannot be read.
 */
export async function openInput(file: string): Promise<{ document: boolean; source: ByteSource }> {
  let source: ByteSource;
  try {
    source = file === "-" ? streamSource(process.stdin) : await fileSource(file);
  } catch (error) {
    throw asFileError(file, error);
  }
  if (isJsonlName(file)) return { document: false, source };
  try {
    return await sniffDocument(source);
  } catch (error) {
    await source.close(); // a read error in its first line
    throw asFileError(file, error);
  }
}

/** The items of one JSON value read whole (as a `.json` file's), and its size. */
export async function readDocument(
  file: string,
  source: ByteSource,
  options: ReadOptions,
): Promise<{ items: ReadItem[]; bytes: number }> {
  const name = inputName(file);
  let bytes: Uint8Array | null;
  try {
    bytes = await readWhole(source, MAX_STRING_BYTES);
  } catch (error) {
    throw asFileError(file, error);
  } finally {
    await source.close();
  }
  if (bytes === null)
    return { items: [{ where: name, result: tooLarge(tooLargeDocument(null)) }], bytes: MAX_STRING_BYTES };
  return { items: parseJsonInput(name, bytes, options), bytes: bytes.length };
}

/** Why one JSON value of `bytes` (null: more than the limit, size unknown) is refused: V8 takes no string that long. */
export function tooLargeDocument(bytes: number | null): string {
  const amount = bytes === null ? `over ${MAX_STRING_BYTES >> 20} MB` : `${bytes} bytes`;
  return (
    `${amount} of one JSON value is more than JSON.parse takes (${MAX_STRING_BYTES >> 20} MB); ` +
    `write it as JSONL, one rollout a line`
  );
}

/** A file that cannot be read is a FileError naming it; anything else goes on as it is. */
function asFileError(file: string, error: unknown): unknown {
  const fileTooLarge = (error as { code?: unknown } | null)?.code === "ERR_FS_FILE_TOO_LARGE"; // a .json over 2 GiB
  return isSystemError(error) || fileTooLarge ? new FileError("read", inputName(file), error) : error;
}

async function readBytes(file: string): Promise<Uint8Array> {
  try {
    return await readFile(file);
  } catch (error) {
    throw asFileError(file, error);
  }
}

async function* readJsonLines(file: string, source: ByteSource, options: ReadOptions): AsyncGenerator<ReadItem> {
  const name = inputName(file);
  const pool = new BufferPool(DEFAULT_CHUNK, 2);
  const batches = readBatches(source, pool, MAX_TEXT_BYTES);
  try {
    for (;;) {
      let next: IteratorResult<Batch>;
      try {
        next = await batches.next();
      } catch (error) {
        throw asFileError(file, error);
      }
      if (next.done) return;
      const batch = next.value;
      const items: ReadItem[] = [];
      const add = (item: ReadItem | null) => item !== null && items.push(item);
      if (batch.dropped !== undefined) add(droppedLine(name, batch.dropped, batch.firstLine));
      else if (batch.parts !== undefined) add(parseLine(name, joinParts(lineParts(batch)), batch.firstLine, options));
      else
        forEachLine(batch, (start, end, line) => add(parseLine(name, batch.bytes.subarray(start, end), line, options)));
      for (const buffer of batchBuffers(batch)) pool.give(buffer); // parsed: nothing refers to its bytes
      yield* items;
    }
  } finally {
    await batches.return(undefined); // stopped early: close the file
  }
}

/** A line too long to parse, dropped as it was read: rejected as parseLine would (blank: skipped). */
function droppedLine(name: string, dropped: DroppedLine, line: number): ReadItem | null {
  if (dropped.blank) return null;
  return { where: `${name}:${line}`, line, result: tooLarge(textTooLongDetail(dropped.bytes)) };
}

/**
 * A canonical rollout as one JSONL line. Import diagnostics go in a `diagnostics` field (SPEC
 * ignores unknown fields; `--from callforest` reads them back). Typed arrays are written as JSON
 * arrays, float32 logprobs in their shortest exact form. Throws a RangeError for what JSON cannot
 * hold: a number out of range (1e400 reads as Infinity, which JSON.stringify would write as null),
 * or a value nested deeper than JSON.stringify can recurse.
 */
export function rolloutToJson(rollout: Rollout, diagnostics: readonly Diagnostic[] = []): string {
  const body = diagnostics.length === 0 ? rollout : { ...rollout, diagnostics };
  let negativeZeros = false;
  // JSON.stringify writes -0 as 0: a logprob of -0 goes out as a placeholder, then as "-0".
  const logprob = (x: number) =>
    Object.is(x, -0) ? ((negativeZeros = true), NEGATIVE_ZERO) : Number(formatFloat32(x));
  const text = JSON.stringify(body, (key, value: unknown) => {
    if (typeof value === "number" && !Number.isFinite(value)) {
      throw new RangeError(
        `${key === "" ? "a value" : JSON.stringify(key)} is ${value}, ` +
          `which JSON cannot hold (a number out of range, such as 1e400)`,
      );
    }
    if (value instanceof Float32Array) return Array.from(value, logprob);
    // Plain arrays keep their numbers as given, -0 included.
    if (key === "generation_log_probs" && Array.isArray(value) && value.some((x) => Object.is(x, -0))) {
      return value.map((x) => (Object.is(x, -0) ? logprob(x) : x));
    }
    if (ArrayBuffer.isView(value) && !(value instanceof DataView))
      return Array.from(value as unknown as ArrayLike<number>);
    return value;
  });
  return negativeZeros ? text.replaceAll(JSON.stringify(NEGATIVE_ZERO), "-0") : text;
}

/** Stands for -0 while JSON.stringify runs; random, so no string of the data can be taken for it. */
const NEGATIVE_ZERO = `\u0000-0:${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;
