// Options and checks shared by the commands that read rollouts.
import { statSync } from "node:fs";
import type { Command } from "commander";
import { FROM_OPTIONS, parseFrom, type FromOption } from "../formats/index.js";
import { tokenDirectory } from "../formats/tokens-dir.js";
import type { ReadOptions } from "../formats/read.js";
import type { BackendName } from "../types.js";
import { UsageError } from "./errors.js";

export interface InputOptions {
  from: string;
  tokens?: string;
  backend: string;
}

export function addInputOptions(command: Command): Command {
  return command
    .option("--from <format>", `input format: ${FROM_OPTIONS.join(", ")}`, "auto")
    .option("--tokens <dir>", "gym-observed: directory of <rollout_id>.tokens.jsonl token entries")
    .option("--backend <name>", "wasm or ts (pure TypeScript, same results)", "wasm");
}

export function parseBackend(name: string): BackendName {
  if (name === "wasm" || name === "ts") return name;
  throw new UsageError(`unknown --backend '${name}': expected wasm or ts`);
}

/** Fails before any output is written when an input cannot be read. */
export function checkInputs(inputs: readonly string[], options: InputOptions): ReadOptions & { from: FromOption } {
  const from = parseFrom(options.from);
  if (from === null) throw new UsageError(`unknown --from format '${options.from}': expected ${FROM_OPTIONS.join(", ")}`);
  for (const input of inputs) {
    if (input === "-") continue;
    let isDirectory: boolean;
    try {
      isDirectory = statSync(input).isDirectory();
    } catch {
      throw new UsageError(`cannot read ${input}: no such file`);
    }
    if (isDirectory) throw new UsageError(`cannot read ${input}: is a directory`);
  }
  if (options.tokens === undefined) {
    if (from === "gym-observed") throw new UsageError("--from gym-observed needs --tokens DIR");
    return { from };
  }
  let tokensIsDirectory = false;
  try {
    tokensIsDirectory = statSync(options.tokens).isDirectory();
  } catch {
    throw new UsageError(`--tokens ${options.tokens}: no such directory`);
  }
  if (!tokensIsDirectory) throw new UsageError(`--tokens ${options.tokens}: not a directory`);
  return { from, tokens: tokenDirectory(options.tokens) };
}
