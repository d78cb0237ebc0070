#!/bin/bash
# Runs every benchmark in sequence (the box has 2 cores: never in parallel) and writes the
# raw outputs to bench/out/<name>.md. Usage: bench/run_all.sh [--quick]
# Needs build/bin/muster, build/tests/fake_worker and build/tests/c10d_store_server
# (cmake --build build), cc, c++ (storeload.cc), python3-grpcio + python3-grpc-tools (B2), taskset,
# /usr/bin/python3 with torch 1.13 for the torchrun rows; TORCH2_PYTHON=/path/to/python adds
# torchrun 2.x rows.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p out
PY=/usr/bin/python3
if [[ "${1:-}" == "--quick" ]]; then
  B1="--runs 20 --torch-runs 2 --slow-runs 1"; B5="--runs 1 --restarts 30 --torch-restarts 5 --slow-restarts 1"
  B6="--duration 5"; B7="--runs 3 --torch-runs 1"; B8="--runs 20 --grace-runs 3 --torch-runs 2 --slow-runs 1 --torch-grace-runs 0"
  B2="--ms 1,16,256 --runs 1 --hb-secs 5"; B2T="--ms 1,16 --runs 1"; B3="--clients 1,256 --measure 0.3"; B4="--ns 64,1024 --runs 1 --rounds 3"
  B5M="--runs 5 --torch-runs 1"
else
  B1=""; B5=""; B6=""; B7=""; B8=""; B2=""; B2T=""; B3=""; B4=""; B5M=""
fi
$PY b1_cold_start.py $B1 | tee out/b1_cold_start.md
$PY b5_respawn.py $B5 | tee out/b5_respawn.md
$PY b6_idle.py $B6 | tee out/b6_idle.md
$PY b7_spawn_rate.py $B7 | tee out/b7_spawn_rate.md
$PY b8_shutdown.py $B8 | tee out/b8_shutdown.md
$PY b2_rendezvous.py $B2 | tee out/b2_rendezvous.md
$PY b2_torch_baseline.py $B2T | tee out/b2_torch_baseline.md
$PY b3_store.py $B3 | tee out/b3_store.md
$PY b4_storm.py $B4 | tee out/b4_storm.md
$PY b5_multinode.py $B5M | tee out/b5_multinode.md
