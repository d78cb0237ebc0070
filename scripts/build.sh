#!/usr/bin/env bash
# Configures and builds muster into build/ (binaries in build/bin, tests in build/tests).
#   scripts/build.sh [-DVAR=VALUE...] [TARGET...]
# -D words go to CMake's configure step; TARGETs (e.g. muster) are built alone, with only
# what they need; with none, everything is built: binaries, unit tests, fuzz replays and
# bench tools (scripts/test.sh). scripts/demo.sh builds the muster binary alone.
# MUSTER_WERROR=ON makes warnings errors (scripts/test.sh sets it; off for a user's build).
set -euo pipefail
cd "$(dirname "$0")/.."
configure=() targets=()
for word in "$@"; do
  if [[ $word == -D* ]]; then configure+=("$word"); else targets+=(--target "$word"); fi
done
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMUSTER_WERROR="${MUSTER_WERROR:-OFF}" "${configure[@]}" >/dev/null
cmake --build build -j"$(nproc)" "${targets[@]}"
