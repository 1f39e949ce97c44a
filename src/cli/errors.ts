// Errors the CLI turns into a one-line message and an exit code (never a stack trace):
//   1   --strict and some input was rejected (StrictFailure)
//   2   bad arguments (UsageError), a feature's package not installed (MissingDependencyError),
//       or a file that cannot be read or written (FileError, or any
//       Node system error such as ENOENT, EACCES, EISDIR, ENOSPC), or no WebAssembly instance to
//       be had (CoreUnavailableError: the process's address space)
//   70  anything else: a bug in callforest (EX_SOFTWARE), reported as `internal error: ...`
//   141 an output is a pipe its reader closed (`| head`): no message, as a process SIGPIPE ended
import { FileError, isSystemError, reasonOf, type SystemError } from "../files/file-error.js";
import { CoreUnavailableError } from "../core/errors.js";
import { errorLine } from "../messages.js";
import { MissingDependencyError } from "../optional-dependency.js";

/** Bad arguments or unreadable files: exit 2. */
export class UsageError extends Error {
  readonly exitCode = 2;
}

/** Input read fine but something in it failed under --strict: exit 1. */
export class StrictFailure extends Error {
  readonly exitCode = 1;
}

/** sysexits.h EX_SOFTWARE: an internal software error. */
export const EX_SOFTWARE = 70;

/** What a shell reports for a process that SIGPIPE ended (128 + 13). Node ignores SIGPIPE. */
export const CLOSED_PIPE = 141;

/** System calls that write (or create) what they name; any other is reported as a read. */
const WRITES = new Set([
  "write",
  "writev",
  "mkdir",
  "rename",
  "unlink",
  "rmdir",
  "ftruncate",
  "fsync",
  "copyfile",
  "symlink",
  "link",
  "utime",
  "chmod",
]);

function systemMessage(error: SystemError): string {
  const syscall = error.syscall ?? "";
  if (syscall === "listen" || syscall === "bind" || syscall === "connect") {
    const { address, port } = error as SystemError & { address?: string; port?: number };
    const where = address === undefined ? "" : ` ${address}${port === undefined ? "" : `:${port}`}`;
    return `cannot ${syscall}${syscall === "connect" ? " to" : " on"}${where}: ${reasonOf(error)}`;
  }
  const op = WRITES.has(syscall) ? "write" : "read";
  return `cannot ${op} ${error.path ?? (op === "write" ? "<output>" : "<input>")}: ${reasonOf(error, op)}`;
}

export interface Failure {
  exitCode: number;
  /** One line, without the `callforest: ` prefix; empty when nothing is printed. */
  message: string;
}

/** What the CLI prints and returns for an error a command threw. */
export function failureOf(error: unknown): Failure {
  // The reader of a pipe we write (stdout, -o /dev/stdout, a FIFO) stopped reading: its choice,
  // not an error worth a line (as SIGPIPE would end any Unix tool).
  if (error instanceof FileError && error.code === "EPIPE") return { exitCode: CLOSED_PIPE, message: "" };
  if (error instanceof UsageError || error instanceof StrictFailure)
    return { exitCode: error.exitCode, message: errorLine(error) };
  if (error instanceof FileError) return { exitCode: 2, message: errorLine(error) };
  // A feature's optional package is not installed: the line says what to install.
  if (error instanceof MissingDependencyError) return { exitCode: 2, message: error.message };
  // A limit of this machine or process (address space), not a bug in callforest.
  if (error instanceof CoreUnavailableError) return { exitCode: 2, message: errorLine(error) };
  if (isSystemError(error)) return { exitCode: 2, message: systemMessage(error) };
  return { exitCode: EX_SOFTWARE, message: `internal error: ${errorLine(error)}` };
}
