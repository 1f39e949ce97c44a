// A file (or stdout) the CLI could not read or write: `cannot read|write PATH: reason`, exit 2.
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { errorLine } from "../messages.js";

/** Node's system errors (fs, net) carry a string `code` (ENOENT, EACCES, ...) and the `syscall`. */
export interface SystemError extends Error {
  code: string;
  syscall?: string;
  path?: string;
}

export function isSystemError(error: unknown): error is SystemError {
  if (!(error instanceof Error)) return false;
  const { code, syscall, path } = error as Partial<SystemError>;
  return (
    typeof code === "string" && /^E[A-Z0-9]+$/.test(code) && (typeof syscall === "string" || typeof path === "string")
  );
}

const REASONS: Record<string, string> = {
  EACCES: "permission denied",
  EPERM: "permission denied",
  EISDIR: "is a directory",
  ENOTDIR: "not a directory",
  ENOSPC: "no space left on device",
  EDQUOT: "disk quota exceeded",
  EROFS: "read-only file system",
  EPIPE: "broken pipe",
  EMFILE: "too many open files",
  ENFILE: "too many open files",
  EFBIG: "file too large",
  EIO: "input/output error",
  ENAMETOOLONG: "name too long",
  ELOOP: "too many symbolic links",
  EBADF: "not an open file descriptor",
  ENXIO: "no such device or address",
  EADDRINUSE: "address already in use",
  EADDRNOTAVAIL: "address not available",
};

/**
 * A short reason for a system error: `no such file`, `permission denied`, ...; else its message's
 * first line. `path`: the file written, when known (see missingOnWrite).
 */
export function reasonOf(error: unknown, op: "read" | "write" = "read", path?: string): string {
  if (isSystemError(error) || (error instanceof Error && typeof (error as Partial<SystemError>).code === "string")) {
    const code = (error as SystemError).code;
    if (code === "ENOENT") return op === "write" ? missingOnWrite(path) : "no such file";
    const reason = REASONS[code];
    if (reason !== undefined) return reason;
  }
  return errorLine(error);
}

/**
 * Creating a file fails with ENOENT when a directory on its path is missing, or where files
 * cannot be created at all (/proc): only the file's own directory tells the two apart.
 */
function missingOnWrite(path: string | undefined): string {
  return path !== undefined && existsSync(dirname(resolve(path))) ? "cannot create a file there" : "no such directory";
}

export class FileError extends Error {
  readonly code: string | undefined;

  constructor(
    readonly op: "read" | "write",
    readonly path: string,
    cause: unknown,
  ) {
    super(`cannot ${op} ${path}: ${reasonOf(cause, op, path)}`, { cause });
    this.name = "FileError";
    this.code = isSystemError(cause) ? cause.code : undefined;
  }
}
