#!/usr/bin/env bash
# `npm run build` unless build/.built is newer than every source: a clone's `npm start` and
# `npm test` build on first use (and after a change), as `npm ci` does not (installing the packed
# tarball must run no script, so the package has no `prepare`; `prepack` builds what it holds).
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=build/.built
if [ -f "$stamp" ] && [ -z "$(find src assembly web scripts package.json package-lock.json tsconfig.json \
  tsconfig.build.json asconfig.json -newer "$stamp" -type f -print -quit)" ]; then
  exit 0
fi
npm run build
