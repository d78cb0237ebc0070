#!/usr/bin/env bash
# The README's first command: set-up, a build of the muster binary alone (scripts/test.sh
# builds everything), then a local two-node job: two muster agents (as if on two machines)
# rendezvous over gRPC on 127.0.0.1, each starts two real torch workers, and the four do a
# gloo all_reduce. Node rank 0's agent serves the rendezvous and the c10d store, on the one
# port of --rdzv-endpoint. It prints the two commands it runs, to copy, and how long each
# step took. Exits with the job's exit code.
#   MUSTER_DEMO_PORT   the rendezvous port (default 29400)
set -euo pipefail
cd "$(dirname "$0")/.."
step=$SECONDS
scripts/setup.sh
setup_s=$((SECONDS - step))
step=$SECONDS
scripts/build.sh muster
echo "== set-up took ${setup_s} s, build (build/bin/muster alone) $((SECONDS - step)) s"

# A word as the shell reads it back: bare when it is plain, else in single quotes.
quote() {
  if [[ $1 =~ ^[A-Za-z0-9_./:=,+-]+$ ]]; then printf '%s' "$1"; else
    printf "'%s'" "${1//\'/\'\\\'\'}"
  fi
}
PORT=${MUSTER_DEMO_PORT:-29400}
unset MUSTER_DEMO_PORT  # the demo's own: the agents would warn about an unknown MUSTER_ name
export PYTHON_EXEC=/usr/bin/python3  # Debian's python3-torch
commands=()
for node in 0 1; do
  cmd=(build/bin/muster run --nnodes 2 --nproc-per-node 2 --node-rank "$node"
       --rdzv-endpoint "127.0.0.1:$PORT" --rdzv-id demo
       --log-line-prefix-template "[node$node rank\${rank}]:" examples/allreduce.py)
  line=""
  for word in "${cmd[@]}"; do line+=" $(quote "$word")"; done
  commands+=("${line# }")
done
# Printed whole before either agent starts, so no agent's output splits a line.
echo "== two agents, as on two machines (both on 127.0.0.1 here); to run them yourself:"
echo "\$ export PYTHON_EXEC=$PYTHON_EXEC"
for line in "${commands[@]}"; do echo "\$ $line &"; done
step=$SECONDS
pids=()
for line in "${commands[@]}"; do
  eval "$line" &  # the very line printed above
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
echo "== the job took $((SECONDS - step)) s and exited $rc"
exit "$rc"
