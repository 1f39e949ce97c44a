// The `--tokens DIR` source for gym-observed: `DIR/<rollout_id>.tokens.jsonl`, one entry a line.
import { isUtf8 } from "node:buffer";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { TokenEntries, TokenSource } from "./types.js";
import { FormatError } from "./values.js";
import { isStringTooLong } from "./text.js";
import { parseJsonLines } from "./token-files.js";

export function tokenDirectory(dir: string): TokenSource {
  const pathOf = (rolloutId: string) => join(dir, `${rolloutId}.tokens.jsonl`);
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
        throw new FormatError("unreadable_token_file", `cannot read ${file}: ${(error as Error).message.split("\n")[0]}`);
      }
      // Strict, as every other reader: bad bytes are never silently replaced.
      if (!isUtf8(bytes)) throw new FormatError("unreadable_token_file", `${file} is not UTF-8`);
      let text: string;
      try {
        text = bytes.toString("utf8");
      } catch (error) {
        if (!isStringTooLong(error)) throw error;
        throw new FormatError("token_file_too_large", `${file}: ${bytes.length} bytes are more than one JavaScript string can hold`, "rollout_too_large");
      }
      return { file, lines: parseJsonLines(text) };
    },
  };
}
