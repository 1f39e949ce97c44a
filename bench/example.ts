import { readFileSync } from "node:fs";
import type { Rollout } from "../src/types.js";

/**
 * SPEC's worked example, from the package's examples/ folder. (Not src/cli/example.ts's loader: this
 * runs compiled in build/bench-out/bench/, where that module's relative URL would miss the folder.)
 */
export function loadExampleRollout(): Rollout {
  return JSON.parse(readFileSync(new URL("../../../examples/login-bug.json", import.meta.url), "utf8")) as Rollout;
}
