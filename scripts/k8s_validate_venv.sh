#!/usr/bin/env bash
# Creates (once) a test-only venv with PyPI's kubernetes-validate, pinned with its
# dependencies, outside the repo, and prints the path of its python. The manifest test
# (tests/integration/test_manifest_schemas.py) validates examples/k8s with it, offline:
# the package ships the Kubernetes JSON schemas. scripts/setup.sh runs this.
#
# Cache: ${MUSTER_CACHE:-~/.cache/muster}/k8s-validate-venv (~150 MB, most of it schemas).
# Output: the python's path on stdout (exit 0), or a message on stderr and exit 1.
set -euo pipefail
PACKAGES=(kubernetes-validate==1.37.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1
  referencing==0.37.0 rpds-py==2026.9.1 attrs==26.1.0 importlib_resources==7.1.0
  packaging==26.4 PyYAML==6.0.4 typing_extensions==4.16.0)
CACHE=${MUSTER_CACHE:-$HOME/.cache/muster}
VENV=$CACHE/k8s-validate-venv
mkdir -p "$CACHE"
exec 9>"$CACHE/.k8s-validate.lock"
flock -w 600 9

have() {
  "$VENV/bin/python" -c "from importlib.metadata import version as v
assert v('kubernetes-validate') == '1.37.0'; import kubernetes_validate, jsonschema, yaml" \
    >/dev/null 2>&1
}

if ! have; then
  echo "k8s_validate_venv: creating $VENV with ${PACKAGES[0]} (one time, ~20 MB download)" >&2
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV" || { echo "k8s_validate_venv: python3 -m venv failed" >&2; exit 1; }
  # --no-deps: exactly the pinned set, nothing a resolver would pick on another day.
  if ! "$VENV/bin/python" -m pip install -q --no-deps "${PACKAGES[@]}" >&2; then
    echo "k8s_validate_venv: pip install ${PACKAGES[*]} failed" >&2
    exit 1
  fi
  have || { echo "k8s_validate_venv: the venv does not import kubernetes_validate" >&2; exit 1; }
fi
echo "$VENV/bin/python"
