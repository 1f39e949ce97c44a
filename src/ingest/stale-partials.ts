// Temporary output files left by killed runs. A run writes each output file to
// `.NAME.partial-HOST-PID-N` beside it (sink.ts) and removes it when it fails or is interrupted,
// but a kill -9 (or a power loss) gives it no chance. The next run into the same directory removes
// the ones whose writer is gone: written on this host by a process id that no longer exists.
// Another host's files are left alone (its processes cannot be checked from here), and so are
// files of a live process, whatever it is: a reused id only delays the removal. The locks killed
// runs left (`.NAME.lock`, naming `HOST PID`: src/cli/output-lock.ts) go the same way.
import { readFileSync, readdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";

/** `.NAME.partial-HOST-PID-N`, or `.NAME.partial-PID-N` as written before hosts were named. */
const PARTIAL = /^\..+\.partial-(?:([A-Za-z0-9._]+)-)?(\d+)-\d+$/;

/** `.NAME.lock`, an output's lock (src/cli/output-lock.ts), which holds `HOST PID`. */
const LOCK = /^\..+\.lock$/;

/** The writer a lock file names, or null (not a lock's content: left alone). */
function lockHolder(path: string): [host: string, pid: string] | null {
  try {
    const match = /^(\S+) (\d+)\n?$/.exec(readFileSync(path, "utf8"));
    return match === null ? null : [match[1], match[2]];
  } catch {
    return null;
  }
}

/** Directories already swept by this process: once each is enough. */
const swept = new Set<string>();

/** Whether process `pid` exists on this host (one of another user's counts: EPERM). */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ESRCH";
  }
}

/**
 * Removes the partial files (and output locks) in `dir` that processes of `host` (this one) wrote
 * and that no longer exist; returns their names. Never fails: a file that cannot be listed or removed stays.
 */
export function removeStalePartials(dir: string, host: string): string[] {
  if (swept.has(dir)) return [];
  swept.add(dir);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const match = PARTIAL.exec(name);
    const holder = match === null && LOCK.test(name) ? lockHolder(join(dir, name)) : null;
    if (match === null && holder === null) continue;
    const [writer, pidText] = match !== null ? [match[1], match[2]] : holder!;
    const pid = Number(pidText);
    if ((writer !== undefined && writer !== host) || pid === process.pid || !(pid > 0) || processExists(pid)) continue;
    try {
      unlinkSync(join(dir, name));
      removed.push(name);
    } catch {
      // gone already, or not ours to remove
    }
  }
  return removed;
}
