// Output to a file or stdout with backpressure: a write waits for 'drain' when the stream's
// buffer is full, so a large run never holds its whole output in memory.
//
// Failures are FileErrors (`cannot write PATH: reason`): the file is opened before the sink is
// returned (a missing directory fails at once, before any work), a later stream error is kept
// and rethrown by the next write() and by close() (a write waiting on 'drain' wakes up with it),
// and close() after a failure closes what is left without masking it.
import { accessSync, closeSync, constants, createWriteStream, existsSync, openSync, readFileSync, readdirSync, readlinkSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Writable } from "node:stream";
import { FileError } from "./file-error.js";

export interface ByteSink {
  /** `written` is called once the stream is done with `data` (its buffer may then be reused). */
  write(data: Uint8Array | string, written?: () => void): Promise<void> | void;
  /** Flushes and closes; rejects with the sink's first failure, if any. */
  close(): Promise<void>;
}

const DESCRIPTOR_PATH = /^\/(?:dev|proc\/self|proc\/thread-self)\/fd\/(\d+)$/;
const STANDARD_NAMES: Record<string, number> = { "/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2 };

/**
 * The open descriptor an output path names, however spelled (`/dev//stderr`, `stderr` in /dev):
 * none and `-` are 1, /dev/stdin 0, /dev/stdout 1, /dev/stderr 2, /dev/fd/N and /proc/self/fd/N
 * N; null for a file. None is ever opened for writing as a file is, which truncates: that would
 * empty the file the shell appends it to (`2>>log`, `3>>log`).
 */
export function descriptorOf(path: string | undefined): number | null {
  if (path === undefined || path === "-") return 1;
  const absolute = resolve(path); // normalized: no `//`, `.` or `..`
  const standard = STANDARD_NAMES[absolute];
  if (standard !== undefined) return standard;
  const match = DESCRIPTOR_PATH.exec(absolute);
  return match === null ? null : Number(match[1]);
}

/** The standard stream an output path stands for (see descriptorOf), written through process.stdout/stderr. */
export function standardStream(path: string | undefined): "stdout" | "stderr" | null {
  const fd = descriptorOf(path);
  return fd === 1 ? "stdout" : fd === 2 ? "stderr" : null;
}

/** Opens `path` for writing (see descriptorOf). Throws a FileError when it cannot. */
export function openByteSink(path: string | undefined): ByteSink {
  const stream = standardStream(path);
  const fd = descriptorOf(path);
  const name = stream === null ? path! : `<${stream}>`;
  // Another descriptor is opened again by its name, appending: never truncated, and never written
  // as a bare number (one the shell did not pass on may be the runtime's own).
  const out: Writable = stream !== null ? process[stream] : openFileStream(name, fd !== null ? "a" : "w");
  let failure: FileError | null = null;
  const onError = (error: Error) => {
    failure ??= error instanceof FileError ? error : new FileError("write", name, error);
  };
  out.on("error", onError);
  let closed = false;
  return {
    write(data, written) {
      if (failure) throw failure;
      if (out.write(data, written === undefined ? undefined : () => written())) return;
      return new Promise((resolve, reject) => {
        const done = () => {
          out.off("drain", done);
          out.off("error", done);
          out.off("close", done);
          if (failure) reject(failure);
          else resolve();
        };
        out.once("drain", done);
        // 'error' listeners run in order: onError (added first) has recorded the failure.
        out.once("error", done);
        out.once("close", done);
      });
    },
    close() {
      if (closed) return failure ? Promise.reject(failure) : Promise.resolve();
      closed = true;
      if (stream !== null) {
        out.off("error", onError);
        return failure ? Promise.reject(failure) : Promise.resolve();
      }
      if (failure) {
        // end() on a failed stream only adds its own error; the stored one is the story.
        out.destroy();
        return Promise.reject(failure);
      }
      if (out.destroyed) {
        // Destroyed by an error whose 'error' event is still to come (it comes before 'close').
        return new Promise<void>((_, reject) => {
          const settle = () => reject(failure ?? new FileError("write", name, new Error("the stream was closed")));
          if (out.closed) settle();
          else out.once("close", settle);
        });
      }
      return new Promise<void>((resolve, reject) => {
        out.end((error?: Error | null) => {
          if (error) onError(error);
          if (failure) reject(failure);
          else resolve();
        });
      });
    },
  };
}

/** A write stream on `path`: emptied first ("w"), or appended to ("a"). */
function openFileStream(path: string, flags: "w" | "a"): Writable {
  let fd: number;
  try {
    fd = openSync(path, flags);
  } catch (error) {
    throw new FileError("write", path, error);
  }
  try {
    // A deep buffer lets queued chunks leave in one writev and keeps the writer from waiting
    // on every 'drain' (the default 16 KB is less than one row chunk).
    return createWriteStream(path, { fd, highWaterMark: 8 << 20 });
  } catch (error) {
    closeSync(fd);
    throw new FileError("write", path, error);
  }
}

/**
 * Runs `work` with sinks opened by `open` (one per path, in order; null: none) and closes them
 * all, however `work` ends. The first failure wins: opening, then `work`'s own error, else the
 * first close() failure — a close never masks what went wrong before it.
 */
export async function withSinks<T>(paths: readonly (string | undefined | null)[], work: (sinks: (ByteSink | null)[]) => Promise<T>): Promise<T> {
  // Every output is checked before any is opened: opening truncates, and a later one that
  // cannot be written must not have emptied an earlier one.
  for (const path of paths) if (path !== null && path !== undefined) checkWritable(path);
  const sinks: (ByteSink | null)[] = [];
  let outcome: { ok: true; value: T } | { ok: false; error: unknown };
  try {
    for (const path of paths) sinks.push(path === null ? null : openByteSink(path));
    outcome = { ok: true, value: await work(sinks) };
  } catch (error) {
    outcome = { ok: false, error };
  }
  for (const sink of sinks) {
    try {
      await sink?.close();
    } catch (error) {
      if (outcome.ok) outcome = { ok: false, error };
    }
  }
  if (!outcome.ok) throw outcome.error;
  return outcome.value;
}

/**
 * Whether descriptor `fd` is the runtime's own rather than one the shell passed on: Node and libuv
 * hold event fds, epoll fds and self-pipes (both ends of one pipe, one read-only and one
 * write-only) from before any of our code runs, so `/dev/fd/N` for an N the shell did not open
 * names one of them. Writing there loses the output silently, hangs, or crashes the process.
 * Linux only (/proc); elsewhere nothing is refused.
 */
function isRuntimeDescriptor(fd: number): boolean {
  let target: string;
  try {
    target = readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return false;
  }
  if (target.startsWith("anon_inode:")) return true;
  if (!target.startsWith("pipe:")) return false;
  const modes = new Set<number>();
  try {
    for (const other of readdirSync("/proc/self/fd")) {
      try {
        if (readlinkSync(`/proc/self/fd/${other}`) !== target) continue;
        const flags = /flags:\s*([0-7]+)/.exec(readFileSync(`/proc/self/fdinfo/${other}`, "utf8"));
        if (flags !== null) modes.add(parseInt(flags[1], 8) & 3);
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    return false;
  }
  return modes.has(0) && modes.has(1); // this process reads and writes the pipe: not a shell's
}

/** The error for `/dev/fd/N` when N is not a descriptor the shell opened ("not an open file descriptor"). */
function notOpenDescriptor(path: string): FileError {
  return new FileError("write", path, Object.assign(new Error(`EBADF: ${path}`), { code: "EBADF", syscall: "open", path }));
}

/** Throws for `/dev/fd/N` (N > 2) when N is one of the runtime's own descriptors (see isRuntimeDescriptor). */
export function refuseRuntimeDescriptor(path: string): void {
  const fd = descriptorOf(path);
  if (fd !== null && fd > 2 && isRuntimeDescriptor(fd)) throw notOpenDescriptor(path);
}

/** Throws the FileError that opening `path` for writing would, without opening (or truncating) it. */
function checkWritable(path: string): void {
  if (standardStream(path) !== null) return; // process.stdout/stderr report their own failures
  if (descriptorOf(path) !== null && !existsSync(path)) throw notOpenDescriptor(path);
  refuseRuntimeDescriptor(path);
  try {
    if (statSync(path).isDirectory()) throw Object.assign(new Error(`EISDIR: ${path}`), { code: "EISDIR", syscall: "open", path });
    accessSync(path, constants.W_OK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw new FileError("write", path, error);
    try {
      accessSync(dirname(resolve(path)), constants.W_OK); // not there yet: its directory must take it
    } catch (dirError) {
      throw new FileError("write", path, dirError);
    }
  }
}
