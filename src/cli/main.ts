// The `callforest` command line: one module per command under ./commands.
import { readFileSync } from "node:fs";
import { Command, CommanderError } from "./vendor.js";
import { failureOf } from "./errors.js";
import { outputFailureOf, watchStdio } from "./stdio.js";
import { register as registerRows } from "./commands/rows.js";
import { register as registerShow } from "./commands/show.js";
import { register as registerDemo } from "./commands/demo.js";
import { register as registerConvert } from "./commands/convert.js";
import { register as registerAgentDemo } from "./commands/agent-demo.js";
import { register as registerDraw } from "./commands/draw.js";
import { register as registerView } from "./commands/view.js";

export function buildProgram(): Command {
  const program = new Command("callforest")
    .description("Turn an agent rollout's call forest into training rows with exact token evidence.")
    .showHelpAfterError(false)
    // commander's own argument errors read like every other one: `callforest: ...`, one line.
    .configureOutput({ outputError: (text, write) => write(`callforest: ${text.replace(/^error: /, "")}`) })
    .version(packageVersion(), "-V, --version", "print callforest's version")
    .exitOverride();
  registerRows(program);
  registerShow(program);
  registerDemo(program);
  registerConvert(program);
  registerAgentDemo(program);
  registerDraw(program);
  registerView(program);
  return program;
}

/** The version in the package's package.json (beside dist/ and src/ alike). */
function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string })
    .version;
}

/** Runs the CLI; resolves to the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  watchStdio();
  try {
    await program.parseAsync(argv, { from: "user" });
    // A failed write to stdout reports its error on a later tick.
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
