// `rows -o/--format/--compression/--row-group-rows`: what the rows output is, from its file name
// and the options, or a usage error saying which two disagree.
import { extname } from "node:path";
import { PARQUET_COMPRESSIONS } from "../columnar/parquet.js";
import type { ParquetCompression } from "../columnar/types.js";
import { UsageError } from "./errors.js";
import { parseInteger } from "./inputs.js";

export type RowsFormat = "jsonl" | "parquet" | "arrow" | "arrows";

const FORMATS: readonly RowsFormat[] = ["jsonl", "parquet", "arrow", "arrows"];

/**
 * File name endings that say the format. A name with no ending says nothing (--format decides,
 * default jsonl); any other ending (`.csv`, a typo like `.parqet`) is a usage error unless
 * --format says what to write, so a misspelt name never silently gets JSONL.
 */
const BY_EXTENSION: Record<string, RowsFormat> = {
  ".jsonl": "jsonl",
  ".ndjson": "jsonl",
  ".parquet": "parquet",
  ".arrow": "arrow",
  ".arrows": "arrows",
};

export interface RowsOutput {
  format: RowsFormat;
  /** Parquet only. */
  compression?: ParquetCompression;
  /** Columnar formats only. */
  rowGroupRows?: number;
}

export interface OutputArguments {
  output?: string;
  format?: string;
  compression?: string;
  rowGroupRows?: string;
  /** Whether --mask-format was given (it shapes JSONL only). */
  maskFormatGiven: boolean;
}

export function parseRowsOutput(args: OutputArguments): RowsOutput {
  if (args.format !== undefined && !FORMATS.includes(args.format as RowsFormat)) {
    throw new UsageError(`unknown --format '${args.format}': expected ${FORMATS.join(", ")}`);
  }
  const ending = args.output === undefined ? "" : extname(args.output).toLowerCase();
  const named = BY_EXTENSION[ending];
  const given = args.format as RowsFormat | undefined;
  if (ending !== "" && named === undefined && given === undefined) {
    throw new UsageError(
      `-o ${args.output}: unknown file ending '${ending}': expected ${Object.keys(BY_EXTENSION).join(", ")}, ` +
        "or say what to write with --format",
    );
  }
  if (named !== undefined && given !== undefined && named !== given) {
    throw new UsageError(
      `-o ${args.output} names ${named} output but --format is ${given}: rename the file or drop --format`,
    );
  }
  const format = given ?? named ?? "jsonl";
  const columnar = format !== "jsonl";
  if (args.compression !== undefined) {
    if (format !== "parquet") throw new UsageError(`--compression applies to Parquet output, not ${format}`);
    if (!PARQUET_COMPRESSIONS.includes(args.compression as ParquetCompression)) {
      throw new UsageError(`unknown --compression '${args.compression}': expected ${PARQUET_COMPRESSIONS.join(", ")}`);
    }
  }
  if (args.rowGroupRows !== undefined && !columnar)
    throw new UsageError("--row-group-rows applies to parquet, arrow and arrows output, not jsonl");
  if (args.maskFormatGiven && columnar)
    throw new UsageError(`--mask-format shapes JSONL only: ${format} output holds loss_mask as a list of booleans`);
  return {
    format,
    ...(format === "parquet" ? { compression: (args.compression as ParquetCompression | undefined) ?? "zstd" } : {}),
    ...(args.rowGroupRows !== undefined
      ? { rowGroupRows: parseInteger("--row-group-rows", args.rowGroupRows, { max: 2 ** 31 - 1 }) }
      : {}),
  };
}
