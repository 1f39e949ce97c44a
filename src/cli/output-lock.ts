// One run at a time per output file. Two runs writing one output (a shard of an --output-dir
// dataset run twice at once, say) would each rename its files into place, and a part could end up
// from one run and its report from the other, the run record describing another file. So a run
// holds `.NAME.lock` beside each output file it replaces, from before it opens any until its
// files are in place, and a second run is refused in one line naming the first. A lock left by a
// killed run on this host (its process gone) is taken over; another host's is left to it.
import { closeSync, openSync, readFileSync, realpathSync, statSync, unlinkSync, writeSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { HOST, descriptorOf, keepIfInterrupted, removeIfInterrupted, standardStream } from "../ingest/sink.js";
import { processExists } from "../ingest/stale-partials.js";
import { UsageError } from "./errors.js";

/** The lock file of output `path`: `.NAME.lock` beside the file it names (a symbolic link followed). */
export function lockPathOf(path: string): string {
  let target = resolve(path);
  try {
    target = realpathSync(target);
  } catch {
    // not there yet
  }
  return join(dirname(target), `.${basename(target)}.lock`);
}

/** Who holds a lock, as its file says (`HOST PID`); null when it says nothing readable. */
function holderOf(lock: string): { host: string; pid: number } | null {
  let text: string;
  try {
    text = readFileSync(lock, "utf8");
  } catch {
    return null;
  }
  const match = /^(\S+) (\d+)\n?$/.exec(text);
  return match === null ? null : { host: match[1], pid: Number(match[2]) };
}

/** Takes `lock` for this process; false when another live run holds it. Throws only what is not EEXIST. */
function take(lock: string): boolean {
  for (let attempt = 0; attempt < 2; attempt++) {
    let fd: number;
    try {
      fd = openSync(lock, "wx");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const holder = holderOf(lock);
      // Left by a killed run of this host: take it over (once; a run that won the race keeps it).
      // Two runs that both find the same stale lock at the same instant could each remove it and
      // one the other's new one: a kill -9 and two runs of its shard started together, not guarded.
      if (
        attempt === 0 &&
        holder !== null &&
        holder.host === HOST &&
        holder.pid !== process.pid &&
        !processExists(holder.pid)
      ) {
        try {
          unlinkSync(lock);
        } catch {
          // removed by another run meanwhile
        }
        continue;
      }
      return false;
    }
    try {
      writeSync(fd, `${HOST} ${process.pid}\n`);
    } finally {
      closeSync(fd);
    }
    return true;
  }
  return false;
}

/**
 * Locks each output file in `paths` (stdout, `/dev/fd/N`, FIFOs and devices need none) and
 * returns the function that releases them. Throws a UsageError naming the run that holds one.
 * A lock that cannot be made (a directory that takes no file) is skipped: the output's own
 * check says what is wrong with it.
 */
export function lockOutputs(paths: readonly (string | null | undefined)[]): () => void {
  const held: string[] = [];
  const release = () => {
    for (const lock of held.splice(0)) {
      keepIfInterrupted(lock);
      try {
        unlinkSync(lock);
      } catch {
        // gone already
      }
    }
  };
  for (const path of paths) {
    if (path === null || path === undefined || standardStream(path) !== null || descriptorOf(path) !== null) continue;
    if (!isFileTarget(path)) continue;
    const lock = lockPathOf(path);
    if (held.includes(lock)) continue;
    let taken: boolean;
    try {
      taken = take(lock);
    } catch {
      continue;
    }
    if (taken) {
      held.push(lock);
      // Interrupted (SIGINT, SIGTERM), the run removes its partial files, and its locks with them.
      removeIfInterrupted(lock);
      continue;
    }
    release();
    const holder = holderOf(lock);
    const who = holder === null ? "another run" : `another run (process ${holder.pid} on ${holder.host})`;
    throw new UsageError(
      `${path} is being written by ${who}: wait for it to end, or remove ${lock} if no run is writing`,
    );
  }
  return release;
}

/** Whether `path` names a regular file, or nothing yet (a FIFO or device is written in place). */
function isFileTarget(path: string): boolean {
  try {
    return statSync(path, { throwIfNoEntry: false })?.isFile() ?? true;
  } catch {
    return true;
  }
}
