import { defineConfig } from "vitest/config";
import StuckFileWatchdog from "./test/support/stuck-file-watchdog.js";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // A test stuck in synchronous code (where testTimeout cannot reach) fails the run by name.
    reporters: ["default", new StuckFileWatchdog()],
    // Two cores: keep worker count small so browser and worker-thread tests are not starved.
    maxWorkers: 2,
  },
});
