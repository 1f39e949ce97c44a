// Whether dist/ is newer than everything the global setup compiles it from, so a run of one test
// file does not spend ~20 s in tsc when nothing changed (issue 39). dist/ counts as built when
// the setup's stamp (dist/.tests-built) or `npm run build`'s (build/.built) is newer than every
// file under src/ and the files that steer the compile.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

/** What tsc and the vendor bundle read, besides src/. */
const INPUTS = ["tsconfig.json", "tsconfig.build.json", "package.json", join("scripts", "bundle-cli-vendor.mjs")];

/** The setup's own stamp, written when it compiled (its time: when the compile started). */
export const SETUP_STAMP = join("dist", ".tests-built");

function mtimeOf(path: string): number {
  return statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? -Infinity;
}

/** The newest modification time of a file under `dir`. */
function newestUnder(dir: string): number {
  let newest = -Infinity;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    newest = Math.max(newest, mtimeOf(join(entry.parentPath, entry.name)));
  }
  return newest;
}

/** Whether `root`'s dist/ was compiled after the last change to its sources. */
export function distIsFresh(root: string): boolean {
  if (!existsSync(join(root, "dist", "ingest", "worker.js")) || !existsSync(join(root, "dist", "cli", "vendor.js")))
    return false;
  const built = Math.max(mtimeOf(join(root, SETUP_STAMP)), mtimeOf(join(root, "build", ".built")));
  const sources = Math.max(newestUnder(join(root, "src")), ...INPUTS.map((input) => mtimeOf(join(root, input))));
  return built > sources;
}
