// `rows --output-dir DIR`: a partitioned dataset, one output file (a part) per input shard.
// Each part is its own run: written whole or not at all, with its own report, so rerunning one
// shard replaces only its part, and a killed run leaves hidden partial files, never a part that
// looks complete. Reports go under DIR/_reports, which dataset readers skip (pyarrow ignores names
// starting with `_` or `.`; a glob such as DIR/*.parquet does not descend into it).
import { mkdirSync, readdirSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { FileError, reasonOf } from "../files/file-error.js";
import { UsageError } from "./errors.js";
import type { RowsFormat } from "./output-format.js";

/** Reports of a partitioned dataset: DIR/_reports/<part stem>.jsonl. */
export const REPORTS_DIR = "_reports";

export interface Part {
  /** The input shard. */
  input: string;
  /** DIR/<shard stem>.<format>. */
  output: string;
  /** DIR/_reports/<shard stem>.jsonl. */
  report: string;
}

/** Input endings dropped from a shard's name to name its part. */
const INPUT_ENDINGS = /\.(jsonl|ndjson|json)$/i;

/** A directory's shards: its regular files, hidden ones (`.`, `_`) aside, in name order. */
function filesOf(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    throw new UsageError(`cannot read ${dir}: ${reasonOf(error)}`);
  }
  return names
    .filter((name) => !name.startsWith(".") && !name.startsWith("_"))
    .sort()
    .map((name) => join(dir, name))
    .filter((path) => statSync(path, { throwIfNoEntry: false })?.isFile() === true);
}

/** The shards `inputs` name: files as they are, a directory as its files (see filesOf). */
export function shardsOf(inputs: readonly string[]): string[] {
  if (inputs.length === 0 || inputs.includes("-"))
    throw new UsageError("--output-dir writes one part per input file: name the shards (files or a directory)");
  const shards: string[] = [];
  for (const input of inputs) {
    const stat = statSync(input, { throwIfNoEntry: false });
    if (stat?.isDirectory()) {
      const files = filesOf(input);
      if (files.length === 0) throw new UsageError(`${input}: a directory with no shards in it`);
      shards.push(...files);
    } else {
      shards.push(input); // a file, or what checkInputs will name as missing
    }
  }
  return shards;
}

/**
 * The part and report of each shard under `dir`. Usage errors: two shards of one name, and a
 * shard whose part would start with `_` or `.` — pyarrow.dataset skips such files (DuckDB's glob
 * does not, so the two would read different tables), and `_reports` is the reports' directory.
 */
export function partsOf(shards: readonly string[], dir: string, format: RowsFormat): Part[] {
  const byName = new Map<string, string>();
  return shards.map((input) => {
    const stem = basename(input).replace(INPUT_ENDINGS, "");
    if (stem === "" || /^[._]/.test(stem))
      throw new UsageError(
        `${input} would write the part ${stem}.${format}, which dataset readers such as pyarrow skip ` +
          "(a name starting with '_' or '.'): rename the shard",
      );
    const other = byName.get(stem);
    if (other !== undefined)
      throw new UsageError(`${other} and ${input} would both write the part ${stem}.${format}: rename one`);
    byName.set(stem, input);
    return { input, output: join(dir, `${stem}.${format}`), report: join(dir, REPORTS_DIR, `${stem}.jsonl`) };
  });
}

/** Makes DIR and DIR/_reports (as mkdir -p). */
export function makeDatasetDirs(dir: string): void {
  try {
    mkdirSync(join(dir, REPORTS_DIR), { recursive: true });
  } catch (error) {
    throw new FileError("write", dir, error);
  }
}
