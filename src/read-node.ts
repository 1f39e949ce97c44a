// readRollouts() in Node: read-rollouts.ts, plus file paths (`.json` one value, `.jsonl` or any
// other name JSONL unless it opens like one value, as the CLI reads them), a token directory given
// by its path, and the trajectory files beside a file (atif's subagents, a Harbor trial's reward).
import { createReadStream } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import type { TokenSource } from "./formats/types.js";
import { readChunks } from "./formats/stream.js";
import { FileError, isSystemError } from "./files/file-error.js";
import { tokenDirectory } from "./files/tokens-dir.js";
import { trajectoryFiles } from "./files/trajectory-files.js";
import {
  readOptions,
  readRolloutBytes,
  rolloutsOf,
  type ByteInput,
  type ReadRollout,
  type ReadRolloutsOptions,
} from "./read-rollouts.js";

export interface NodeReadRolloutsOptions extends Omit<ReadRolloutsOptions, "tokens"> {
  /** gym-observed: the directory of `<rollout_id>.tokens.jsonl` files (`--tokens DIR`), or a TokenSource. */
  tokens?: string | TokenSource;
}

/**
 * Every rollout of an input, in any format the CLI reads: a file path (or file: URL), bytes, a
 * Node or web stream, or a Blob. Rejected values go to `onRejected` (default console.warn) with
 * the CLI's one-line message, and reading goes on. A file that cannot be read throws
 * `cannot read PATH: reason`.
 */
export function readRollouts(
  source: string | URL | ByteInput | NodeJS.ReadableStream,
  options: NodeReadRolloutsOptions = {},
): AsyncGenerator<ReadRollout> {
  const tokens = typeof options.tokens === "string" ? tokenDirectory(options.tokens) : options.tokens;
  const base: ReadRolloutsOptions = { ...options, tokens };
  if (typeof source !== "string" && !(source instanceof URL)) return readRolloutBytes(source as ByteInput, base);
  const path = source instanceof URL ? fileURLToPath(source) : source;
  const name = options.name ?? path;
  const beside = (document: boolean) => options.trajectories ?? trajectoryFiles(dirname(path), { trial: document });
  return rolloutsOf(
    readChunks(name, fileChunks(path), (document) => readOptions(base, beside(document))),
    options.onRejected,
  );
}

async function* fileChunks(path: string): AsyncGenerator<Uint8Array> {
  const stream = createReadStream(path);
  try {
    for await (const chunk of stream) yield chunk as Uint8Array;
  } catch (error) {
    if (isSystemError(error)) throw new FileError("read", path, error);
    throw error;
  } finally {
    stream.destroy();
  }
}
