#!/usr/bin/env bash
# The README's main command: set-up, build, then a local two-node job: two muster agents
# (as if on two machines) rendezvous over gRPC on 127.0.0.1, each starts two real torch
# workers, and the four do a gloo all_reduce. Node 0's agent hosts the rendezvous and the
# c10d store. Exits with the job's exit code.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
PORT=${MUSTER_DEMO_PORT:-29400}
export PYTHON_EXEC=/usr/bin/python3
echo "== two agents: muster run --nnodes 2 --nproc-per-node 2 --rdzv-endpoint 127.0.0.1:$PORT examples/allreduce.py"
pids=()
for node in 0 1; do
  build/bin/muster run --nnodes 2 --nproc-per-node 2 --node-rank "$node" \
    --rdzv-endpoint "127.0.0.1:$PORT" --rdzv-id demo \
    --log-line-prefix-template "[node$node rank\${rank}]:" examples/allreduce.py &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
exit "$rc"
