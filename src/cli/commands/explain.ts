// `callforest explain`: for every prefix break and every root that is not its agent's first call,
// which call it parted from, where, the text on both sides and a cause; then what the breaks cost
// (docs/breaks.md). The analysis is in src/explain; this module is the command line around it.
import type { Command } from "../vendor.js";
import { init } from "../../index.js";
import { readRollouts } from "../../ingest/read.js";
import { planImported } from "../../plan-imported.js";
import { inputName, inputsOrStdin } from "../../formats/text.js";
import { rejectionLine, oneLine } from "../../messages.js";
import type { TokenDecoder } from "../../tokenizer/decoder.js";
import { analyzeRollout, explainedRecord, type ExplainedCall } from "../../explain/analyze.js";
import { explainRoutes, routeText, type ExplainedRoute } from "../../explain/routes.js";
import type { CauseOptions, ReasoningMarkers } from "../../explain/cause.js";
import { addRollout, emptySummary, summaryLine } from "../../explain/summary.js";
import { idsText, windowText } from "../../explain/window.js";
import { outputFailed } from "../stdio.js";
import { UsageError } from "../errors.js";
import { addInputOptions, checkInputs, inputHelp, parseBackend, type InputOptions } from "../inputs.js";
import { loadTokenizer, TOKENIZER_HELP } from "../tokenizer.js";

interface ExplainOptions extends InputOptions {
  tokenizer?: string;
  rollout?: string;
  reasoning?: string;
  json?: boolean;
}

export function register(program: Command): void {
  const command = program
    .command("explain")
    .description(
      "Say, for every prefix break and every root that is not its agent's first call, which call it " +
        "parted from, where, and why; then what the breaks cost (docs/breaks.md).",
    )
    .argument("[input...]", inputHelp(true))
    .option("--tokenizer <name|path>", `decode the tokens around each break: ${TOKENIZER_HELP}`)
    .option("--rollout <id>", "only the rollout with this rollout_id")
    .option(
      "--reasoning <open,close>",
      "the markers that open and close a reasoning block: token ids ('50,51'; several ids of one " +
        "marker separated by spaces) or text ('<think>,</think>', needs --tokenizer); " +
        "default with --tokenizer: <think>…</think> and gpt-oss's analysis channel",
    )
    .option("--json", "one JSON object per line: one per explained call, then one summary per input");
  addInputOptions(command, { media: true }).action(async (inputs: string[], options: ExplainOptions) => {
    inputs = [...inputsOrStdin(inputs)];
    const read = checkInputs(inputs, options);
    const decoder = options.tokenizer === undefined ? null : await loadTokenizer(options.tokenizer);
    const causeOptions: CauseOptions = decoder
      ? { decode: (ids) => decoder.decode(ids), isSpecial: (id) => decoder.piece(id).special }
      : {};
    if (options.reasoning !== undefined) causeOptions.reasoning = [parseReasoning(options.reasoning, decoder)];
    const cf = await init({ backend: parseBackend(options.backend) });
    const write = (text: string) => process.stdout.write(text);
    let picked = 0;
    for (const input of inputs) {
      const summary = emptySummary(inputName(input));
      for await (const item of readRollouts([input], read)) {
        if (outputFailed()) return; // nobody reads any more (main reports it)
        if (!item.result.ok) {
          summary.rejected++;
          process.stderr.write(
            `${rejectionLine(item.where, item.result.reason, item.result.detail, item.result.code)}\n`,
          );
          continue;
        }
        const rollout = item.result.rollout;
        if (options.rollout !== undefined && rollout.rollout_id !== options.rollout) continue;
        picked++;
        const { plan, report } = planImported(cf, item.result, item.line);
        let explained: ExplainedCall[];
        let routes: ExplainedRoute[] = [];
        try {
          if (report.status === "rejected") {
            summary.rejected++;
            process.stderr.write(`${rejectionLine(item.where, report.reason!, report.detail)}\n`);
            continue;
          }
          const analysis = analyzeRollout(rollout, plan.forest, plan.agents.length > 0, causeOptions);
          explained = analysis.explained;
          routes = explainRoutes(rollout, report.diagnostics);
          addRollout(summary, analysis);
        } finally {
          plan.release();
        }
        // One write per rollout: many small writes cost more than the analysis on small rollouts.
        let text = "";
        for (const call of explained)
          text += options.json ? `${JSON.stringify(explainedRecord(call))}\n` : callText(call, item.where, decoder);
        for (const route of routes)
          text += options.json ? `${JSON.stringify(route)}\n` : routeText(route, item.where, oneLine);
        if (text !== "") write(text);
      }
      write(options.json ? `${JSON.stringify(summary)}\n` : `${summaryLine(summary)}\n`);
    }
    if (options.rollout !== undefined && picked === 0)
      throw new UsageError(
        `no rollout with rollout_id ${JSON.stringify(options.rollout)} in ${inputs.map(inputName).join(", ")}`,
      );
  });
}

/** `--reasoning OPEN,CLOSE`: token ids, or text (which needs a tokenizer). */
export function parseReasoning(text: string, decoder: TokenDecoder | null): ReasoningMarkers {
  const parts = text.split(",");
  if (parts.length !== 2 || parts.some((part) => part.trim() === ""))
    throw new UsageError(`--reasoning takes two markers separated by a comma (OPEN,CLOSE), got '${text}'`);
  const ids = parts.map((part) => (/^\s*\d+(\s+\d+)*\s*$/.test(part) ? part.trim().split(/\s+/).map(Number) : null));
  if (ids[0] !== null && ids[1] !== null) {
    if (ids.flat().some((id) => id! > 0x7fffffff))
      throw new UsageError(`--reasoning token ids must be at most ${0x7fffffff}, got '${text}'`);
    distinctMarkers(text, ids[0].join(" "), ids[1].join(" "), " ");
    return { open: ids[0], close: ids[1] };
  }
  if (decoder === null)
    throw new UsageError(`--reasoning '${text}': text markers need --tokenizer (or give token ids)`);
  distinctMarkers(text, parts[0]!, parts[1]!, "");
  return { open: parts[0]!, close: parts[1]! };
}

/**
 * The markers must tell a block's start from its end: not the same, and neither the start of the
 * other (then every close would also read as an open, or the reverse). `unit` joins ids.
 */
function distinctMarkers(text: string, open: string, close: string, unit: string): void {
  if (open === close)
    throw new UsageError(`--reasoning '${text}': the open and close markers are the same; a block needs two`);
  const [shorter, longer, which] = open.length < close.length ? [open, close, "open"] : [close, open, "close"];
  if (longer.startsWith(shorter + unit))
    throw new UsageError(
      `--reasoning '${text}': the ${which} marker begins the other one, so one cannot be told from the other`,
    );
}

/** One explained call as a few lines of text. */
function callText(call: ExplainedCall, where: string, decoder: TokenDecoder | null): string {
  const near =
    call.near === null
      ? "no earlier call"
      : `near ${oneLine(call.near)} at ${call.at}${call.kind === "prefix_break" ? "" : ` (${call.kind})`}`;
  const unknown = call.unknown === undefined ? "" : ` (${call.unknown})`;
  const also = call.also === undefined ? "" : `, then ${call.also.join(", ")}`;
  const lines = [
    `${where}: ${oneLine(call.rollout_id)} call ${oneLine(call.call)}: ${near}: ${call.cause}${also}${unknown}`,
  ];
  if (call.window !== null) {
    const { before, near: expected, call: found } = call.window;
    if (decoder) {
      lines.push(`  before  …${windowText(decoder, before)}`);
      lines.push(`  near    ${windowText(decoder, expected)}…`);
      lines.push(`  call    ${windowText(decoder, found)}…`);
    }
    lines.push(`  ids     before [${idsText(before)}] near [${idsText(expected)}] call [${idsText(found)}]`);
  }
  return `${lines.join("\n")}\n`;
}
