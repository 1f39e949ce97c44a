// Token entries for gym-observed that are not read from a directory: files the caller already
// holds (the page's opened or dropped `<rollout_id>.tokens.jsonl` files). Free of Node APIs, so
// the browser build can use it; src/files/tokens-dir.ts is the `--tokens DIR` source.
import { isBlankLine, isStringTooLong, notJsonDetail, withoutByteOrderMark } from "./text.js";
import type { TokenEntries, TokenLine, TokenSource } from "./types.js";
import { FormatError } from "./values.js";
import { errorLine } from "../messages.js";

/** The ending that names a token file: `<rollout_id>.tokens.jsonl`. */
export const TOKEN_FILE_SUFFIX = ".tokens.jsonl";

/** Whether a file name is a gym-observed token file. */
export function isTokenFileName(name: string): boolean {
  return name.endsWith(TOKEN_FILE_SUFFIX) && name.length > TOKEN_FILE_SUFFIX.length;
}

const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A token file's bytes as entries, read strictly: invalid UTF-8 is refused, never repaired. */
export function tokenEntries(file: string, bytes: Uint8Array): TokenEntries {
  let text: string;
  try {
    text = strict.decode(withoutByteOrderMark(bytes));
  } catch (error) {
    if (isStringTooLong(error)) {
      throw new FormatError(
        "token_file_too_large",
        `${file}: ${bytes.length} bytes are more than one JavaScript string can hold`,
        "rollout_too_large",
      );
    }
    throw new FormatError("unreadable_token_file", `${file} is not UTF-8`);
  }
  return { file, lines: parseJsonLines(text) };
}

/** A token source over files in memory, by name (`<rollout_id>.tokens.jsonl`). */
export function memoryTokenSource(files: ReadonlyMap<string, Uint8Array>): TokenSource {
  const nameOf = (rolloutId: string) => `${rolloutId}${TOKEN_FILE_SUFFIX}`;
  return {
    describe: nameOf,
    load(rolloutId) {
      const bytes = files.get(nameOf(rolloutId));
      return bytes === undefined ? null : tokenEntries(nameOf(rolloutId), bytes);
    },
    // The page's files are picked or dropped, not found in a directory.
    notFound: (rolloutId) => `${nameOf(rolloutId)} was not opened with the rollout file (select or drop them together)`,
  };
}

const encoder = new TextEncoder();

/** JSONL text to parsed lines (1-based numbers); blank lines (the rows command's rule) are skipped. */
function parseJsonLines(text: string): TokenLine[] {
  const out: TokenLine[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (isBlankLine(line)) continue;
    try {
      out.push({ line: i + 1, value: JSON.parse(line) });
    } catch (error) {
      out.push({ line: i + 1, error: notJsonDetail(encoder.encode(line), () => errorLine(error)) });
    }
  }
  return out;
}
