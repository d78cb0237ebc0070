#!/usr/bin/env bash
# Creates (once) a test-only venv with PyPI's kubernetes-validate, pinned with its
# dependencies, outside the repo, and prints the path of its python. The manifest test
# (tests/integration/test_manifest_schemas.py) validates examples/k8s with it, offline:
# the package ships the Kubernetes JSON schemas. scripts/setup.sh runs this.
#
# Cache: ${MUSTER_CACHE:-~/.cache/muster}/k8s-validate-venv (~150 MB, most of it schemas).
# Output: the python's path on stdout (exit 0), or a message on stderr and exit 1.
set -euo pipefail
source "$(dirname "$0")/tool_venv.sh"
PACKAGES=(kubernetes-validate==1.37.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1
  referencing==0.37.0 rpds-py==2026.9.1 attrs==26.1.0 importlib_resources==7.1.0
  packaging==26.4 PyYAML==6.0.4 typing_extensions==4.16.0)

have() {
  "$VENV/bin/python" -c "from importlib.metadata import version as v
assert v('kubernetes-validate') == '1.37.0'; import kubernetes_validate, jsonschema, yaml" \
    >/dev/null 2>&1
}

tool_venv k8s-validate "~20 MB" "does not import kubernetes_validate" "${PACKAGES[@]}" ||
  exit 1
echo "$VENV/bin/python"
