// What an input's readers add to a format context for the files beside it (atif's subagent and
// continuation trajectories, and a Harbor trial's reward): `trajectoryFiles` of the input's folder.
import { dirname } from "node:path";
import type { FormatContext } from "../formats/types.js";
import { trajectoryFiles } from "../files/trajectory-files.js";

/**
 * `context` with the trajectory files beside input `file` (a path, or `-`/`<stdin>`, which has
 * none). `oneValue`: the input holds one value (a `.json` file or a pretty-printed document), so a
 * Harbor trial's reward beside it is that value's; a JSONL input's lines are many trials.
 */
export function besideInput<T extends FormatContext>(file: string, context: T, options: { oneValue: boolean }): T {
  if (file === "-" || file === "<stdin>" || context.trajectories !== undefined) return context;
  return { ...context, trajectories: trajectoryFiles(dirname(file), { trial: options.oneValue }) };
}
