#!/usr/bin/env bash
# The README's test command: set-up, build, unit tests (ctest), integration tests (pytest
# with real torch workers, real signals, PID namespaces). Works on a fresh Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."
# Warnings are errors here, in the gcc build and the clang ones (sanitizers, fuzzing).
export MUSTER_WERROR=${MUSTER_WERROR:-ON}
scripts/setup.sh
scripts/build.sh
echo "== unit tests (ctest) (t=${SECONDS}s)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
if [[ ${SANITIZE:-1} != 0 ]]; then
  echo "== sanitizers: ASan+UBSan (build-asan), TSan (build-tsan) (SANITIZE=0 skips) (t=${SECONDS}s)"
  scripts/sanitize.sh all
fi
if [[ ${FUZZ_SECONDS:-30} != 0 ]]; then
  echo "== fuzzing (${FUZZ_SECONDS:-30}s per target; FUZZ_SECONDS=0 skips) (t=${SECONDS}s)"
  scripts/fuzz.sh
fi
echo "== (t=${SECONDS}s) integration tests (pytest, real torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'))"
# /usr/bin/python3 on purpose: Debian's python3-torch lives there, not in a pyenv shim.
# In parallel (pytest-xdist), then the `serial` tests alone: scripts/integration.sh.
MUSTER_BUILD_DIR="$PWD/build" scripts/integration.sh "$@"
if [[ ${MUSTER_CHAOS_SECONDS:-120} != 0 ]]; then
  echo "== (t=${SECONDS}s) chaos (tests/chaos, ${MUSTER_CHAOS_SECONDS:-120}s split between the grpc and etcd modes; MUSTER_CHAOS_SECONDS=0 skips)"
  MUSTER_BUILD_DIR="$PWD/build" MUSTER_CHAOS_SECONDS=${MUSTER_CHAOS_SECONDS:-120} \
    /usr/bin/python3 -m pytest -q -ra -p no:cacheprovider tests/chaos
fi
echo "== scripts/test.sh: all stages passed in ${SECONDS}s"
