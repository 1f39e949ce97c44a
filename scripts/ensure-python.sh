#!/usr/bin/env bash
# The Python tests (test/python) and examples/pytorch run in a virtual environment at
# <repo>/.venv, built with Debian's python3 from the local wheel store that this machine's pip is
# configured for (the default index is unreachable). It is (re)built when missing or when
# python/requirements.txt or python/constraints.txt changed (a stamp of their hash inside .venv).
# The Python package in python/ (`callforest`) is then installed into it as a user installs it,
# `pip install ./python` (not editable: the tests import what a wheel holds), again whenever a
# file under python/ changed (a second stamp). Nothing is cached outside the project: pip runs
# with --no-cache-dir.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
requirements="$root/python/requirements.txt"
constraints="$root/python/constraints.txt"
stamp="$venv/.callforest-requirements"
hash="$(cat "$requirements" "$constraints" | sha256sum | cut -d' ' -f1)"
package_stamp="$venv/.callforest-package"
package_hash="$(cd "$root" && find python -type f ! -path '*/__pycache__/*' ! -path '*.egg-info*' ! -path 'python/build/*' \
  ! -name requirements.txt ! -name constraints.txt | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
[ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$hash" ] &&
  [ "$(cat "$package_stamp" 2>/dev/null)" = "$package_hash" ] && exit 0

python=/usr/bin/python3 # Debian's: the python3 on PATH may be another one
if ! "$python" -c "import ensurepip, venv" 2>/dev/null; then
  if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null; then
    echo "callforest tests: $python cannot create a virtual environment; install Debian's python3-venv (apt-get install python3-venv)" >&2
    exit 1
  fi
  echo "callforest tests: installing Debian's python3-venv ..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi

# The local wheel store: PIP_INDEX_URL etc. override it when set (another machine's mirror).
index="${PIP_INDEX_URL:-file:///opt/pypi/simple}"
extra="${PIP_EXTRA_INDEX_URL:-file:///opt/pypi-more/simple}"
links="${PIP_FIND_LINKS:-/opt/wheels}"
if [ -z "${PIP_INDEX_URL:-}" ] && [ ! -d /opt/pypi/simple ]; then
  echo "callforest tests: no local wheel store at /opt/pypi/simple; set PIP_INDEX_URL (and PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS) to a package index that has python/requirements.txt" >&2
  exit 1
fi

pip_install() {
  # (The extra index lacks most packages; pip warns once per missing folder: noise, filtered.)
  "$venv/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check \
    --index-url "$index" --extra-index-url "$extra" --find-links "$links" \
    "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

if ! [ -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$hash" ]; then
  echo "callforest tests: building the Python environment in .venv (2-6 minutes) ..." >&2
  start=$SECONDS
  rm -rf "$venv"
  "$python" -m venv "$venv"
  pip_install -r "$requirements" -c "$constraints"
  echo "$hash" >"$stamp"
  echo "callforest tests: .venv ready in $((SECONDS - start)) s" >&2
fi

# The package, from the checkout (its build backend, setuptools, comes from the same index; its
# dependencies, torch, pyarrow and numpy, are already there). Its build leftovers are removed.
pip_install --force-reinstall --no-deps "$root/python"
rm -rf "$root/python/build" "$root"/python/src/*.egg-info
"$venv/bin/python" -m pip check --disable-pip-version-check >/dev/null
echo "$package_hash" >"$package_stamp"
echo "callforest tests: installed the callforest Python package (python/) into .venv" >&2
