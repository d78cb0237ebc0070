#!/usr/bin/env bash
# The README's main command: set-up, build, then a local job with real torch workers doing a
# gloo all_reduce under muster, the way `torchrun --standalone` would run it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
echo "== muster run --standalone --nproc-per-node 4 examples/allreduce.py"
PYTHON_EXEC=/usr/bin/python3 exec build/bin/muster run --standalone --nproc-per-node 4 \
  examples/allreduce.py
