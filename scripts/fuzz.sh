#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) into build-fuzz/ and runs each for
# FUZZ_SECONDS (default 30) on its corpus in tests/fuzz/corpus/: store_protocol (c10d store
# parser), flags (`muster run` flags + environment), rendezvous (the rendezvous server's
# request handling). The targets run at the same time (each for the full FUZZ_SECONDS of
# wall time). New inputs go to a scratch copy, so the committed corpus only changes when
# someone adds a seed or a reproducer (tests/fuzz/make_seeds.py). Any crash, leak,
# sanitizer report or broken invariant fails the script; the input is kept under
# build-fuzz/artifacts/ and the log under build-fuzz/fuzz-logs/.
# 30 s is CI's share of its 25-minute budget (the committed corpus is replayed by ctest in
# every build as well); run longer by hand after touching a parser: FUZZ_SECONDS=600.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${FUZZ_SECONDS:-30}
TARGETS=(store_protocol flags rendezvous)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMUSTER_WERROR="${MUSTER_WERROR:-OFF}" \
  -DMUSTER_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${TARGETS[@]/%/_fuzz}"
artifacts=$PWD/build-fuzz/artifacts
logs=$PWD/build-fuzz/fuzz-logs
mkdir -p "$artifacts" "$logs"

fuzz_one() {
  local target=$1 scratch
  scratch=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$target/." "$scratch/"
  local status=0
  "build-fuzz/tests/${target}_fuzz" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$target-" \
    "$scratch" >"$logs/$target.log" 2>&1 || status=$?
  rm -rf "$scratch"
  return "$status"
}

echo "== fuzz ${TARGETS[*]} for ${SECONDS_PER_TARGET}s each, at the same time"
pids=()
for target in "${TARGETS[@]}"; do
  fuzz_one "$target" &
  pids+=($!)
done
failed=()
for i in "${!TARGETS[@]}"; do
  target=${TARGETS[$i]}
  if wait "${pids[$i]}"; then
    echo "$target: $(grep -E '^Done' "$logs/$target.log")," \
      "peak RSS $(awk '/stat::peak_rss_mb/ {print $2}' "$logs/$target.log") MB"
  else
    tail -n 60 "$logs/$target.log"
    echo "FAILED: $target; the input is in $artifacts/ (replay it with" \
      "build-fuzz/tests/${target}_fuzz FILE); once fixed, add it to" \
      "tests/fuzz/corpus/$target/ as regression-<what>" >&2
    failed+=("$target")
  fi
done
[[ ${#failed[@]} -eq 0 ]]
