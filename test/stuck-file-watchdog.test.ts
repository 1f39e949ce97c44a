// The watchdog reporter (test/support/stuck-file-watchdog.ts) on a suite with a test that never
// yields: the run ends with exit code 1, names the file, and leaves no process spinning.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { ROOT } from "./support/fixtures.js";

const SUITE = join(ROOT, "test", "fixtures", "stuck-suite");

/** Processes whose environment holds `marker` (the inner run's and any it left behind). */
function processesWith(marker: string): number {
  let count = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, "utf8").split("\0").includes(marker)) count++;
    } catch {
      // exited meanwhile
    }
  }
  return count;
}

test("a file stuck in a synchronous loop fails the run by name, and its worker is killed", async () => {
  const marker = `STUCK_SUITE_RUN=${process.pid}-${Date.now()}`;
  const dir = mkdtempSync(join(tmpdir(), "callforest-watchdog-"));
  const spinEnded = join(dir, "spin-ended");
  try {
    // Asynchronous, with no deadline of its own: the inner run ends when the watchdog kills the
    // spinning file, or after its 60 s spin (which then leaves spinEnded), however loaded the machine.
    const run = spawn(process.execPath, [join(ROOT, "node_modules", "vitest", "vitest.mjs"), "run", "--root", SUITE], {
      cwd: SUITE,
      env: {
        ...process.env,
        WATCHDOG_LIMIT_MS: "5000",
        CI: "true",
        SPIN_ENDED_FILE: spinEnded,
        [marker.split("=")[0]]: marker.split("=")[1],
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    run.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const [status, signal] = (await once(run, "close")) as [number | null, NodeJS.Signals | null];
    expect(signal).toBeNull();
    expect(status).toBe(1);
    expect(stderr).toMatch(/spins\.suite\.ts: no test started or ended in 5 s; a test is stuck/);
    expect(stderr).not.toMatch(/passes\.suite\.ts: no test/);
    expect(existsSync(spinEnded)).toBe(false); // ended by the watchdog, not by the spin's own end
    expect(processesWith(marker)).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
