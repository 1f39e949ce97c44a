// readRollouts(): any input format the CLI reads, as canonical rollouts for cf.plan, with the
// CLI's validation and its one-line rejections. This is the part both entries share (bytes, a
// stream, a Blob); the Node entry adds file paths and `--tokens`-style directories
// (read-node.ts).
//   for await (const rollout of readRollouts(bytes, { from: "atif" })) cf.plan(rollout).release();
import type { Diagnostic, Rollout } from "./types.js";
import type { FromOption, TokenSource, TrajectoryFiles } from "./formats/types.js";
import type { ReadItem, ReadOptions } from "./formats/text.js";
import { readChunks } from "./formats/stream.js";
import { rejectionLine } from "./messages.js";

/** What readRollouts takes in every entry. */
export interface ReadRolloutsOptions {
  /** The input format, as `--from` (default `auto`: told apart per value). */
  from?: FromOption;
  /** gym-observed: where token entries are (the Node entry also takes a directory path). */
  tokens?: TokenSource;
  /** gym-compaction: the model's media placeholder token ids (`--media-token`). */
  mediaTokens?: readonly number[];
  /** atif: the reward of every rollout (`--reward`). */
  reward?: number;
  /** atif: where subagent and continuation trajectory files are (the Node entry: beside the file). */
  trajectories?: TrajectoryFiles;
  /**
   * How messages name the input, and what tells a one-value `.json` input from JSONL (default:
   * the path, else `<input>`; an input named neither is JSONL unless it opens with `{` or `[` alone).
   */
  name?: string;
  /**
   * Called for each value that is not a rollout, with the line the CLI writes for it; the values
   * after it are read on. Default: that line goes to console.warn.
   */
  onRejected?: (rejection: ReadRejection) => void;
}

/** A value readRollouts did not yield, as the CLI reports it. */
export interface ReadRejection {
  /** `name:line`, `name`, or `name[i]` (an element of a `.json` array). */
  where: string;
  line?: number;
  rolloutId: string | null;
  /** SPEC's reason (`invalid_rollout`, `malformed_json`, ...) and the importer's finer code. */
  reason: string;
  code: string;
  detail: string;
  /** `where: rejected (reason, code): detail`, one line. */
  message: string;
}

/** A canonical rollout, with the import's notes (`diagnostics`, as `convert` writes them) when it has any. */
export type ReadRollout = Rollout & { diagnostics?: Diagnostic[] };

/** Bytes in any of the shapes a browser or Node hands them over. */
export type ByteInput =
  | Uint8Array
  | ArrayBuffer
  | Blob
  | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array>
  | Iterable<Uint8Array>;

/** Reads an input of bytes (browser-safe): its rollouts, rejections to `onRejected`. */
export function readRolloutBytes(source: ByteInput, options: ReadRolloutsOptions = {}): AsyncGenerator<ReadRollout> {
  const name = options.name ?? "<input>";
  return rolloutsOf(
    readChunks(name, chunksOf(source), () => readOptions(options)),
    options.onRejected,
  );
}

/** The options the format readers take (ReadOptions) from readRollouts'. */
export function readOptions(options: ReadRolloutsOptions, trajectories = options.trajectories): ReadOptions {
  const out: ReadOptions = { from: options.from ?? "auto" };
  if (options.tokens !== undefined) out.tokens = options.tokens;
  if (options.mediaTokens !== undefined) out.mediaTokens = options.mediaTokens;
  if (options.reward !== undefined) out.reward = options.reward;
  if (trajectories !== undefined) out.trajectories = trajectories;
  return out;
}

/** The rollouts of read items; each rejection goes to `onRejected` as the CLI's line. */
export async function* rolloutsOf(
  items: AsyncIterable<ReadItem>,
  onRejected: (rejection: ReadRejection) => void = (r) => console.warn(r.message),
): AsyncGenerator<ReadRollout> {
  for await (const { where, line, result } of items) {
    if (result.ok) {
      yield result.diagnostics.length === 0 ? result.rollout : { ...result.rollout, diagnostics: result.diagnostics };
      continue;
    }
    const rejection: ReadRejection = {
      where,
      rolloutId: result.rolloutId,
      reason: result.reason,
      code: result.code,
      detail: result.detail,
      message: rejectionLine(where, result.reason, result.detail, result.code),
    };
    if (line !== undefined) rejection.line = line;
    onRejected(rejection);
  }
}

/** Byte chunks of any ByteInput, read as they come. */
export async function* chunksOf(source: ByteInput): AsyncGenerator<Uint8Array> {
  if (source instanceof Uint8Array) yield source;
  else if (source instanceof ArrayBuffer) yield new Uint8Array(source);
  else if (typeof Blob !== "undefined" && source instanceof Blob) yield* chunksOf(source.stream());
  else if (typeof ReadableStream !== "undefined" && source instanceof ReadableStream) {
    const reader = source.getReader();
    try {
      for (let next = await reader.read(); !next.done; next = await reader.read()) yield next.value;
    } finally {
      reader.releaseLock();
    }
  } else if (Symbol.asyncIterator in (source as object)) {
    for await (const chunk of source as AsyncIterable<Uint8Array>) yield bytesOf(chunk);
  } else if (Symbol.iterator in (source as object)) {
    for (const chunk of source as Iterable<Uint8Array>) yield bytesOf(chunk);
  } else {
    throw new TypeError(`readRollouts: cannot read ${typeof source} (expected bytes, a stream, or a Blob)`);
  }
}

/** A chunk as bytes (a stream that yields strings has been given an encoding: it is encoded back). */
function bytesOf(chunk: unknown): Uint8Array {
  if (chunk instanceof Uint8Array) return chunk;
  if (typeof chunk === "string") return new TextEncoder().encode(chunk);
  throw new TypeError(`readRollouts: a stream chunk is ${typeof chunk}, expected bytes`);
}
