import { defineConfig } from "vitest/config";
import StuckFileWatchdog from "./test/support/stuck-file-watchdog.js";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    // Timeouts guard against hangs only, so they sit far above what any test needs on a loaded
    // machine (CPU-heavy tests took over 60 s at load 20 on two cores, one 220 s at load 24);
    // speed is checked by benchmarks, never by a test's deadline.
    testTimeout: 600_000,
    hookTimeout: 600_000,
    // A test stuck in synchronous code (where testTimeout cannot reach) fails the run by name.
    reporters: ["default", new StuckFileWatchdog()],
    // Two cores: keep worker count small so browser and worker-thread tests are not starved.
    maxWorkers: 2,
  },
});
