#!/usr/bin/env bash
# Writes rows, packed trees and bins with the callforest CLI, then checks with a small transformer
# in PyTorch (check_packed.py) that a trainer computes the same from each packed layout as from
# the rows. Usage: bash examples/pytorch/run.sh
#   PYTHON  the interpreter that has torch and the callforest package (default: the project's .venv,
#           scripts/ensure-python.sh installs both)
#   OUT     keep the generated files in this directory (default: a temporary one, removed)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
# The interpreter first: a missing one is said before any work is done.
if ! command -v "$python" >/dev/null 2>&1; then
  echo "run.sh: no Python at $python: build the project's with 'bash scripts/ensure-python.sh'," \
    "or name one that has torch: PYTHON=/path/to/python bash examples/pytorch/run.sh" >&2
  exit 2
fi
if ! "$python" -c "import torch" >/dev/null 2>&1; then
  echo "run.sh: $python cannot import torch: build the project's Python with" \
    "'bash scripts/ensure-python.sh', or name one that has torch: PYTHON=/path/to/python" >&2
  exit 2
fi
if [[ -n "${OUT:-}" ]]; then
  work="$OUT" && mkdir -p "$work"
else
  work="$(mktemp -d)" && trap 'rm -rf "$work"' EXIT
fi
callforest() { node "$root/bin/callforest.js" "$@"; }

# Inputs: SPEC's worked example, a screenshot replaced in place (media), and a generated batch.
node "$here/generate.mjs" 16 7 >"$work/generated.jsonl"
callforest convert --strict "$root/examples/login-bug.json" "$root/examples/screenshot-swap.json" \
  "$work/generated.jsonl" -o "$work/rollouts.jsonl"

callforest rows --strict --quiet "$work/rollouts.jsonl" -o "$work/rows.jsonl"
callforest rows --strict --quiet --layout packed "$work/rollouts.jsonl" -o "$work/trees.jsonl"
callforest rows --strict --quiet --layout packed --capacity 64 --mask-format ints \
  "$work/rollouts.jsonl" -o "$work/bins-64.jsonl"
# The longest row is the smallest capacity that takes every rollout: there trees are split, and
# calls come back as context in later bins.
split="$(node -e 'const fs = require("fs");
  const rows = fs.readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
  console.log(Math.max(...rows.map((r) => r.num_tokens)));' "$work/rows.jsonl")"
callforest rows --strict --quiet --layout packed --capacity "$split" \
  "$work/rollouts.jsonl" -o "$work/bins-$split.jsonl"

"$python" "$here/check_packed.py" "$work/rollouts.jsonl" "$work/rows.jsonl" \
  "$work/trees.jsonl" "$work/bins-64.jsonl" "$work/bins-$split.jsonl"
