// `callforest draw`: one SVG picture per rollout (lanes of calls, links, cuts, rows). --fit WIDTH
// zooms out (calls become marks) until the picture is WIDTH px wide; --layout packed draws the
// packed trees instead (segments, their parents, what they save), and --capacity N their bins.
//
// File names: with one rollout drawn (after --rollout), the SVG goes to -o exactly (default
// forest.svg; `-o -` = stdout). With several, each goes beside it as <stem>.<rollout id>.svg
// (forest.svg → forest.login-bug.svg), the id reduced to [A-Za-z0-9._-] (others become _); an id
// already used in this run, or a rollout without id, gets its 1-based position added
// (forest.r.2.svg, forest.rollout.3.svg). Written paths are printed one a line.
//
// Pictures are written as `rows` writes its outputs: each to a temporary file beside its name,
// all renamed into place once every one is written, none when a write fails (the previous
// pictures stay as they were, and no cut or empty SVG is left under a picture's name).
import { writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Command } from "../vendor.js";
import { init, type Callforest } from "../../index.js";
import { readRollouts, type ReadItem } from "../../ingest/read.js";
import { reportOfImportRejection, usePlan } from "../../plan-imported.js";
import { inputName } from "../../formats/text.js";
import { MIN_FIT_WIDTH, fileSafeId, renderBinsSvg, renderPackedSvg, renderSvg } from "../../draw/index.js";
import { rolloutIdOf } from "../../plan/validate.js";
import { FileError } from "../../files/file-error.js";
import {
  descriptorOf,
  openByteSink,
  refuseRuntimeDescriptor,
  standardStream,
  type ByteSink,
} from "../../ingest/sink.js";
import { UsageError } from "../errors.js";
import { rejectionLine } from "../../messages.js";
import type { Converted } from "../../formats/types.js";
import type { Plan, Report } from "../../types.js";
import {
  addInputOptions,
  checkInputs,
  checkOutputs,
  parseBackend,
  parseInteger,
  parseLayout,
  inputHelp,
  type InputOptions,
} from "../inputs.js";

interface DrawOptions extends InputOptions {
  output: string;
  rollout?: string;
  fit?: string;
  layout?: string;
  capacity?: string;
}

/** What to draw, from --layout, --capacity and --fit. */
interface Picture {
  packed: boolean;
  /** Bins of at most this many tokens (packed only). */
  capacity?: number;
  fit?: number;
}

/**
 * A --fit picture's most height, from its width: as tall as wide, and at least this. Lanes and
 * rows get lower to fit; rows that still do not are left out, and the picture says so.
 */
const MIN_FIT_HEIGHT = 800;

/** Widest --fit: past this a fitted picture is no overview any more. */
const MAX_FIT_WIDTH = 100_000;

function pictureOf(options: DrawOptions): Picture {
  const { layout, capacity } = parseLayout(options.layout, options.capacity);
  const fit =
    options.fit === undefined
      ? undefined
      : parseInteger("--fit", options.fit, { min: MIN_FIT_WIDTH, max: MAX_FIT_WIDTH });
  return { packed: layout === "packed", ...(capacity === undefined ? {} : { capacity }), fit };
}

export function register(program: Command): void {
  const command = program
    .command("draw")
    .description(
      "Draw each rollout's call forest as SVG. One rollout: written to -o. Several: " +
        "<stem>.<rollout id>.svg beside -o (a repeated or missing id gets its position added).",
    )
    .argument("[input]", inputHelp(true))
    .option("-o, --output <file>", "the SVG file (- for stdout, one rollout only)", "forest.svg")
    .option("--rollout <id>", "draw only the rollout with this rollout_id")
    .option(
      "--fit <width>",
      `zoom out until the picture is this many px wide (calls become marks), and at most as tall ` +
        `(${MIN_FIT_HEIGHT} px at least; rows that do not fit are left out, and the picture says how many); ` +
        `at least ${MIN_FIT_WIDTH}`,
    )
    .option(
      "--layout <layout>",
      "rows (default: the forest and each row's path), or packed: each tree's segments and what packing saves",
    )
    .option(
      "--capacity <tokens>",
      "draw the packed records as bins of at most this many tokens (implies --layout packed)",
    );
  addInputOptions(command, { media: true }).action(async (input: string | undefined, options: DrawOptions) => {
    await draw(input ?? "-", options, command.getOptionValueSource("output") === "default");
  });
}

/** The item's rollout id; null when it has none usable (missing, empty, not a string). */
function idOfItem(item: ReadItem): string | null {
  // An item read fine may still be rejected by plan(): its rollout_id is not checked yet.
  return item.result.ok ? rolloutIdOf(item.result.rollout) : item.result.rolloutId;
}

/**
 * The picture of one item. A rejected rollout is drawn as such, and its rejection goes to stderr in
 * the line `rows` and `show` print (`where: rejected (reason): detail`).
 */
function svgOf(cf: Callforest, item: ReadItem, picture: Picture): string {
  if (!item.result.ok) {
    process.stderr.write(rejectionLine(item.where, item.result.reason, item.result.detail, item.result.code) + "\n");
    return renderSvg({ report: reportOfImportRejection(item.result, item.line), forest: [], agents: [], rows: [] });
  }
  let rejected: string | null = null;
  const svg = svgOfPlanned(cf, item.result, item.line, picture, (report) => {
    if (report.status === "rejected") rejected = rejectionLine(item.where, report.reason!, report.detail);
  });
  if (rejected !== null) process.stderr.write(rejected + "\n");
  return svg;
}

/** The picture of a rollout read fine; `seen` gets its report (planned, or rejected by the planner). */
function svgOfPlanned(
  cf: Callforest,
  result: Converted,
  line: number | undefined,
  picture: Picture,
  seen: (report: Report) => void,
): string {
  const { capacity, fit } = picture;
  const render = (plan: Plan, report: Report): string => {
    seen(report);
    const drawn = { report, forest: plan.forest, agents: plan.agents, rows: plan.rows };
    if (capacity !== undefined) return renderBinsSvg({ ...drawn, bins: plan.bins, capacity }, { width: fit });
    if (picture.packed) return renderPackedSvg({ ...drawn, trees: plan.trees }, { width: fit });
    return renderSvg(drawn, fit === undefined ? {} : { fit, fitHeight: Math.max(fit, MIN_FIT_HEIGHT) });
  };
  const layout = capacity !== undefined ? { capacity } : picture.packed ? { trees: true } : {};
  return usePlan(cf, result, line, render, layout);
}

/** The file for the `position`-th (1-based) of several rollouts; see the header comment. */
function severalName(output: string, id: string | null, position: number, used: Set<string>): string {
  const file = basename(output);
  const stem = file.toLowerCase().endsWith(".svg") ? file.slice(0, -4) : file;
  const safe = id === null ? "rollout" : fileSafeId(id);
  let name = `${stem}.${safe}${id === null ? `.${position}` : ""}.svg`;
  // `position` is unique within a run, so this settles every clash but a contrived one (an id
  // that itself ends in ".<n>"), which gets one more suffix per retry
  for (let extra = ""; used.has(name); extra += "_") name = `${stem}.${safe}.${position}${extra}.svg`;
  used.add(name);
  return join(dirname(output), name);
}

/** Appends to a descriptor's file (no truncation: a `3>>log` stays appended to). */
function writeToDescriptor(path: string, svg: string): void {
  refuseRuntimeDescriptor(path);
  try {
    writeFileSync(path, svg, { flag: "a" });
  } catch (error) {
    throw new FileError("write", path, error);
  }
}

/**
 * Draws every wanted rollout of `input`. `defaultOutput`: -o was not given, so the pictures go
 * into the working directory under the default name, which stderr says once they are there.
 */
async function draw(input: string, options: DrawOptions, defaultOutput = false): Promise<void> {
  // -o -: stdout, as rows and convert read it; a descriptor (/dev/fd/3) is written where it is.
  const fd = descriptorOf(options.output);
  const stream = standardStream(options.output);
  const picture = pictureOf(options);
  const read = checkInputs([input], options);
  checkOutputs([input], [["-o", options.output]]);
  const name = inputName(input);
  const cf = await init({ backend: parseBackend(options.backend) });
  const wanted = (item: ReadItem) => options.rollout === undefined || idOfItem(item) === options.rollout;
  const used = new Set<string>();
  let first: ReadItem | null = null;
  let count = 0;
  const pictures: { path: string; sink: ByteSink }[] = [];
  const write = async (path: string, svg: string) => {
    // a name made from an id may be the input's
    if (path !== options.output) checkOutputs([input], [["the SVG", path]]);
    const sink = openByteSink(path);
    pictures.push({ path, sink });
    await sink.write(svg);
    await sink.close();
  };
  try {
    // One item of look-ahead decides between the single name and the several-names scheme.
    for await (const item of readRollouts([input], read)) {
      if (!wanted(item)) continue;
      count++;
      if (count === 1) {
        first = item;
        continue;
      }
      if (fd !== null)
        throw new UsageError(
          `-o ${options.output} writes one SVG, but ${name} holds several rollouts: pick one with --rollout ID`,
        );
      if (count === 2) await write(severalName(options.output, idOfItem(first!), 1, used), svgOf(cf, first!, picture));
      await write(severalName(options.output, idOfItem(item), count, used), svgOf(cf, item, picture));
    }
    if (count === 1 && stream === null && fd === null) await write(options.output, svgOf(cf, first!, picture));
    for (const { path, sink } of pictures) {
      sink.commit?.();
      process.stdout.write(path + "\n");
    }
    if (defaultOutput && pictures.length > 0)
      process.stderr.write(
        `callforest: no -o given: wrote ${pictures.length === 1 ? pictures[0].path : `${pictures.length} pictures named after ${options.output}`} ` +
          `in the working directory (${process.cwd()})\n`,
      );
  } catch (error) {
    for (const { sink } of pictures) {
      sink.close().catch(() => undefined); // a failed one is closed already; this only settles it
      sink.discard?.();
    }
    throw error;
  }
  if (count === 0) {
    throw new UsageError(
      options.rollout === undefined
        ? `${name} holds no rollout`
        : `no rollout with rollout_id ${JSON.stringify(options.rollout)} in ${name}`,
    );
  }
  if (count === 1 && (stream !== null || fd !== null)) {
    const svg = svgOf(cf, first!, picture);
    if (stream !== null) process[stream].write(svg);
    else writeToDescriptor(options.output, svg);
  }
}
