// The Chromium the browser tests drive (playwright-core cannot download one here): CHROMIUM_PATH
// when set, else Debian's. `npm test`'s pretest (scripts/ensure-chromium.sh) installs Debian's.
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
