#!/usr/bin/env bash
# The browser tests drive Debian's Chromium (playwright-core cannot download its own browser
# here). Install it when it is missing, so `npm test` works on a fresh machine.
set -euo pipefail
[ -x /usr/bin/chromium ] && exit 0
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null; then
  echo "callforest tests: /usr/bin/chromium is missing; install Debian's chromium package (apt-get install chromium)" >&2
  exit 1
fi
echo "callforest tests: installing Debian's chromium for the browser tests ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
