// `callforest show`: each rollout's forest and rows table, readable in a terminal.
import type { Command } from "commander";
import { init } from "../../index.js";
import { readRollouts } from "../../formats/read.js";
import { withImport } from "../../formats/index.js";
import { renderPlan } from "../../show.js";
import { oneLine } from "../../rejection.js";
import { outputFailed } from "../main.js";
import { addInputOptions, checkInputs, parseBackend, type InputOptions } from "../inputs.js";

export function register(program: Command): void {
  const command = program
    .command("show")
    .description("Print each rollout's call forest and rows table.")
    .argument("<input...>", ".jsonl (one rollout a line), .json (one rollout or an array of them), or - for stdin");
  addInputOptions(command).action(async (inputs: string[], options: InputOptions) => {
    const read = checkInputs(inputs, options);
    const cf = await init({ backend: parseBackend(options.backend) });
    let first = true;
    for await (const item of readRollouts(inputs, read)) {
      if (outputFailed()) break; // nobody reads any more (main reports it)
      if (!first) process.stdout.write("\n");
      first = false;
      if (!item.result.ok) {
        process.stdout.write(oneLine(`${item.where}: rejected (${item.result.reason}): ${item.result.detail}`) + "\n");
        continue;
      }
      const plan = cf.plan(item.result.rollout, { line: item.line });
      const report = withImport(plan.report, item.result);
      // A rejection names where it is, as an import rejection does.
      process.stdout.write(report.status === "rejected" ? oneLine(`${item.where}: rejected (${report.reason}): ${report.detail}`) + "\n" : renderPlan(plan));
      plan.release();
    }
  });
}
