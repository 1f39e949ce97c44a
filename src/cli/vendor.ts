// The CLI's own small dependencies, commander and cli-progress, from one module: `npm run build`
// bundles it into dist/cli/vendor.js (scripts/bundle-cli-vendor.mjs), so the package installs with
// no dependency. The CLI imports them from here only (test/layers.test.ts checks).
import cliProgress from "cli-progress";

export { Command, CommanderError, Option } from "commander";
export const { SingleBar, Presets } = cliProgress;
