// `callforest convert`: input rollouts in any supported format -> canonical rollouts as JSONL.
// One output line per accepted input value; each rejected one is one stderr line naming
// file:line and reason, and the rest go on.
import { createWriteStream, statSync } from "node:fs";
import type { Writable } from "node:stream";
import type { Command } from "commander";
import { FROM_OPTIONS, parseFrom, type FormatRejection, type FromOption } from "../../formats/index.js";
import { readRollouts, rolloutToJson } from "../../formats/read.js";
import { tokenDirectory } from "../../formats/tokens-dir.js";
import { StrictFailure, UsageError } from "../errors.js";

interface ConvertOptions {
  from: string;
  to: string;
  tokens?: string;
  output?: string;
  strict?: boolean;
}

export function register(program: Command): void {
  program
    .command("convert")
    .description("Write rollouts (callforest, NeMo Gym rows or Responses objects, gym-observed captures) as canonical JSONL.")
    .argument("[input...]", "JSONL files (one rollout a line), .json files, or - for stdin (default)")
    .option("--from <format>", `input format: ${FROM_OPTIONS.join(", ")}`, "auto")
    .option("--to <format>", "output format: callforest", "callforest")
    .option("--tokens <dir>", "gym-observed: directory of <rollout_id>.tokens.jsonl token entries")
    .option("-o, --output <file>", "write here instead of stdout")
    .option("--strict", "exit 1 when any input value was rejected")
    .action(async (inputs: string[], options: ConvertOptions) => {
      await convert(inputs, options);
    });
}

/** A rejection as one stderr line: `file:line: reason (code): detail`. */
export function rejectionLine(where: string, rejection: FormatRejection): string {
  const code = rejection.code === rejection.reason ? "" : ` (${rejection.code})`;
  return `${where}: ${rejection.reason}${code}: ${rejection.detail}`;
}

async function convert(inputs: string[], options: ConvertOptions): Promise<void> {
  const from = parseFrom(options.from);
  if (from === null) throw new UsageError(`unknown --from format '${options.from}': expected ${FROM_OPTIONS.join(", ")}`);
  if (options.to !== "callforest") throw new UsageError(`unknown --to format '${options.to}': expected callforest`);
  checkInputs(inputs, from, options.tokens);

  const out: Writable = options.output ? createWriteStream(options.output) : process.stdout;
  let rejected = 0;
  let total = 0;
  try {
    const tokens = options.tokens === undefined ? undefined : tokenDirectory(options.tokens);
    for await (const item of readRollouts(inputs, { from, tokens })) {
      total++;
      if (item.result.ok) {
        await write(out, rolloutToJson(item.result.rollout, item.result.diagnostics) + "\n");
      } else {
        rejected++;
        process.stderr.write(rejectionLine(item.where, item.result) + "\n");
      }
    }
  } finally {
    if (out !== process.stdout) await new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())));
  }
  if (options.strict && rejected > 0) throw new StrictFailure(`${rejected} of ${total} input values rejected`);
}

/** Fails before any output is written when an input or the token directory cannot be used. */
function checkInputs(inputs: string[], from: FromOption, tokens: string | undefined): void {
  for (const input of inputs) {
    if (input === "-") continue;
    const kind = statKind(input);
    if (kind === null) throw new UsageError(`cannot read ${input}: no such file`);
    if (kind === "dir") throw new UsageError(`cannot read ${input}: is a directory`);
  }
  if (tokens !== undefined) {
    const kind = statKind(tokens);
    if (kind !== "dir") throw new UsageError(`--tokens ${tokens}: ${kind === null ? "no such directory" : "not a directory"}`);
  } else if (from === "gym-observed") {
    throw new UsageError("--from gym-observed needs --tokens DIR (the <rollout_id>.tokens.jsonl files)");
  }
}

function statKind(path: string): "file" | "dir" | null {
  try {
    return statSync(path).isDirectory() ? "dir" : "file";
  } catch {
    return null;
  }
}

function write(out: Writable, text: string): Promise<void> | void {
  if (out.write(text)) return;
  return new Promise((resolve) => out.once("drain", () => resolve()));
}
