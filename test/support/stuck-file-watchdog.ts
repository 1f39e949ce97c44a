// A vitest reporter that ends the run when a test file stops making progress. A test stuck in a
// synchronous loop (how a bug in the WebAssembly core's loops shows up) blocks its worker, so its
// timeout never fires and the run would hang until CI's own limit. This names the file instead,
// kills the stuck workers, and ends the run with exit code 1. Progress is a test starting or
// ending: a file of many slow tests on a loaded machine runs as long as it needs.
import { readFileSync, readdirSync } from "node:fs";
import type { Reporter, TestCase, TestModule, Vitest } from "vitest/node";

/** Far above the slowest test's run time (~40 s alone, 220 s at load 24 on two cores). */
const FILE_LIMIT_MS = 600_000;
const CHECK_EVERY_MS = 5_000;

export default class StuckFileWatchdog implements Reporter {
  private vitest: Vitest | undefined;
  private readonly lastProgress = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly limitMs = FILE_LIMIT_MS) {}

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  /** Watching runs only while tests do (each run again in watch mode). */
  onTestRunStart(): void {
    clearInterval(this.timer);
    this.lastProgress.clear();
    this.timer = setInterval(() => this.check(), Math.min(CHECK_EVERY_MS, this.limitMs)).unref();
  }

  onTestModuleStart(module: TestModule): void {
    this.lastProgress.set(module.moduleId, Date.now());
  }

  onTestCaseReady(test: TestCase): void {
    this.progress(test.module.moduleId);
  }

  onTestCaseResult(test: TestCase): void {
    this.progress(test.module.moduleId);
  }

  private progress(moduleId: string): void {
    if (this.lastProgress.has(moduleId)) this.lastProgress.set(moduleId, Date.now());
  }

  onTestModuleEnd(module: TestModule): void {
    this.lastProgress.delete(module.moduleId);
  }

  onTestRunEnd(): void {
    clearInterval(this.timer);
  }

  private check(): void {
    const now = Date.now();
    const stuck = [...this.lastProgress].filter(([, since]) => now - since > this.limitMs).map(([id]) => id);
    if (stuck.length === 0) return;
    clearInterval(this.timer);
    const seconds = Math.round(this.limitMs / 1000);
    for (const id of stuck) {
      process.stderr.write(
        `${id}: no test started or ended in ${seconds} s; a test is stuck where its timeout cannot stop it ` +
          `(a synchronous loop, e.g. in the WebAssembly core)\n`,
      );
    }
    process.exitCode = 1;
    // Closing the pool would wait for the stuck worker, and exiting would leave it spinning (and
    // holding CI's output pipe open), so every process the run started goes first.
    for (const pid of descendants(process.pid)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    void this.vitest?.exit(true);
  }
}

/** Every process below `root`, from /proc (Linux; elsewhere none are found and they are left running). */
function descendants(root: number): number[] {
  const childrenOf = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // "pid (comm) state ppid ...": comm may hold spaces and ")", so read from the last ")".
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      childrenOf.set(ppid, [...(childrenOf.get(ppid) ?? []), Number(entry)]);
    } catch {
      // exited meanwhile
    }
  }
  const found: number[] = [];
  for (let queue = [root]; queue.length > 0; ) {
    const children = childrenOf.get(queue.pop()!) ?? [];
    found.push(...children);
    queue.push(...children);
  }
  return found;
}
