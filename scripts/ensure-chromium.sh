#!/usr/bin/env bash
# The browser tests drive Chromium through playwright-core, which cannot download its own browser
# here: $CHROMIUM_PATH when set, else Debian's /usr/bin/chromium, installed when missing so that
# `npm test` works on a fresh machine.
set -euo pipefail
if [ -n "${CHROMIUM_PATH:-}" ]; then
  [ -x "$CHROMIUM_PATH" ] && exit 0
  echo "callforest tests: CHROMIUM_PATH=$CHROMIUM_PATH is not an executable; point it at a Chromium or Chrome binary" >&2
  exit 1
fi
[ -x /usr/bin/chromium ] && exit 0
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null; then
  echo "callforest tests: no Chromium at /usr/bin/chromium; install Debian's chromium package (apt-get install chromium) or set CHROMIUM_PATH to a Chromium or Chrome binary" >&2
  exit 1
fi
echo "callforest tests: installing Debian's chromium for the browser tests ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
