// The repository's fixture files, shared by every test that reads them.
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** SPEC's worked example. */
export const LOGIN_BUG = join(ROOT, "examples", "login-bug.json");
// Real NeMo Gym output (Apache-2.0), vendored so the tests need nothing outside the repository.
export const GYM_SAMPLES = join(ROOT, "test", "fixtures", "gym-samples");
export const VLLM_ROUND_TRIP = join(GYM_SAMPLES, "vllm-round-trip.json");
export const COMPETITIVE_CODING = join(GYM_SAMPLES, "competitive-coding-rollouts.jsonl");
// The hand-made gym-observed capture and its token file.
export const OBSERVED_DIR = join(ROOT, "examples", "gym-observed");
export const OBSERVED_ROWS = join(OBSERVED_DIR, "rollouts.jsonl");
export const OBSERVED_TOKENS = join(OBSERVED_DIR, "7-2.tokens.jsonl");
