// The trajectory files an ATIF input refers to, read beside it: subagents (`trajectory_path`) and
// continuations (`continued_trajectory_ref`) in the input's directory, as Harbor writes them
// (terminus-2: `trajectory.summarization-1-summary.json` beside `trajectory.json`, as in
// examples/atif/fix-login/agent/trajectory.json),
// and, for a trajectory in a Harbor trial's `agent/` folder, the verifier's reward
// (`result.json`'s verifier_result.rewards.reward, else `verifier/reward.txt`).
// A path is data from the input: only relative paths that stay inside the directory are read,
// and a symlink resolving outside it is refused, as tokens-dir.ts does for token files.
import { closeSync, constants, fstatSync, openSync, readFileSync, realpathSync } from "node:fs";
import { basename, dirname, isAbsolute, join, sep } from "node:path";
import type { TrajectoryFiles } from "../formats/types.js";
import { FormatError } from "../formats/values.js";
import { MAX_STRING_BYTES, notJsonDetail } from "../formats/text.js";
import { errorLine } from "../messages.js";
import { reasonOf } from "./file-error.js";

const DECODER = new TextDecoder("utf-8", { fatal: true });

/** The files beside an input in `dir`; with `trial`, the Harbor trial reward is looked for too. */
export function trajectoryFiles(dir: string, options: { trial?: boolean } = {}): TrajectoryFiles {
  const describe = (path: string) => join(dir, path);
  return {
    describe,
    load(path: string): unknown {
      if (isAbsolute(path) || /^[a-z][a-z0-9+.-]*:/i.test(path) || path.split(/[\\/]/).includes("..")) {
        throw new FormatError(
          "unsafe_trajectory_path",
          `trajectory path ${JSON.stringify(path)} is not a file inside ${dir} (only relative paths beside the input are read)`,
        );
      }
      const file = describe(path);
      const bytes = readRegular(file, dir, "unreadable_trajectory_file");
      if (bytes === null) return null;
      return parseJson(file, bytes);
    },
    reward: options.trial ? () => trialReward(dir) : undefined,
  };
}

/** A regular file inside `dir` (after symlinks), or null when there is none. */
function readRegular(file: string, dir: string, code: string): Uint8Array | null {
  let real: string;
  try {
    real = realpathSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw new FormatError(code, `cannot read ${file}: ${reasonOf(error)}`);
  }
  let root: string;
  try {
    const realDir = realpathSync(dir);
    root = realDir.endsWith(sep) ? realDir : realDir + sep;
  } catch (error) {
    throw new FormatError(code, `cannot read ${file}: ${dir}: ${reasonOf(error)}`);
  }
  if (!real.startsWith(root)) throw new FormatError(code, `${file} is a symlink to ${real}, outside ${dir}`);
  let fd: number;
  try {
    // Non-blocking, so a named pipe does not hang the run before fstat refuses it.
    fd = openSync(real, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw new FormatError(code, `cannot read ${file}: ${reasonOf(error)}`);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile())
      throw new FormatError(
        code,
        `cannot read ${file}: ${stat.isDirectory() ? "is a directory" : "not a regular file"}`,
      );
    if (stat.size > MAX_STRING_BYTES)
      throw new FormatError(
        "rollout_too_large",
        `${file}: ${stat.size} bytes, more than JSON.parse takes`,
        "rollout_too_large",
      );
    return readFileSync(fd);
  } catch (error) {
    if (error instanceof FormatError) throw error;
    throw new FormatError(code, `cannot read ${file}: ${reasonOf(error)}`);
  } finally {
    closeSync(fd);
  }
}

function parseJson(file: string, bytes: Uint8Array): unknown {
  try {
    return JSON.parse(DECODER.decode(bytes));
  } catch (error) {
    throw new FormatError(
      "malformed_json",
      `${file}: ${notJsonDetail(bytes, () => errorLine(error))}`,
      "malformed_json",
    );
  }
}

/**
 * Harbor's trial layout: a trial's folder holds `agent/` (with `trajectory.json`), `result.json` (a
 * TrialResult, whose verifier_result.rewards maps reward names to numbers) and `verifier/reward.txt`.
 */
function trialReward(dir: string): { reward: number; where: string } | null {
  if (basename(dir) !== "agent") return null;
  const trial = dirname(dir);
  const result = join(trial, "result.json");
  const bytes = readRegular(result, trial, "unreadable_trial_result");
  if (bytes !== null) {
    const value = parseJson(result, bytes) as { verifier_result?: { rewards?: Record<string, unknown> } } | null;
    const rewards = value?.verifier_result?.rewards;
    if (rewards !== null && typeof rewards === "object") {
      const numbers = Object.entries(rewards).filter(([, v]) => typeof v === "number" && Number.isFinite(v));
      const named = numbers.find(([key]) => key === "reward") ?? (numbers.length === 1 ? numbers[0] : undefined);
      if (named !== undefined)
        return { reward: named[1] as number, where: `${result} verifier_result.rewards.${named[0]}` };
    }
  }
  const text = join(trial, "verifier", "reward.txt");
  const raw = readRegular(text, trial, "unreadable_trial_result");
  if (raw === null) return null;
  const reward = Number(new TextDecoder().decode(raw).trim());
  if (!Number.isFinite(reward) || new TextDecoder().decode(raw).trim() === "")
    throw new FormatError("invalid_field", `${text} holds no number`);
  return { reward, where: text };
}
