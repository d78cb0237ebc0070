#!/usr/bin/env bash
# Creates (once) a test-only venv with PyPI's py-spy (a static binary in its wheel), pinned,
# outside the repo, and prints the path of its py-spy. `muster stacks` uses py-spy, when it
# is on the agent's PATH, for a rank whose stack hook cannot answer (stuck in C with the GIL
# held, not a Python program); tests/integration/test_stacks_py_spy.py puts it on the PATH.
# scripts/setup.sh runs this.
#
# Cache: ${MUSTER_CACHE:-~/.cache/muster}/py-spy-venv (~10 MB).
# Output: the py-spy's path on stdout (exit 0), or a message on stderr and exit 1.
set -euo pipefail
PACKAGE=py-spy==0.4.2
CACHE=${MUSTER_CACHE:-$HOME/.cache/muster}
VENV=$CACHE/py-spy-venv
mkdir -p "$CACHE"
exec 9>"$CACHE/.py-spy.lock"
flock -w 600 9

have() { "$VENV/bin/py-spy" --version 2>/dev/null | grep -qx 'py-spy 0.4.2'; }

if ! have; then
  echo "py_spy_venv: creating $VENV with $PACKAGE (one time, ~3 MB download)" >&2
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV" || { echo "py_spy_venv: python3 -m venv failed" >&2; exit 1; }
  if ! "$VENV/bin/python" -m pip install -q --no-deps "$PACKAGE" >&2; then
    echo "py_spy_venv: pip install $PACKAGE failed" >&2
    exit 1
  fi
  have || { echo "py_spy_venv: $VENV/bin/py-spy does not run" >&2; exit 1; }
fi
echo "$VENV/bin/py-spy"
