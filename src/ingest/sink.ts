// Output to a file or stdout with backpressure: a write waits for 'drain' when the stream's
// buffer is full, so a large run never holds its whole output in memory.
//
// Failures are FileErrors (`cannot write PATH: reason`): the file is opened before the sink is
// returned (a missing directory fails at once, before any work), a later stream error is kept
// and rethrown by the next write() and by close() (a write waiting on 'drain' wakes up with it),
// and close() after a failure closes what is left without masking it.
//
// A regular file (or one not there yet) is written whole or not at all: to a temporary file
// beside it, fsynced and renamed over it only once the run has succeeded (withSinks), then its
// directory fsynced; the temporary file is removed when the run fails or is interrupted — the
// previous file stays as it was, and no file under its name is ever half-written, even after a
// power loss. While it is written, its data is flushed to the disk as it grows and its SHA-256
// taken off this thread (file-follower.ts), so the end of a run waits for neither. A kill -9
// leaves the temporary file (`.NAME.partial-HOST-PID-N`); the next run into that directory
// removes those of processes of this host that no longer exist. Special files (stdout,
// /dev/fd/N, a FIFO, /dev/null) are written in place.
import { createHash, type Hash } from "node:crypto";
import {
  accessSync,
  chmodSync,
  closeSync,
  constants,
  createWriteStream,
  existsSync,
  fsyncSync,
  lstatSync,
  openSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  renameSync,
  statSync,
  unlinkSync,
} from "node:fs";
import { hostname } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import type { Writable } from "node:stream";
import { FileError } from "../files/file-error.js";
import { removeStalePartials } from "./stale-partials.js";
import { FileFollower } from "./file-follower.js";

/** What a sink wrote: its byte count and their SHA-256 (hex). */
export interface OutputDigest {
  bytes: number;
  sha256: string;
}

export interface ByteSink {
  /** `written` is called once the stream is done with `data` (its buffer may then be reused). */
  write(data: Uint8Array | string, written?: () => void): Promise<void> | void;
  /** Flushes and closes; rejects with the sink's first failure, if any. */
  close(): Promise<void>;
  /** After a successful close(): puts the written file in place (a temporary file renamed over the target). */
  commit?(): void;
  /** After a failure: removes the temporary file; the target stays as it was. */
  discard?(): void;
  /** Written to a temporary file put in place by commit() (not a stream or special file). */
  readonly staged?: boolean;
  /** After close(), with `digest` asked for: the bytes written and their SHA-256. */
  digest?(): OutputDigest;
}

export interface SinkOptions {
  /** Count the bytes written and hash them (SHA-256), for digest(). */
  digest?: boolean;
  /** A staged file is hashed on a thread from this size on (see FileDigest; tests use small ones). */
  digestThreadFromBytes?: number;
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

/**
 * Where a file output is written first: `path` itself when it is a special file (written in
 * place), else a new temporary file beside the file `path` names (a symbolic link is followed,
 * so the link stays and its target is replaced).
 */
function stagingOf(path: string): { target: string; temporary: string } | null {
  let target = resolve(path);
  try {
    if (lstatSync(target).isSymbolicLink()) target = realpathSync(target);
  } catch {
    // a dangling link, or nothing there: created where the name says
  }
  try {
    if (!statSync(target).isFile()) return null; // a FIFO, a device, a socket: no file to replace
  } catch {
    // not there yet
  }
  return {
    target,
    temporary: join(dirname(target), `.${basename(target)}.partial-${HOST}-${process.pid}-${++stagedCount}`),
  };
}

let stagedCount = 0;

/**
 * This host in temporary names: a directory on shared storage may hold other hosts' partial
 * files, and only this host's process ids can be checked (see stale-partials.ts).
 */
export const HOST = hostname().replace(/[^A-Za-z0-9._]/g, "_") || "host";

/** Temporary files not yet renamed or removed: removed if the process is interrupted. */
const pending = new Set<string>();

function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

function onInterrupt(signal: NodeJS.Signals): void {
  for (const path of pending) removeQuietly(path);
  pending.clear();
  process.off("SIGINT", onInterrupt);
  process.off("SIGTERM", onInterrupt);
  process.kill(process.pid, signal); // dies of the signal, as it would have
}

/** Removes `path` if the process is interrupted before `keepIfInterrupted(path)` (an output's lock, say). */
export function removeIfInterrupted(path: string): void {
  stage(path);
}

/** Undoes removeIfInterrupted. */
export function keepIfInterrupted(path: string): void {
  unstage(path);
}

function stage(path: string): void {
  if (pending.size === 0) {
    process.on("SIGINT", onInterrupt);
    process.on("SIGTERM", onInterrupt);
  }
  pending.add(path);
}

function unstage(path: string): void {
  pending.delete(path);
  if (pending.size === 0) {
    process.off("SIGINT", onInterrupt);
    process.off("SIGTERM", onInterrupt);
  }
}

/** Opens `path` for writing (see descriptorOf). Throws a FileError when it cannot. */
export function openByteSink(path: string | undefined, options: SinkOptions = {}): ByteSink {
  const stream = standardStream(path);
  const fd = descriptorOf(path);
  const name = stream === null ? path! : `<${stream}>`;
  const staging = stream === null && fd === null ? stagingOf(name) : null;
  // Another descriptor is opened again by its name, appending: never truncated, and never written
  // as a bare number (one the shell did not pass on may be the runtime's own).
  const out: Writable =
    stream !== null
      ? process[stream]
      : staging !== null
        ? openStagedStream(name, staging)
        : openFileStream(name, fd !== null ? "a" : "w");
  let failure: FileError | null = null;
  const onError = (error: Error) => {
    failure ??= error instanceof FileError ? error : new FileError("write", name, error);
  };
  out.on("error", onError);
  // A staged file is flushed to the disk as it grows, and hashed off this thread, by reading it
  // back; a stream or special file is hashed here, as it is written.
  const follower = staging === null ? null : followStaged(out, staging, name, options);
  let closed = false;
  let settled = false;
  const hash: Hash | null = options.digest === true && follower === null ? createHash("sha256") : null;
  let bytes = 0;
  let sha256: string | null = null;
  /** Settles on the stream's next 'drain' (or its failure), while a write waits for one. */
  let drained: Promise<void> | null = null;
  /** Ends the stream, then (a staged file) flushes its data to the disk and takes its digest. */
  const finish = async () => {
    await new Promise<void>((resolve) =>
      out.end((error?: Error | null) => {
        if (error) onError(error);
        resolve();
      }),
    );
    if (follower === null) {
      if (failure) throw failure;
      return;
    }
    if (failure) {
      follower.close();
      throw failure;
    }
    try {
      sha256 = await follower.finish();
    } catch (error) {
      onError(error as Error);
      throw failure;
    }
  };
  return {
    staged: staging !== null,
    digest() {
      if (options.digest !== true) throw new Error("digest() of a sink opened without { digest: true }");
      sha256 ??= hash!.digest("hex");
      return { bytes, sha256 };
    },
    commit() {
      if (staging === null || settled) return;
      settled = true;
      try {
        renameSync(staging.temporary, staging.target);
      } catch (error) {
        removeQuietly(staging.temporary);
        throw new FileError("write", name, error);
      } finally {
        unstage(staging.temporary);
      }
      syncDirectory(dirname(staging.target)); // the rename itself survives a power loss
    },
    discard() {
      if (staging === null || settled) return;
      settled = true;
      follower?.close();
      removeQuietly(staging.temporary);
      unstage(staging.temporary);
    },
    write(data, written) {
      if (failure) throw failure;
      let done = written === undefined ? undefined : () => written();
      if (hash !== null || follower !== null) {
        const length = typeof data === "string" ? Buffer.byteLength(data) : data.byteLength;
        bytes += length;
        hash?.update(data);
        if (follower !== null)
          done = (error?: Error | null) => {
            if (!error) follower.written(length); // in the file now: it can be read back
            written?.();
          };
      }
      if (out.write(data, done)) return;
      // Writes made while the stream is full share one wait (and one set of listeners).
      drained ??= new Promise<void>((resolve, reject) => {
        const done = () => {
          out.off("drain", done);
          out.off("error", done);
          out.off("close", done);
          drained = null;
          if (failure) reject(failure);
          else resolve();
        };
        out.once("drain", done);
        // 'error' listeners run in order: onError (added first) has recorded the failure.
        out.once("error", done);
        out.once("close", done);
      });
      return drained;
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
        follower?.close();
        return Promise.reject(failure);
      }
      if (out.destroyed) {
        follower?.close();
        // Destroyed by an error whose 'error' event is still to come (it comes before 'close').
        return new Promise<void>((_, reject) => {
          const settle = () => reject(failure ?? new FileError("write", name, new Error("the stream was closed")));
          if (out.closed) settle();
          else out.once("close", settle);
        });
      }
      return finish();
    },
  };
}

/** A FileFollower on a staged file's temporary file; when it cannot open, the stream is closed and the file removed. */
function followStaged(out: Writable, staging: { temporary: string }, name: string, options: SinkOptions): FileFollower {
  try {
    return new FileFollower(staging.temporary, {
      digest: options.digest === true,
      digestThreadFromBytes: options.digestThreadFromBytes,
    });
  } catch (error) {
    out.destroy();
    removeQuietly(staging.temporary);
    unstage(staging.temporary);
    throw new FileError("write", name, error);
  }
}

/** Flushes a directory's entries (a rename in it) to the disk; where a file system cannot, nothing more is done. */
function syncDirectory(path: string): void {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return;
  }
  try {
    fsyncSync(fd);
  } catch {
    // EINVAL/EISDIR: a file system (or platform) without directory fsync
  } finally {
    closeSync(fd);
  }
}

/** A write stream on `path`: emptied first ("w"), or appended to ("a"). */
function openFileStream(path: string, flags: "w" | "a"): Writable {
  let fd: number;
  try {
    fd = openSync(path, flags);
  } catch (error) {
    throw new FileError("write", path, error);
  }
  return streamOn(fd, path, path);
}

/** A write stream on a new temporary file for `name` (see stagingOf), with the old file's permissions. */
function openStagedStream(name: string, staging: { target: string; temporary: string }): Writable {
  let fd: number;
  // Staged (its removal on SIGINT/SIGTERM armed) before it exists: a signal that arrives once the
  // file is there, before a handler is, would kill the process and leave it behind.
  stage(staging.temporary);
  try {
    fd = openSync(staging.temporary, "wx", 0o666);
  } catch (error) {
    unstage(staging.temporary);
    throw new FileError("write", name, error);
  }
  removeStalePartials(dirname(staging.target), HOST);
  try {
    chmodSync(staging.temporary, statSync(staging.target).mode & 0o7777); // the file it replaces keeps its mode
  } catch {
    // no file yet: the umask's mode, as a new file gets
  }
  try {
    return streamOn(fd, staging.temporary, name);
  } catch (error) {
    removeQuietly(staging.temporary);
    unstage(staging.temporary);
    throw error;
  }
}

function streamOn(fd: number, path: string, name: string): Writable {
  try {
    // A deep buffer lets queued chunks leave in one writev and keeps the writer from waiting
    // on every 'drain' (the default 16 KB is less than one row chunk).
    return createWriteStream(path, { fd, highWaterMark: 8 << 20 });
  } catch (error) {
    closeSync(fd);
    throw new FileError("write", name, error);
  }
}

export type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/**
 * A run's record: the last line of one sink (the report) says how the run ended and names what
 * another (the rows) holds, so a reader can tell a rows file and a report of one run from a pair
 * a kill between their renames left behind.
 */
export interface RunRecord<T> {
  /** Index in `paths` of the sink the record ends (its commit comes last). */
  record: number;
  /** Index in `paths` of the sink the record describes (hashed while written). */
  described: number;
  /** The record's line (with its newline) for a run that ended so, the described sink's digest when it closed. */
  line(outcome: Outcome<T>, digest: OutputDigest | null): string;
}

/**
 * Runs `work` with sinks opened on `paths` (one per path, in order; null: none) and closes them
 * all, however `work` ends. The first failure wins: opening, then `work`'s own error, else the
 * first close() failure — a close never masks what went wrong before it. Files are put in place
 * (commit, in order) only when everything succeeded; after any failure none is, and every output
 * file keeps what it held before.
 *
 * With `run`, its record sink is closed and committed last, after the others are on disk. A
 * record file gets its line only when the run succeeded (else it is discarded as any file); a
 * record written to a stream (stdout) cannot be taken back, so it gets its line either way, last:
 * one that says the run failed, and why, retracts what it streamed before.
 */
export async function withSinks<T>(
  paths: readonly (string | undefined | null)[],
  work: (sinks: (ByteSink | null)[]) => Promise<T>,
  run?: RunRecord<T>,
): Promise<T> {
  // Every output is checked before any is opened: opening truncates, and a later one that
  // cannot be written must not have emptied an earlier one.
  for (const path of paths) if (path !== null && path !== undefined) checkWritable(path);
  const sinks: (ByteSink | null)[] = [];
  let outcome: Outcome<T>;
  const recordIndex = run !== undefined && paths[run.record] !== null ? run.record : -1;
  try {
    for (const [index, path] of paths.entries()) {
      const digest = recordIndex >= 0 && index === run!.described;
      sinks.push(path === null ? null : openByteSink(path, { digest }));
    }
    outcome = { ok: true, value: await work(sinks) };
  } catch (error) {
    outcome = { ok: false, error };
  }
  const fail = (error: unknown) => {
    if (outcome.ok) outcome = { ok: false, error };
  };
  // (an output that could not be opened ends `sinks` early: the ones after it are none)
  const record = recordIndex >= 0 ? (sinks[recordIndex] ?? null) : null;
  for (const sink of sinks) {
    if (sink === record) continue;
    try {
      await sink?.close();
    } catch (error) {
      fail(error);
    }
  }
  const described = recordIndex >= 0 ? (sinks[run!.described] ?? null) : null;
  const digest = () => (outcome.ok && described?.digest !== undefined ? described.digest() : null);
  /** Writes the record's line (a file: only for a run that succeeded), then closes it. */
  const finishRecord = async (sink: ByteSink) => {
    try {
      if (outcome.ok || !sink.staged) await sink.write(run!.line(outcome, digest()));
    } catch (error) {
      fail(error);
    }
    try {
      await sink.close();
    } catch (error) {
      fail(error);
    }
  };
  // A record file is closed (and synced) like the others, before any is renamed.
  if (record?.staged) await finishRecord(record);
  for (const sink of sinks) {
    if (sink === record) continue;
    try {
      if (outcome.ok) sink?.commit?.();
      else sink?.discard?.();
    } catch (error) {
      fail(error);
    }
  }
  if (record !== null) {
    if (record.staged) {
      try {
        if (outcome.ok) record.commit?.();
        else record.discard?.();
      } catch (error) {
        fail(error);
      }
    } else {
      // A stream: the outputs are in place (or not) by now, and its last line says which.
      await finishRecord(record);
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
  return new FileError(
    "write",
    path,
    Object.assign(new Error(`EBADF: ${path}`), { code: "EBADF", syscall: "open", path }),
  );
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
    const stat = statSync(path);
    if (stat.isDirectory())
      throw Object.assign(new Error(`EISDIR: ${path}`), { code: "EISDIR", syscall: "open", path });
    accessSync(path, constants.W_OK);
    // A file is replaced by a new one made beside it: its directory must take that too.
    if (stat.isFile()) accessSync(dirname(realpathSync(path)), constants.W_OK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw new FileError("write", path, error);
    try {
      accessSync(dirname(resolve(path)), constants.W_OK); // not there yet: its directory must take it
    } catch (dirError) {
      throw new FileError("write", path, dirError);
    }
  }
}
