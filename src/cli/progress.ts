// A progress bar on stderr for long `rows` runs: rollouts, MB read, rows, MB/s and an ETA from
// the input size. Only on a terminal; never in pipes, logs or tests.
import { fstatSync, statSync } from "node:fs";
import { descriptorOf } from "../ingest/sink.js";
import { Presets, SingleBar } from "./vendor.js";

export interface ProgressCounts {
  rollouts: number;
  rows: number;
  /** Input bytes done. */
  bytes: number;
}

export interface Progress {
  update(counts: ProgressCounts): void;
  /** Writes lines (ending in a newline) above the bar: the bar steps aside and is drawn again below. */
  write(text: string): void;
  stop(): void;
}

/**
 * Whether any of `outputs` (paths as the CLI takes them; undefined: stdout) is the terminal stderr
 * is on: the bar would draw over what is written there. Compares the devices, so stdout, `-o
 * /dev/pts/0` or `--report /dev/tty` all count.
 */
export function sharesStderrTerminal(outputs: readonly (string | undefined)[]): boolean {
  const deviceOf = (path: string | undefined): number | null => {
    try {
      const fd = descriptorOf(path);
      const stat = fd !== null ? fstatSync(fd) : statSync(path!);
      return stat.isCharacterDevice() ? stat.rdev : null;
    } catch {
      return null;
    }
  };
  const terminal = deviceOf("/dev/stderr");
  // /dev/tty is the process's own terminal by another device number: take it for stderr's.
  const controlling = deviceOf("/dev/tty");
  return (
    terminal !== null &&
    outputs.some((path) => {
      const device = deviceOf(path);
      return device !== null && (device === terminal || device === controlling);
    })
  );
}

const MB = 1 << 20;
const SILENT: Progress = { update() {}, write: (text) => void process.stderr.write(text), stop() {} };

/**
 * The bar when `stream` is a terminal and not `quiet`, else a no-op. `totalBytes` null (stdin)
 * shows the counts without a percentage or ETA.
 */
export function startProgress(
  totalBytes: number | null,
  quiet: boolean,
  stream: NodeJS.WriteStream = process.stderr,
): Progress {
  if (quiet || !stream.isTTY) return SILENT;
  const known = totalBytes !== null && totalBytes > 0;
  const format = known
    ? "{bar} {percentage}% | {rollouts} rollouts | {read}/{size} MB | {rows} rows | {speed} MB/s | ETA {eta_formatted}"
    : "{rollouts} rollouts | {read} MB | {rows} rows | {speed} MB/s";
  const bar = new SingleBar(
    { format, stream, hideCursor: true, clearOnComplete: true, fps: 5, etaBuffer: 50, gracefulExit: true },
    Presets.shades_classic,
  );
  const started = Date.now();
  const payload = (counts: ProgressCounts) => {
    const seconds = Math.max((Date.now() - started) / 1000, 1e-3);
    return {
      rollouts: counts.rollouts,
      rows: counts.rows,
      read: (counts.bytes / MB).toFixed(1),
      size: known ? (totalBytes / MB).toFixed(1) : "?",
      speed: (counts.bytes / MB / seconds).toFixed(1),
    };
  };
  let last: ProgressCounts = { rollouts: 0, rows: 0, bytes: 0 };
  const draw = () => bar.start(known ? totalBytes : 1, known ? last.bytes : 0, payload(last));
  draw();
  return {
    update(counts) {
      last = counts;
      bar.update(known ? counts.bytes : 0, payload(counts));
    },
    write(text) {
      // The bar clears its line and puts the cursor back there; the lines go there, the bar below.
      bar.stop();
      stream.write(text);
      draw();
    },
    stop() {
      bar.stop();
    },
  };
}
