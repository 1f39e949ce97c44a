// The `--tokens DIR` source for gym-observed: `DIR/<rollout_id>.tokens.jsonl`, one entry a line.
import { closeSync, fstatSync, openSync, readFileSync, constants } from "node:fs";
import { join } from "node:path";
import type { TokenEntries, TokenSource } from "./types.js";
import { FormatError } from "./values.js";
import { reasonOf } from "../ingest/file-error.js";
import { TOKEN_FILE_SUFFIX, tokenEntries } from "./token-files.js";

export function tokenDirectory(dir: string): TokenSource {
  const pathOf = (rolloutId: string) => join(dir, `${rolloutId}${TOKEN_FILE_SUFFIX}`);
  return {
    describe: pathOf,
    load(rolloutId: string): TokenEntries | null {
      // A rollout id is data from the input: it must not walk out of DIR.
      if (/[/\\\0]/.test(rolloutId) || rolloutId === "." || rolloutId === "..") {
        throw new FormatError("unsafe_rollout_id", `rollout id ${JSON.stringify(rolloutId)} cannot name a token file`);
      }
      const file = pathOf(rolloutId);
      let bytes: Buffer;
      let fd: number;
      try {
        // Non-blocking open: a named pipe there must not hang the run before fstat refuses it.
        fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
        throw new FormatError("unreadable_token_file", `cannot read ${file}: ${reasonOf(error)}`);
      }
      try {
        // Only a regular file: a FIFO would block every rollout after it, /dev/zero never end.
        const stat = fstatSync(fd);
        if (!stat.isFile()) throw new FormatError("unreadable_token_file", `cannot read ${file}: ${stat.isDirectory() ? "is a directory" : "not a regular file"}`);
        bytes = readFileSync(fd);
      } catch (error) {
        if (error instanceof FormatError) throw error;
        throw new FormatError("unreadable_token_file", `cannot read ${file}: ${reasonOf(error)}`);
      } finally {
        closeSync(fd);
      }
      return tokenEntries(file, bytes);
    },
  };
}
