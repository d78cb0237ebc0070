#!/usr/bin/env bash
# The integration tests (tests/integration), as scripts/test.sh runs them:
#   scripts/integration.sh [pytest arguments...]
# Most tests wait on processes, sockets and timeouts rather than the CPU, so they run in
# MUSTER_TEST_JOBS pytest-xdist workers (default 3 on this project's 2-core machine;
# 1 runs them one by one). Tests marked `serial` (a latency, a deadline to 0.1 s, a peak
# RSS) then run alone. Ports and pod subnets are split between workers
# (tests/integration/multinode.py, pods.py).
set -euo pipefail
cd "$(dirname "$0")/.."
export MUSTER_BUILD_DIR=${MUSTER_BUILD_DIR:-$PWD/build}
jobs=${MUSTER_TEST_JOBS:-3}
pytest=(/usr/bin/python3 -m pytest -q -ra -p no:cacheprovider)
if ((jobs > 1)) && ! /usr/bin/python3 -c 'import xdist' 2>/dev/null; then
  echo "integration: pytest-xdist is missing (apt-get install python3-pytest-xdist, or" \
    "scripts/setup.sh): running the tests one by one" >&2
  jobs=1
fi
status=0
if ((jobs > 1)); then
  # loadgroup: one test (or one xdist_group) at a time, longest first (conftest.py).
  "${pytest[@]}" -n "$jobs" --dist loadgroup -m "not serial" tests/integration "$@" || status=$?
else
  "${pytest[@]}" -m "not serial" tests/integration "$@" || status=$?
fi
# 5: no test selected (e.g. arguments that pick only serial tests, or none of them).
((status == 5)) && status=0
serial=0
"${pytest[@]}" -m serial tests/integration "$@" || serial=$?
((serial == 5)) && serial=0
((status != 0)) && exit "$status"
exit "$serial"
