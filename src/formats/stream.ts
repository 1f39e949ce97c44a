// An input that arrives in byte chunks (a file stream, a fetch body, bytes in memory) as read
// items, by the rules of ./text.ts that every reader shares: a `.json` name is one value (an
// array: one per element), `.jsonl` is JSONL, and any other input is JSONL unless its first line
// that is not blank is `{` or `[` alone. JSONL lines are parsed as they complete, so a stream is
// never held whole; one value is. Free of Node APIs (readRollouts() uses it in both entries).
import {
  DOCUMENT_SNIFF_LIMIT,
  MAX_STRING_BYTES,
  documentStart,
  isJsonName,
  isJsonlName,
  parseJsonInput,
  parseLine,
  tooLarge,
  withoutByteOrderMark,
  type DocumentSniff,
  type ReadItem,
  type ReadOptions,
} from "./text.js";

const NEWLINE = 10;

/**
 * The items of input `name` read from `chunks`. `optionsFor` gives the read options once it is
 * known whether the input holds one value (`document`) or JSONL.
 */
export async function* readChunks(
  name: string,
  chunks: AsyncIterable<Uint8Array>,
  optionsFor: (document: boolean) => ReadOptions,
): AsyncGenerator<ReadItem> {
  const iterator = chunks[Symbol.asyncIterator]();
  try {
    const head: Uint8Array[] = [];
    let document: boolean | null = isJsonName(name) ? true : isJsonlName(name) ? false : null;
    let sniff: { opens: boolean | null; state: DocumentSniff } = { opens: null, state: "blanks" };
    let seen = 0;
    let ended = false;
    // Reads until the input says which it is (or ends), keeping what was read.
    while (document === null) {
      const next = await iterator.next();
      if (next.done) {
        ended = true;
        document = sniff.state === "opened" && seen < DOCUMENT_SNIFF_LIMIT;
        break;
      }
      const bytes = next.value;
      head.push(bytes);
      sniff = documentStart(seen === 0 ? withoutByteOrderMark(bytes) : bytes, sniff.state);
      seen += bytes.length;
      if (sniff.opens !== null) document = sniff.opens;
      else if (seen >= DOCUMENT_SNIFF_LIMIT) document = false;
    }
    const rest = async function* (): AsyncGenerator<Uint8Array> {
      yield* head;
      if (ended) return;
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
    };
    const options = optionsFor(document);
    if (document) yield* oneValue(name, rest(), options);
    else yield* lines(name, rest(), options);
  } finally {
    await iterator.return?.();
  }
}

/** The whole input as one JSON value (or an array of them); past MAX_STRING_BYTES, one rejection. */
async function* oneValue(
  name: string,
  chunks: AsyncIterable<Uint8Array>,
  options: ReadOptions,
): AsyncGenerator<ReadItem> {
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of chunks) {
    total += chunk.length;
    if (total > MAX_STRING_BYTES) {
      yield {
        where: name,
        result: tooLarge(
          `over ${MAX_STRING_BYTES >> 20} MB of one JSON value is more than JSON.parse takes; write it as JSONL, one rollout a line`,
        ),
      };
      return;
    }
    parts.push(chunk);
  }
  yield* parseJsonInput(name, concat(parts, total), options);
}

/** JSONL: each line parsed as it completes (a blank line counts but yields nothing). */
async function* lines(name: string, chunks: AsyncIterable<Uint8Array>, options: ReadOptions): AsyncGenerator<ReadItem> {
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  let line = 1;
  let first = true;
  for await (const raw of chunks) {
    let chunk = raw;
    if (first && chunk.length > 0) {
      chunk = withoutByteOrderMark(chunk);
      first = false;
    }
    let start = 0;
    for (let end = chunk.indexOf(NEWLINE); end !== -1; end = chunk.indexOf(NEWLINE, start)) {
      const bytes = pendingBytes === 0 ? chunk.subarray(start, end) : concat([...pending, chunk.subarray(start, end)]);
      pending = [];
      pendingBytes = 0;
      const item = parseLine(name, bytes, line++, options);
      if (item !== null) yield item;
      start = end + 1;
    }
    if (start < chunk.length) {
      pending.push(chunk.slice(start)); // the chunk's buffer may be reused by its source
      pendingBytes += chunk.length - start;
    }
  }
  if (pendingBytes > 0) {
    const item = parseLine(name, concat(pending, pendingBytes), line, options);
    if (item !== null) yield item;
  }
}

function concat(parts: readonly Uint8Array[], total = parts.reduce((n, p) => n + p.length, 0)): Uint8Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
