#!/usr/bin/env bash
# Configures and builds muster into build/ (binaries in build/bin, tests in build/tests).
# MUSTER_WERROR=ON makes warnings errors (scripts/test.sh sets it; off for a user's build).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMUSTER_WERROR="${MUSTER_WERROR:-OFF}" "$@" >/dev/null
cmake --build build -j"$(nproc)"
