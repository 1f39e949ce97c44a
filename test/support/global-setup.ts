// Runs once before any test file: compiles src/ to dist/ (tsc and the CLI's vendor bundle; the
// .wasm files are already in build/) for the tests that run dist/ (worker threads load dist/ingest/worker.js; spawned CLIs
// load dist/). Done here, not in one file's beforeAll, so that no test spawns a CLI while tsc
// rewrites the files it loads. Skipped when dist/ is newer than its sources (dist-fresh.ts).
import { execFileSync } from "node:child_process";
import { existsSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./fixtures.js";
import { SETUP_STAMP, distIsFresh } from "./dist-fresh.js";

/** Type errors elsewhere do not stop tsc from emitting; a missing worker file does stop the tests. */
export function setup(): void {
  if (distIsFresh(ROOT)) return;
  const started = new Date();
  try {
    execFileSync(
      process.execPath,
      [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", join(ROOT, "tsconfig.build.json")],
      {
        cwd: ROOT,
        stdio: "pipe",
      },
    );
  } catch {
    // emitted anyway; checked below
  }
  // tsc wrote dist/cli/vendor.js as an import of commander and cli-progress; the package's is a
  // bundle of both (a packed tarball must carry that one)
  execFileSync(process.execPath, [join(ROOT, "scripts", "bundle-cli-vendor.mjs")], { cwd: ROOT, stdio: "pipe" });
  const worker = join(ROOT, "dist", "ingest", "worker.js");
  if (!existsSync(worker) || statSync(worker).mtimeMs < statSync(join(ROOT, "src", "ingest", "worker.ts")).mtimeMs) {
    throw new Error("npm run build did not produce dist/ingest/worker.js");
  }
  // Stamped with the time the compile started: a source saved during it makes the next run compile.
  const stamp = join(ROOT, SETUP_STAMP);
  writeFileSync(stamp, "");
  utimesSync(stamp, started, started);
}
