// Options and checks shared by the commands that read rollouts.
import { fstatSync, lstatSync, readlinkSync, realpathSync, statSync, type Stats } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import type { Command } from "./vendor.js";
import { FROM_OPTIONS, parseFrom, type FromOption } from "../formats/index.js";
import { tokenDirectory } from "../files/tokens-dir.js";
import { inputName } from "../formats/text.js";
import type { ReadOptions } from "../ingest/read.js";
import { reasonOf } from "../files/file-error.js";
import { standardStream } from "../ingest/sink.js";
import type { BackendName } from "../types.js";
import { UsageError } from "./errors.js";

/** `--from` and `--tokens` (what every command that reads rollouts takes), and `--media-token`. */
export interface ReadArguments {
  from: string;
  tokens?: string;
  /** `--media-token ID[,ID...]`, on the commands that add it (see addInputOptions). */
  mediaToken?: string;
  /** `--reward N` (atif), on the same commands. */
  reward?: string;
}

/** ReadArguments and `--backend`: the commands that also plan. */
export interface InputOptions extends ReadArguments {
  backend: string;
}

/**
 * Adds `--from` and `--tokens` (and, unless `backend` is false, `--backend`; with `media`,
 * `--media-token`: only the commands that convert in this process, not `view`, whose page reads
 * its input itself).
 */
export function addInputOptions(command: Command, { backend = true, media = false } = {}): Command {
  command
    .option("--from <format>", `input format: ${FROM_OPTIONS.join(", ")}`, "auto")
    .option("--tokens <dir>", "gym-observed: directory of <rollout_id>.tokens.jsonl token entries");
  if (media) {
    command.option(
      "--media-token <ids>",
      "gym-compaction: the model's media placeholder token id(s), comma-separated; " +
        "each media occurrence is placed on a run of them in the prompt",
    );
    command.option(
      "--reward <number>",
      "atif: the reward of every rollout read (else the Harbor trial's verifier reward)",
    );
  }
  if (backend) addBackendOption(command);
  return command;
}

/** The largest token id SPEC allows (2^31 - 1). */
const MAX_TOKEN_ID = 0x7fffffff;

/** `--media-token ID[,ID...]`: token ids in [0, 2^31-1], decimal digits only, or a UsageError. */
export function parseMediaTokens(text: string): number[] {
  const parts = text.split(",");
  if (!parts.every((part) => /^\d+$/.test(part) && Number(part) <= MAX_TOKEN_ID)) {
    throw new UsageError(
      `--media-token must be token ids (integers in [0, ${MAX_TOKEN_ID}]) separated by commas, got '${text}'`,
    );
  }
  return parts.map(Number);
}

/** `--backend wasm|ts`, default wasm (read it with parseBackend). */
export function addBackendOption(command: Command): Command {
  return command.option("--backend <name>", "wasm or ts (pure TypeScript, same results)", "wasm");
}

/**
 * An option's whole number in [min, max] (written in decimal digits only: no signs, exponents or
 * fractions), or a UsageError naming the option and what it got.
 */
export function parseInteger(option: string, text: string, { min = 1, max = Number.MAX_SAFE_INTEGER } = {}): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value) || value < min) {
    throw new UsageError(
      min === 1
        ? `${option} must be a positive integer, got '${text}'`
        : `${option} must be an integer >= ${min}, got '${text}'`,
    );
  }
  if (value > max) throw new UsageError(`${option} must be at most ${max}, got '${text}'`);
  return value;
}

/** What an INPUT argument may be, for --help (the rules of src/ingest/read.ts). */
export function inputHelp(stdinDefault: boolean): string {
  return (
    ".jsonl (one rollout a line; blank lines are skipped but counted), .json (one rollout or an array of them), " +
    `or - for stdin${stdinDefault ? " (the default)" : ""}; ` +
    `stdin, or a file of another name, is JSONL unless its first line is { or [ alone (one pretty-printed value)`
  );
}

export function parseBackend(name: string): BackendName {
  if (name === "wasm" || name === "ts") return name;
  throw new UsageError(`unknown --backend '${name}': expected wasm or ts`);
}

/**
 * Refuses an output file that is also an input (or the same file twice as outputs): opening it
 * for writing would empty the input before a byte of it was read. Two outputs on one standard
 * stream are refused too (rows and reports would mix). `outputs` pairs each path with the option
 * that named it; null is none, undefined stdout (see standardStream).
 */
export function checkOutputs(inputs: readonly string[], outputs: readonly [string, string | undefined | null][]): void {
  // Regular files, and a named pipe written twice (two streams would interleave mid-line);
  // /dev/null or a terminal may well be named twice.
  const identityOf = (stat: Stats) => (stat.isFile() || stat.isFIFO() ? `${stat.dev}:${stat.ino}` : null);
  const identity = (path: string): string | null => {
    try {
      return identityOf(statSync(path));
    } catch {
      return `path:${whereCreated(path)}`; // not there yet: two outputs may still name it
    }
  };
  /** The file a standard stream was redirected from or to (`rows - -o x < x` would empty x). */
  const redirected = (fd: number): string | null => {
    try {
      return identityOf(fstatSync(fd));
    } catch {
      return null;
    }
  };
  const files = new Map<string, string>(); // inputs and output files, by identity
  for (const input of inputs) {
    const id = input === "-" ? redirected(0) : identity(input);
    if (id !== null) files.set(id, `the input ${inputName(input)}`);
  }
  const streams = new Map<string, string>(); // "stdout" / "stderr" -> the output on it
  // The files stdout and stderr go to: an output file that is one of them would be emptied under
  // the shell's redirection (`-o log 2>>log`), whatever writes to the stream.
  const streamFiles = new Map<string, string>();
  for (const [fd, where] of [
    [2, "where stderr goes"],
    [1, "where stdout goes"],
  ] as const) {
    const id = redirected(fd);
    if (id !== null) streamFiles.set(id, where);
  }
  const refuse = (named: string, other: string) => {
    throw new UsageError(`${named}: is also ${other}; write the output somewhere else`);
  };
  for (const [option, path] of outputs) {
    if (path === null) continue;
    const named = path === undefined ? `${option} (stdout)` : `${option} ${path}`;
    const stream = standardStream(path);
    if (stream === null) {
      const id = identity(path!);
      if (id === null) continue;
      const other = files.get(id) ?? streamFiles.get(id);
      if (other !== undefined) refuse(named, other);
      files.set(id, named);
      continue;
    }
    const sharing = streams.get(stream);
    if (sharing !== undefined)
      throw new UsageError(`${named}: ${sharing} writes to ${stream} too; write one of them somewhere else`);
    streams.set(stream, named);
    // A stream redirected to an input (`rows x >> x`) would read its own output back. (stdout
    // and stderr on one file, as `>f 2>&1`, is the shell's choice: both append in turn.)
    const id = redirected(stream === "stdout" ? 1 : 2);
    if (id === null) continue;
    const other = files.get(id);
    if (other !== undefined) refuse(named, other);
    streamFiles.set(id, named);
  }
}

/**
 * The real path a file that does not exist yet would be created at: a symbolic link (dangling, or
 * to a missing file) is followed, and so is every link among its directories, so `-o d/x --report
 * link-to-d/x` (or a dangling `--report` link to `-o`'s file) names one file, as it is.
 */
function whereCreated(path: string, depth = 0): string {
  const absolute = resolve(path);
  if (depth < 40) {
    try {
      if (lstatSync(absolute).isSymbolicLink())
        return whereCreated(resolve(dirname(absolute), readlinkSync(absolute)), depth + 1);
    } catch {
      // not there at all
    }
  }
  const parent = dirname(absolute);
  if (parent === absolute) return absolute;
  let realParent: string;
  try {
    realParent = realpathSync(parent);
  } catch {
    realParent = whereCreated(parent, depth + 1);
  }
  return resolve(realParent, basename(absolute));
}

/**
 * Reading stdin from a terminal looks like a hang to whoever forgot the file name: say what the
 * command waits for.
 */
function noteTerminalStdin(): void {
  if (process.stdin.isTTY !== true) return;
  process.stderr.write(
    "callforest: reading rollouts from stdin (a terminal): paste JSONL and end with Ctrl-D, " +
      "or name a file (--help for usage)\n",
  );
}

/**
 * Fails before any output is written when an input, `--from`, `--media-token` or the token
 * directory cannot be used.
 */
export function checkInputs(inputs: readonly string[], options: ReadArguments): ReadOptions & { from: FromOption } {
  const from = parseFrom(options.from);
  if (from === null)
    throw new UsageError(`unknown --from format '${options.from}': expected ${FROM_OPTIONS.join(", ")}`);
  const media: ReadOptions =
    options.mediaToken === undefined ? {} : { mediaTokens: parseMediaTokens(options.mediaToken) };
  if (options.reward !== undefined) media.reward = parseReward(options.reward);
  for (const input of inputs) {
    let isDirectory: boolean;
    try {
      // Stdin redirected from a directory reads as empty: refuse it as a named one is.
      isDirectory = input === "-" ? fstatSync(0).isDirectory() : statSync(input).isDirectory();
    } catch (error) {
      if (input === "-") continue; // no stdin at all: it reads as empty
      throw new UsageError(`cannot read ${input}: ${reasonOf(error)}`);
    }
    if (isDirectory) throw new UsageError(`cannot read ${inputName(input)}: is a directory`);
  }
  if (inputs.includes("-")) noteTerminalStdin();
  if (options.tokens === undefined) {
    if (from === "gym-observed")
      throw new UsageError("--from gym-observed needs --tokens DIR (the <rollout_id>.tokens.jsonl files)");
    return { from, ...media };
  }
  let tokensIsDirectory = false;
  try {
    tokensIsDirectory = statSync(options.tokens).isDirectory();
  } catch (error) {
    const reason = reasonOf(error);
    throw new UsageError(`--tokens ${options.tokens}: ${reason === "no such file" ? "no such directory" : reason}`);
  }
  if (!tokensIsDirectory) throw new UsageError(`--tokens ${options.tokens}: not a directory`);
  return { from, tokens: tokenDirectory(options.tokens), ...media };
}

/** `--reward N`: a finite number. */
function parseReward(text: string): number {
  const reward = Number(text);
  if (text.trim() === "" || !Number.isFinite(reward))
    throw new UsageError(`--reward ${text}: expected a finite number`);
  return reward;
}

/**
 * --layout and --capacity, as rows, show and draw take them: bins are packed records, so a
 * capacity implies --layout packed and refuses --layout rows.
 */
export function parseLayout(
  layout: string | undefined,
  capacity: string | undefined,
): { layout: "rows" | "packed"; capacity?: number } {
  if (layout !== undefined && layout !== "rows" && layout !== "packed")
    throw new UsageError(`unknown --layout '${layout}': expected rows or packed`);
  if (capacity === undefined) return { layout: layout ?? "rows" };
  if (layout === "rows")
    throw new UsageError("--capacity lays out bins of packed records: it needs --layout packed, not rows");
  return { layout: "packed", capacity: parseInteger("--capacity", capacity, { max: 2 ** 31 - 1 }) };
}
