// The built-in worked example (SPEC's login-bug rollout), shipped in the package.
import { readFile } from "node:fs/promises";

export const EXAMPLE_URL = new URL("../../examples/login-bug.json", import.meta.url);

export async function loadExample(): Promise<unknown> {
  return JSON.parse(await readFile(EXAMPLE_URL, "utf8"));
}
