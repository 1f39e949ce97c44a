// `callforest show`: each rollout's forest and rows table, readable in a terminal.
import type { Command } from "../vendor.js";
import { init } from "../../index.js";
import { readRollouts } from "../../ingest/read.js";
import { usePlan } from "../../plan-imported.js";
import { renderPlan } from "../show.js";
import { inputsOrStdin } from "../../formats/text.js";
import { rejectionLine } from "../../messages.js";
import { outputFailed } from "../stdio.js";
import { addInputOptions, checkInputs, parseBackend, parseLayout, inputHelp, type InputOptions } from "../inputs.js";

interface ShowOptions extends InputOptions {
  layout?: string;
  capacity?: string;
}

/** --layout packed: the trees' segment tables; --capacity N: the bins'. */
function layoutOptions(options: ShowOptions): { trees?: boolean; capacity?: number } {
  const { layout, capacity } = parseLayout(options.layout, options.capacity);
  if (capacity !== undefined) return { capacity };
  return layout === "packed" ? { trees: true } : {};
}

export function register(program: Command): void {
  const command = program
    .command("show")
    .description("Print each rollout's call forest and rows table.")
    .argument("[input...]", inputHelp(true))
    .option("--layout <layout>", "rows (default), or packed: also each tree's segment table")
    .option(
      "--capacity <tokens>",
      "with --layout packed: the bins' segment tables instead (at most this many tokens each)",
    );
  addInputOptions(command, { media: true }).action(async (inputs: string[], options: ShowOptions) => {
    const layout = layoutOptions(options);
    inputs = [...inputsOrStdin(inputs)];
    const read = checkInputs(inputs, options);
    const cf = await init({ backend: parseBackend(options.backend) });
    let first = true;
    for await (const item of readRollouts(inputs, read)) {
      if (outputFailed()) break; // nobody reads any more (main reports it)
      if (!first) process.stdout.write("\n");
      first = false;
      if (!item.result.ok) {
        process.stdout.write(
          rejectionLine(item.where, item.result.reason, item.result.detail, item.result.code) + "\n",
        );
        continue;
      }
      // A rejection names where it is, as an import rejection does.
      const text = usePlan(
        cf,
        item.result,
        item.line,
        (plan, report) =>
          report.status === "rejected"
            ? rejectionLine(item.where, report.reason!, report.detail) + "\n"
            : renderPlan(plan),
        layout,
      );
      process.stdout.write(text);
    }
  });
}
