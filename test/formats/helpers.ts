// Shared inputs for the format tests: the real Gym samples and the hand-made gym-observed fixture.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
// Real NeMo Gym output (Apache-2.0), vendored so the tests need nothing outside the repository.
export const GYM_SAMPLES = new URL("../fixtures/gym-samples", import.meta.url).pathname;
export const VLLM_ROUND_TRIP = join(GYM_SAMPLES, "vllm-round-trip.json");
export const COMPETITIVE_CODING = join(GYM_SAMPLES, "competitive-coding-rollouts.jsonl");
export const OBSERVED_DIR = join(here, "..", "fixtures", "gym-observed");
export const OBSERVED_ROWS = join(OBSERVED_DIR, "rollouts.jsonl");
export const OBSERVED_TOKENS = join(OBSERVED_DIR, "7-2.tokens.jsonl");

export function readJson(path: string): any {
  return JSON.parse(readFileSync(path, "utf8"));
}

export function readJsonl(path: string): any[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line));
}

/** A deep copy, so tests can break one field without touching the shared value. */
export function clone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value));
}
