// The CLI's stdout and stderr when they cannot be written: stdout or stderr that fails (a full
// disk) is one line and exit 2, a pipe closed by its reader a quiet exit 141 (see failureOf),
// whichever command wrote to it. Without a listener Node would die with a stack trace.
import { FileError } from "../files/file-error.js";

/** The first failure writing stdout or stderr during this run (commands that write a lot stop early). */
let outputFailure: FileError | null = null;
let watching = false;

/** Starts a run: forgets earlier failures and listens for new ones (installed once). */
export function watchStdio(): void {
  outputFailure = null;
  if (watching) return;
  watching = true;
  process.stdout.on("error", (error: Error) => {
    outputFailure ??= new FileError("write", "<stdout>", error);
  });
  // stderr carries the notes: a failing one must not kill the run (rows half written, exit 1).
  // The run goes on; its exit says what happened (141 for a closed pipe, 2 for a full disk).
  process.stderr.on("error", (error: Error) => {
    outputFailure ??= new FileError("write", "<stderr>", error);
  });
}

/** The run's first stdout or stderr failure, or null. */
export function outputFailureOf(): FileError | null {
  return outputFailure;
}

/** Whether stdout or stderr failed during this run (nobody reads any more: stop writing). */
export function outputFailed(): boolean {
  return outputFailure !== null;
}

/**
 * Resolves once stdout and stderr have written out everything queued, or failed. A pipe that is
 * full holds the rest of a write in memory (write() returns at once), and its failure comes only
 * when its reader reads or leaves: a run's exit must wait for that to say what happened.
 */
export async function settleStdio(): Promise<void> {
  for (const stream of [process.stdout, process.stderr]) {
    if (stream.writableLength === 0 || stream.destroyed) continue;
    // An empty write's callback comes after every write before it, or with the stream's failure.
    await new Promise<void>((resolve) => stream.write("", () => resolve()));
  }
}
