// Temporary directories for a test file, all removed after its tests.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";

/** A maker of fresh directories named `callforest-<prefix>-*`; call it at a test file's top level. */
export function tempDirs(prefix: string): () => string {
  const made: string[] = [];
  afterAll(() => {
    for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    const dir = mkdtempSync(join(tmpdir(), `callforest-${prefix}-`));
    made.push(dir);
    return dir;
  };
}
