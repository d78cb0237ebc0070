#!/usr/bin/env bash
# Sanitizer builds and the tests that run under them; any report fails the run.
#   scripts/sanitize.sh [address|thread|all] [pytest arguments...]     (default: all)
# address: build-asan/, ASan+UBSan. Every unit test, and the integration tests that cover
#   the agent's lifecycle end to end (exit codes: a sample of the matrix, which the plain
#   build runs whole; signals, bad input). Not test_output.py:
#   it bounds the agent's RSS, which ASan multiplies. Not the multi-node and health tests:
#   TSan runs those (below), and the subsets do not overlap, for CI's time; the rendezvous
#   over gRPC (server and clients in one process) is under ASan in its unit tests.
# thread: build-tsan/, TSan. The store's unit tests (c10d_*), the rendezvous state machine,
#   the server's job registry (its mutex against its heartbeat timer thread), the
#   connect/backoff test and the rendezvous over gRPC (rdzv_grpc_rendezvous_test,
#   rdzv_grpc_transport_test: server, agent clients, JobStatus, health, TLS in one
#   process); then the store server under thousands of connections and abuse, and agents
#   and servers as processes (multi-node jobs, status, health). Debian's gRPC is not
#   instrumented: our side of its hand-offs is annotated (base/tsan.h) and what is left
#   inside gRPC's header code is suppressed by gRPC function (tests/tsan.supp says which
#   and why).
# Both builds use clang (its -O0 code generation is twice as fast as gcc's, and build time
# is what CI pays for here). The ASan build is CI's one non-unity compile of the whole tree
# (-DMUSTER_UNITY=OFF, every target: muster, muster-probe, every library, every test and
# fixture, the bench programs): a unity batch lends a file the includes of the files
# before it, so a missing #include only shows when each file compiles alone. The TSan
# build stays a unity build of only the targets its tests run. Reports go to files
# in a scratch directory (log_path) and are printed at the end: a report from any process
# counts, also from a server the test kills or an agent whose exit code it does not check.
set -euo pipefail
cd "$(dirname "$0")/.."

which=${1:-all}
(($#)) && shift
case $which in
  address | thread | all) ;;
  *) echo "usage: scripts/sanitize.sh [address|thread|all] [pytest args]; got '$which'" >&2; exit 2 ;;
esac

reports=$(mktemp -d)
# What a report looks like; anything else in a log file is a warning, e.g. ASan's note
# that the spawner's clone() child runs on its own stack (launch/spawner.cc), is ignored.
# A sanitizer runtime's failed CHECK (it aborts the process) counts as a report.
report='ERROR: [A-Za-z]+Sanitizer|WARNING: ThreadSanitizer|runtime error:|Sanitizer: CHECK failed'
finish() {
  local rc=$? f
  for f in "$reports"/*; do
    [[ -f $f ]] && grep -qE "$report" "$f" || continue
    echo "== sanitizer report $f"
    cat "$f"
    rc=1
  done
  ((rc == 0)) || echo "sanitize: FAILED (a failing test, or a sanitizer report above)" >&2
  rm -rf "$reports"
  exit "$rc"
}
trap finish EXIT

# build DIR SANITIZER UNITY TEST_REGEX [-E EXCLUDE] TARGETS...: configures DIR with clang
# (MUSTER_UNITY=UNITY) and builds TARGETS and the executables of the unit tests whose names
# match TEST_REGEX and not EXCLUDE (an executable's name is its target's).
build() {
  local dir=$1 sanitizer=$2 unity=$3 regex=$4 exclude='^$'
  shift 4
  if [[ ${1:-} == -E ]]; then exclude=$2; shift 2; fi
  # A directory configured with another compiler (gcc, before) is not reused.
  if [[ -f $dir/CMakeCache.txt ]] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang++' "$dir/CMakeCache.txt"
  then
    rm -rf "$dir"
  fi
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld \
    -DMUSTER_SANITIZE="$sanitizer" -DMUSTER_UNITY="$unity" \
    -DMUSTER_WERROR="${MUSTER_WERROR:-OFF}" >/dev/null
  local tests
  # From CTestTestfile.cmake, not `ctest --show-only`: ctest names no command for an
  # executable that is not built yet. A gtest binary's cases come from its
  # NAME[1]_include.cmake (gtest_discover_tests, tests named NAME.Suite.Case): it is
  # selected by NAME. Other tests (fuzz corpus replays) are add_test(NAME EXE) lines.
  mapfile -t tests < <(/usr/bin/python3 - "$dir" "$regex" "$exclude" <<'EOF'
import os, pathlib, re, sys
root, regex, exclude = sys.argv[1:]
names = set()
for f in pathlib.Path(root).rglob("CTestTestfile.cmake"):
    text = f.read_text()
    found = re.findall(r'add_test\(\[=\[(.*?)\]=\] "([^"]+)"', text)
    found += [(n, n) for n in re.findall(r'include\("[^"]*/([^/"]+)\[\d+\]_include\.cmake"\)', text)]
    for name, exe in found:
        if re.search(regex, name) and not re.search(exclude, name):
            names.add(os.path.basename(exe))
print("\n".join(sorted(names)))
EOF
)
  [[ -n ${tests[*]} ]] || { echo "sanitize: no unit test matches '$regex' in $dir" >&2; exit 1; }
  cmake --build "$dir" -j"$(nproc)" --target "${tests[@]}" "$@"
}

# integration DIR FILES... [pytest args]: the pytest files against the build in DIR.
integration() {
  local dir=$1
  shift
  MUSTER_BUILD_DIR="$PWD/$dir" /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@"
}

if [[ $which == address || $which == all ]]; then
  echo "== ASan+UBSan (build-asan): unit tests, integration subset"
  build build-asan address OFF . all
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:log_path=$reports/asan
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan
  export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
  ctest --test-dir build-asan --output-on-failure -j"$(nproc)"
  integration build-asan tests/integration/test_exit_codes.py \
    tests/integration/test_signals.py tests/integration/test_bad_input.py \
    -k "not real_torch" "$@"  # torch's own start-up under ASan adds ~1 min and no muster code
  unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
fi

if [[ $which == thread || $which == all ]]; then
  echo "== TSan (build-tsan): store, rendezvous (state, registry, gRPC), agents"
  tsan_tests='^(c10d|rdzv)_'
  build build-tsan thread ON "$tsan_tests" muster fake_worker c10d_store_server
  # ignore_noninstrumented_modules: races are looked for in our code only, not inside
  # Debian's uninstrumented libraries (their locks still count); see tests/tsan.supp.
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$reports/tsan"
  TSAN_OPTIONS+=":ignore_noninstrumented_modules=1:suppressions=$PWD/tests/tsan.supp"
  ctest --test-dir build-tsan --output-on-failure -j"$(nproc)" -R "$tsan_tests"
  # Not test_tls.py (its transport is the unit tests' TLS case; its mismatch cases wait out
  # timeouts), nor real torch (torch's start-up, no muster code): ~45 s on two cores.
  integration build-tsan tests/integration/test_store_robustness.py \
    tests/integration/test_multinode.py tests/integration/test_status_workers.py \
    tests/integration/test_health.py -k "not real_torch" "$@"
  unset TSAN_OPTIONS
fi
