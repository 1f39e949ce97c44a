// The `callforest` command line: one module per command under ./commands.
import { readFileSync } from "node:fs";
import { Command, CommanderError } from "./vendor.js";
import { failureOf } from "./errors.js";
import { outputFailureOf, settleStdio, watchStdio } from "./stdio.js";

type CommandModule = { register(program: Command): void };

/**
 * Each command's module, in help order, loaded when it is needed: a run loads only its own
 * command's code (start-up time counts in every `rows` run: the others' ~60 ms of loading).
 */
const COMMANDS: [string, () => Promise<CommandModule>][] = [
  ["rows", () => import("./commands/rows.js")],
  ["show", () => import("./commands/show.js")],
  ["explain", () => import("./commands/explain.js")],
  ["demo", () => import("./commands/demo.js")],
  ["convert", () => import("./commands/convert.js")],
  ["agent-demo", () => import("./commands/agent-demo.js")],
  ["draw", () => import("./commands/draw.js")],
  ["view", () => import("./commands/view.js")],
];

/** The program with every command, or only `command` (the one a run names). */
export async function buildProgram(command?: string): Promise<Command> {
  const program = new Command("callforest")
    .description("Turn an agent rollout's call forest into training rows with exact token evidence.")
    .showHelpAfterError(false)
    // commander's own argument errors read like every other one: `callforest: ...`, one line.
    .configureOutput({ outputError: (text, write) => write(`callforest: ${text.replace(/^error: /, "")}`) })
    .version(packageVersion(), "-V, --version", "print callforest's version")
    .exitOverride();
  const wanted = COMMANDS.filter(([name]) => command === undefined || name === command);
  for (const module of await Promise.all(wanted.map(([, load]) => load()))) module.register(program);
  return program;
}

/** The version in the package's package.json (beside dist/ and src/ alike). */
function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string })
    .version;
}

/** Runs the CLI; resolves to the process exit code. */
export async function main(argv: string[]): Promise<number> {
  // A run that names a command needs only that one; anything else (help, a typo) gets them all.
  const named = COMMANDS.some(([name]) => name === argv[0]) ? argv[0] : undefined;
  const program = await buildProgram(named);
  watchStdio();
  try {
    await program.parseAsync(argv, { from: "user" });
    // Writes a full pipe still holds succeed or fail only when its reader reads or leaves, and a
    // failed write reports its error on a later tick.
    await settleStdio();
    await new Promise((resolve) => setImmediate(resolve));
    const outputFailure = outputFailureOf();
    if (outputFailure !== null) throw outputFailure;
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // commander already printed help or its own one-line error
      return error.exitCode === 0 ? 0 : 2;
    }
    const failure = failureOf(error);
    if (failure.message !== "") process.stderr.write(`callforest: ${failure.message}\n`);
    return failure.exitCode;
  }
}
