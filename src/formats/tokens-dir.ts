// The `--tokens DIR` source for gym-observed: `DIR/<rollout_id>.tokens.jsonl`, one entry a line.
import { readFileSync } from "node:fs";
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
      try {
        bytes = readFileSync(file);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
        throw new FormatError("unreadable_token_file", `cannot read ${file}: ${reasonOf(error)}`);
      }
      return tokenEntries(file, bytes);
    },
  };
}
