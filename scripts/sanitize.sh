#!/usr/bin/env bash
# Builds muster with ASan+UBSan (build-asan/) and runs the unit tests and the fast part of
# the integration suite against it (not test_output.py: it bounds the agent's RSS, which
# ASan multiplies). Any sanitizer report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMUSTER_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
ctest --test-dir build-asan --output-on-failure -j"$(nproc)"
MUSTER_BUILD_DIR="$PWD/build-asan" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
  tests/integration/test_exit_codes.py tests/integration/test_signals.py \
  tests/integration/test_bad_input.py \
  tests/integration/test_multinode.py tests/integration/test_health.py "$@"
