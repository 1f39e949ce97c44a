// Runs once before any test file: compiles src/ to dist/ (tsc and the CLI's vendor bundle; the
// .wasm files are already in build/) for the tests that run dist/ (worker threads load dist/ingest/worker.js; spawned CLIs
// load dist/). Done here, not in one file's beforeAll, so that no test spawns a CLI while tsc
// rewrites the files it loads.
import { execFileSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./fixtures.js";

/** Type errors elsewhere do not stop tsc from emitting; a missing worker file does stop the tests. */
export function setup(): void {
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
}
