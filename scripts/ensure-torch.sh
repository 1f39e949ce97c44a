#!/usr/bin/env bash
# The packed-layout check (examples/pytorch) runs a small real model in Debian's PyTorch, with
# Debian's own Python (/usr/bin/python3: the python3 on PATH may be another one). Install it when
# it is missing, so `npm test` works on a fresh machine.
set -euo pipefail
/usr/bin/python3 -c "import torch" 2>/dev/null && exit 0
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null; then
  echo "callforest tests: /usr/bin/python3 cannot import torch; install Debian's python3-torch (apt-get install --no-install-recommends python3-torch)" >&2
  exit 1
fi
echo "callforest tests: installing Debian's python3-torch for the PyTorch check (~1 minute) ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
