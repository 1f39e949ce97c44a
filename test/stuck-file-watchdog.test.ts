// The watchdog reporter (test/support/stuck-file-watchdog.ts) on a suite with a test that never
// yields: the run ends with exit code 1, names the file, and leaves no process spinning.
import { spawnSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
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

test("a file stuck in a synchronous loop fails the run by name, and its worker is killed", () => {
  const marker = `STUCK_SUITE_RUN=${process.pid}-${Date.now()}`;
  const started = Date.now();
  const run = spawnSync(
    process.execPath,
    [join(ROOT, "node_modules", "vitest", "vitest.mjs"), "run", "--root", SUITE],
    {
      cwd: SUITE,
      encoding: "utf8",
      env: { ...process.env, WATCHDOG_LIMIT_MS: "2000", CI: "true", [marker.split("=")[0]]: marker.split("=")[1] },
      timeout: 50_000,
    },
  );
  const took = Date.now() - started;
  expect(run.signal).toBeNull(); // ended by itself, not by this test's timeout
  expect(run.status).toBe(1);
  expect(run.stderr).toMatch(/spins\.suite\.ts: still running after 2 s; a test is stuck/);
  expect(run.stderr).not.toMatch(/passes\.suite\.ts: still running/);
  expect(took).toBeLessThan(40_000); // the spinning test alone would take 60 s
  expect(processesWith(marker)).toBe(0);
}, 60_000);
