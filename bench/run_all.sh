#!/bin/bash
# Runs the benchmarks one after another (the box has 2 cores: never in parallel) and
# regenerates the scoreboard in bench/RESULTS.md (bench/scoreboard.py).
#
# Usage: bench/run_all.sh [--quick] [--out FILE] [NAME ...]
#   NAME      b1 b5 b6 b7 b8 b2 b2t b3 b4 b5m b10 b17 (default: all of them, in this order)
#   --quick   few samples per configuration (minutes instead of hours); the scoreboard then
#             goes to bench/out/<stamp>/RESULTS.md, so quick numbers never replace the
#             committed ones (unless --out says otherwise)
#   --out     where to write the scoreboard (default bench/RESULTS.md for a full run)
#
# Each driver writes its raw output (bench/out/<stamp>/NAME.md) and its scoreboard rows
# (NAME.json, --summary-json); the rows replace the scoreboard rows of the same name, with
# this checkout's commit (git rev-parse --short HEAD), the date and the exact command. The raw
# outputs are gathered into bench/notes/<stamp>-run-all.md (a quick run: into
# bench/out/<stamp>/run-all.md), which the new rows link to. Rows of benchmarks not run keep
# their old numbers, date and commit.
#
# Needs build/bin/muster, build/bin/rdzv_h2load, build/tests/fake_worker and
# build/tests/c10d_store_server (scripts/build.sh), cc and c++, taskset, /usr/bin/python3 with
# torch 1.13 (torchrun rows) and grpcio + grpc_tools (b10); TORCH2_PYTHON=/path/to/python
# (or scripts/torch2_venv.sh) adds the torch 2.x rows; MUSTER_BUILD_DIR picks another build.
set -euo pipefail
cd "$(dirname "$0")"
PY=/usr/bin/python3
ALL=(b1 b5 b6 b7 b8 b2 b2t b3 b4 b5m b10 b17)
declare -A SCRIPT=([b1]=b1_cold_start.py [b5]=b5_respawn.py [b6]=b6_idle.py
  [b7]=b7_spawn_rate.py [b8]=b8_shutdown.py [b2]=b2_rendezvous.py [b2t]=b2_torch_baseline.py
  [b3]=b3_store.py [b4]=b4_storm.py [b5m]=b5_multinode.py [b10]=b10_status.py [b17]=b17_warm_start.py)
declare -A QUICK=(
  [b1]="--runs 20 --torch-runs 2 --slow-runs 1"
  [b5]="--runs 1 --restarts 30 --torch-restarts 5 --slow-restarts 1"
  [b6]="--duration 5"
  [b7]="--runs 3 --torch-runs 1"
  [b8]="--runs 20 --grace-runs 3 --torch-runs 2 --slow-runs 1 --torch-grace-runs 0"
  [b2]="--ms 1,16,256 --runs 1 --hb-secs 5"
  [b2t]="--ms 1,16 --runs 1"
  [b3]="--clients 1,256 --measure 0.3"
  [b4]="--ns 64,1024 --runs 1 --rounds 3"
  [b5m]="--runs 5 --torch-runs 1"
  [b10]="--ms 64 --locals 1 --samples 30"
  [b17]="--runs 1 --torch 2")

quick=0
out=""
names=()
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --out) out="$2"; shift ;;
    -h | --help) sed -n '2,/^set /p' "$0" | sed '$d'; exit 0 ;;
    *) names+=("$1") ;;
  esac
  shift
done
((${#names[@]})) || names=("${ALL[@]}")
for n in "${names[@]}"; do
  [[ -n "${SCRIPT[$n]:-}" ]] || { echo "run_all.sh: unknown benchmark '$n' (one of: ${ALL[*]})" >&2; exit 2; }
done

stamp=$(date -u +%Y-%m-%d-%H%M)
dir=out/$stamp
mkdir -p "$dir"
jsons=()
for n in "${names[@]}"; do
  args=""
  ((quick)) && args=${QUICK[$n]}
  # shellcheck disable=SC2086  # $args is a list of flags
  if ! $PY "${SCRIPT[$n]}" $args --summary-json "$dir/$n.json" | tee "$dir/$n.md"; then
    echo "run_all.sh: ${SCRIPT[$n]} failed; its rows stay as they were" >&2
  fi
  [[ -s "$dir/$n.json" ]] && jsons+=("$dir/$n.json")
done
((${#jsons[@]})) || { echo "run_all.sh: no benchmark produced rows" >&2; exit 1; }
if ((quick)); then
  out=${out:-$dir/RESULTS.md}
  note=$dir/run-all.md
else
  out=${out:-RESULTS.md}
  note=notes/$stamp-run-all.md
fi
$PY scoreboard.py --out "$out" --note "$note" "${jsons[@]}"
