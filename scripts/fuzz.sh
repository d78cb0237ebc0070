#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) into build-fuzz/ and runs each for
# FUZZ_SECONDS (default 60) on its corpus in tests/fuzz/corpus/. New inputs go to a
# scratch copy, so the committed corpus only changes when someone adds a reproducer.
# Any crash, leak or sanitizer report fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMUSTER_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target store_protocol_fuzz
for target in store_protocol; do
  scratch=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$target/." "$scratch/"
  echo "== fuzz $target for ${SECONDS_PER_TARGET}s"
  "build-fuzz/tests/${target}_fuzz" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 "$scratch" 2>&1 | tail -n 12
  rm -rf "$scratch"
done
