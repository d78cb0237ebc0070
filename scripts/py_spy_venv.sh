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
source "$(dirname "$0")/tool_venv.sh"

have() { "$VENV/bin/py-spy" --version 2>/dev/null | grep -qx 'py-spy 0.4.2'; }

tool_venv py-spy "~3 MB" "bin/py-spy does not run" py-spy==0.4.2 || exit 1
echo "$VENV/bin/py-spy"
