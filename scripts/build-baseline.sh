#!/usr/bin/env bash
# Builds an older commit's CLI beside this checkout, for benchmarks that compare against it:
# `git archive` of the commit into build/baselines/<commit>/, `npm ci` without scripts, then
# the WebAssembly modules and dist/ (not the page). Cached: a finished build is reused.
#   bash scripts/build-baseline.sh 8205dfe   → prints the directory holding bin/callforest.js
set -euo pipefail
commit="$(git rev-parse --short=7 "$1^{commit}")"
root="$(git rev-parse --show-toplevel)"
dir="$root/build/baselines/$commit"
if [ -f "$dir/.built" ]; then echo "$dir"; exit 0; fi
rm -rf "$dir" && mkdir -p "$dir"
git -C "$root" archive "$commit" | tar -x -C "$dir"
(
  cd "$dir"
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
  npm run --silent asbuild
  npx tsc -p tsconfig.build.json
) >&2
touch "$dir/.built"
echo "$dir"
