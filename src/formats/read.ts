// Reading input files as canonical rollouts: JSONL one value a line (blank lines skipped), a
// `.json` file as one value (or, when it holds an array, one value per element), `-` = stdin.
// This is the plain JSON.parse path; the fast reader of issue 3 may replace it and still hand its
// parsed values to toCanonical.
import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import { readFile } from "node:fs/promises";
import type { Diagnostic, Rollout } from "../types.js";
import { formatFloat32 } from "../output.js";
import { toCanonical } from "./index.js";
import type { ConvertResult, FormatContext, FromOption } from "./types.js";

export interface ReadItem {
  /** Where the value came from, for messages: `file:line`, `file`, `file[i]`, `<stdin>:line`. */
  where: string;
  /** 1-based input line (JSONL only). */
  line?: number;
  result: ConvertResult;
}

export interface ReadOptions extends FormatContext {
  from?: FromOption;
}

/** Every input value of every file in order, converted. Unreadable files throw (a usage error). */
export async function* readRollouts(inputs: readonly string[], options: ReadOptions = {}): AsyncGenerator<ReadItem> {
  const from = options.from ?? "auto";
  const files = inputs.length === 0 ? ["-"] : inputs;
  for (const file of files) {
    if (file !== "-" && file.toLowerCase().endsWith(".json")) {
      yield* readJsonFile(file, from, options);
      continue;
    }
    const name = file === "-" ? "<stdin>" : file;
    const stream = file === "-" ? process.stdin : createReadStream(file, { encoding: "utf8" });
    const lines = createInterface({ input: stream, crlfDelay: Infinity });
    let number = 0;
    for await (const text of lines) {
      number++;
      if (text.trim().length === 0) continue;
      yield { where: `${name}:${number}`, line: number, result: parseAndConvert(text, from, options) };
    }
  }
}

async function* readJsonFile(file: string, from: FromOption, context: FormatContext): AsyncGenerator<ReadItem> {
  const text = await readFile(file, "utf8");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    yield { where: file, result: notJson(error) };
    return;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) yield { where: `${file}[${i}]`, result: toCanonical(value[i], from, context) };
  } else {
    yield { where: file, result: toCanonical(value, from, context) };
  }
}

function parseAndConvert(text: string, from: FromOption, context: FormatContext): ConvertResult {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return notJson(error);
  }
  return toCanonical(value, from, context);
}

function notJson(error: unknown): ConvertResult {
  const why = error instanceof Error ? error.message.split("\n")[0] : String(error);
  return { ok: false, format: null, reason: "malformed_json", code: "malformed_json", detail: `not JSON (${why})`, rolloutId: null };
}

/**
 * A canonical rollout as one JSONL line. Import diagnostics go in a `diagnostics` field (SPEC
 * ignores unknown fields; `--from callforest` reads them back). Typed arrays are written as JSON
 * arrays, float32 logprobs in their shortest exact form.
 */
export function rolloutToJson(rollout: Rollout, diagnostics: readonly Diagnostic[] = []): string {
  const body = diagnostics.length === 0 ? rollout : { ...rollout, diagnostics };
  return JSON.stringify(body, (_key, value: unknown) => {
    if (value instanceof Float32Array) return Array.from(value, (x) => Number(formatFloat32(x)));
    if (ArrayBuffer.isView(value) && !(value instanceof DataView)) return Array.from(value as unknown as ArrayLike<number>);
    return value;
  });
}
