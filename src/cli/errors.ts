// Errors the CLI turns into a one-line message and an exit code (never a stack trace).

/** Bad arguments or unreadable files: exit 2. */
export class UsageError extends Error {
  readonly exitCode = 2;
}

/** Input read fine but something in it failed under --strict: exit 1. */
export class StrictFailure extends Error {
  readonly exitCode = 1;
}

export function exitCodeOf(error: unknown): number {
  if (error instanceof UsageError || error instanceof StrictFailure) return error.exitCode;
  return 2;
}

export function messageOf(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    const path = (error as NodeJS.ErrnoException).path;
    if (code === "ENOENT" && path) return `cannot read ${path}: no such file`;
    if (code === "EACCES" && path) return `cannot read ${path}: permission denied`;
    if (code === "EISDIR" && path) return `cannot read ${path}: is a directory`;
    return error.message.split("\n")[0];
  }
  return String(error);
}
