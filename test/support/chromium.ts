import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { ROOT } from "./fixtures.js";

// The Chromium the browser tests drive (playwright-core cannot download one here): CHROMIUM_PATH
// when set, else Debian's. `npm test`'s pretest (scripts/ensure-chromium.sh) installs Debian's.
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || "/usr/bin/chromium";

/** How every browser test launches it: headless, and quiet (no background traffic, no first-run UI). */
export const CHROMIUM_LAUNCH = {
  executablePath: CHROMIUM_PATH,
  headless: true,
  timeout: 0, // no deadline: a loaded machine is slow, not hung (the test's timeout guards hangs)
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
  ],
};

/** Playwright waits for as long as it takes (its default gives up at 30 s): tests guard hangs. */
export const NO_DEADLINE = 0;

/** Builds the page (web/vite.config.ts) into `dir`/web, as `npm run build` would; returns its index.html. */
export function buildPage(dir: string): string {
  const out = join(dir, "web");
  execFileSync(
    process.execPath,
    [
      join(ROOT, "node_modules/vite/bin/vite.js"),
      "build",
      "--config",
      "web/vite.config.ts",
      "--outDir",
      out,
      "--emptyOutDir",
    ],
    { cwd: ROOT, stdio: "pipe" },
  );
  return join(out, "index.html");
}
