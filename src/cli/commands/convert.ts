// `callforest convert`: input rollouts in any supported format -> canonical rollouts as JSONL.
// One output line per accepted input value; each rejected one is one stderr line naming
// file:line and reason, and the rest go on.
import type { Command } from "../vendor.js";
import { readRollouts, rolloutToJson } from "../../ingest/read.js";
import { inputsOrStdin } from "../../formats/text.js";
import { errorLine, oneLine, rejectionLine } from "../../messages.js";
import { withSinks } from "../../ingest/sink.js";
import { StrictFailure, UsageError } from "../errors.js";
import { addInputOptions, checkInputs, checkOutputs, inputHelp, type ReadArguments } from "../inputs.js";

interface ConvertOptions extends ReadArguments {
  to: string;
  output?: string;
  strict?: boolean;
}

export function register(program: Command): void {
  const command = program
    .command("convert")
    .description(
      "Write rollouts (callforest, NeMo Gym rows or Responses objects, gym-observed captures, " +
        "compaction-agent responses) as canonical JSONL.",
    )
    .argument("[input...]", inputHelp(true))
    .option("--to <format>", "output format: callforest", "callforest")
    .option("-o, --output <file>", "write here instead of stdout")
    .option("--strict", "exit 1 when any input value was rejected");
  addInputOptions(command, { backend: false, media: true }).action(
    async (inputs: string[], options: ConvertOptions) => {
      await convert(inputs, options);
    },
  );
}

async function convert(inputs: string[], options: ConvertOptions): Promise<void> {
  if (options.to !== "callforest") throw new UsageError(`unknown --to format '${options.to}': expected callforest`);
  const sources = inputsOrStdin(inputs);
  const read = checkInputs(sources, options);
  checkOutputs(sources, [["-o", options.output]]);
  let rejected = 0;
  let total = 0;
  await withSinks([options.output], async ([out]) => {
    for await (const item of readRollouts(inputs, read)) {
      total++;
      if (item.result.ok) {
        let line: string;
        try {
          line = rolloutToJson(item.result.rollout, item.result.diagnostics);
        } catch (error) {
          // What JSON cannot hold (a number out of range, a value nested deeper than
          // JSON.stringify recurses): that value only, then on with the rest.
          if (!(error instanceof RangeError)) throw error;
          rejected++;
          process.stderr.write(
            oneLine(`${item.where}: not converted: it cannot be written back as JSON (${errorLine(error)})`) + "\n",
          );
          continue;
        }
        await out!.write(line + "\n");
      } else {
        rejected++;
        process.stderr.write(
          rejectionLine(item.where, item.result.reason, item.result.detail, item.result.code) + "\n",
        );
      }
    }
  });
  if (options.strict && rejected > 0) throw new StrictFailure(`${rejected} of ${total} input values rejected`);
}
