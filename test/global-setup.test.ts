// The global setup compiles dist/ only when a source is newer than it (test/support/dist-fresh.ts):
// one test file's run no longer spends ~20 s in tsc when nothing changed (issue 39).
import { mkdirSync, utimesSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { expect, test } from "vitest";
import { SETUP_STAMP, distIsFresh } from "./support/dist-fresh.js";
import { tempDirs } from "./support/temp-dirs.js";

const tempDir = tempDirs("global-setup");

/** Writes `path` under `root` with modification time `seconds`. */
function file(root: string, path: string, seconds: number): void {
  const at = join(root, path);
  mkdirSync(dirname(at), { recursive: true });
  writeFileSync(at, "");
  utimesSync(at, seconds, seconds);
}

function tree(): string {
  const root = tempDir();
  for (const path of ["src/a.ts", "src/cli/b.ts", "tsconfig.json", "tsconfig.build.json", "package.json"])
    file(root, path, 1000);
  file(root, "scripts/bundle-cli-vendor.mjs", 1000);
  file(root, "dist/ingest/worker.js", 2000);
  file(root, "dist/cli/vendor.js", 2000);
  return root;
}

test("dist/ is fresh when the setup's stamp or the build's is newer than every source", () => {
  const root = tree();
  expect(distIsFresh(root)).toBe(false); // never stamped
  file(root, SETUP_STAMP, 2000);
  expect(distIsFresh(root)).toBe(true);
  file(root, "src/cli/b.ts", 3000); // a change deep in src/
  expect(distIsFresh(root)).toBe(false);
  file(root, "build/.built", 4000); // npm run build since
  expect(distIsFresh(root)).toBe(true);
  file(root, "tsconfig.build.json", 5000);
  expect(distIsFresh(root)).toBe(false);
});

test("dist/ without its worker or the CLI's vendor bundle is not fresh, whatever the stamps", () => {
  const root = tree();
  file(root, SETUP_STAMP, 9000);
  writeFileSync(join(root, "dist/cli/vendor.js"), "");
  expect(distIsFresh(root)).toBe(true);
  const bare = tempDir();
  file(bare, "src/a.ts", 1000);
  file(bare, SETUP_STAMP, 9000);
  expect(distIsFresh(bare)).toBe(false);
});
