// A file (or stdout) the CLI could not read or write: `cannot read|write PATH: reason`, exit 2.
import { errorLine } from "../rejection.js";

/** Node's system errors (fs, net) carry a string `code` (ENOENT, EACCES, ...) and the `syscall`. */
export interface SystemError extends Error {
  code: string;
  syscall?: string;
  path?: string;
}

export function isSystemError(error: unknown): error is SystemError {
  if (!(error instanceof Error)) return false;
  const { code, syscall, path } = error as Partial<SystemError>;
  return typeof code === "string" && /^E[A-Z0-9]+$/.test(code) && (typeof syscall === "string" || typeof path === "string");
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
  EADDRINUSE: "address already in use",
  EADDRNOTAVAIL: "address not available",
};

/** A short reason for a system error: `no such file`, `permission denied`, ...; else its message's first line. */
export function reasonOf(error: unknown, op: "read" | "write" = "read"): string {
  if (isSystemError(error) || (error instanceof Error && typeof (error as Partial<SystemError>).code === "string")) {
    const code = (error as SystemError).code;
    // Creating a file fails with ENOENT only when a directory on its path is missing.
    if (code === "ENOENT") return op === "write" ? "no such directory" : "no such file";
    const reason = REASONS[code];
    if (reason !== undefined) return reason;
  }
  return errorLine(error);
}

export class FileError extends Error {
  readonly code: string | undefined;

  constructor(
    readonly op: "read" | "write",
    readonly path: string,
    cause: unknown,
  ) {
    super(`cannot ${op} ${path}: ${reasonOf(cause, op)}`, { cause });
    this.name = "FileError";
    this.code = isSystemError(cause) ? cause.code : undefined;
  }
}
