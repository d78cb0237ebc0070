#!/usr/bin/env bash
# The GPU half of issue 17's checks, for a lent GPU machine that cannot build muster:
#
#   scripts/gpu_check.sh --pack DIR          (here) DIR/bin: muster, muster-probe and py-spy
#                                            (when scripts/py_spy_venv.sh has it), stripped;
#                                            DIR/lib: every shared library they need that
#                                            glibc does not provide (ldd); DIR/gpu_check.sh.
#                                            Must stay under 60 MiB.
#   DIR/gpu_check.sh --run DIR OUTDIR        (there: python3 = torch with CUDA + NCCL, root,
#                                            no network) four steps, each with its own
#                                            timeout (30+60+120+60+30+90 s at worst), the whole
#                                            under 7 minutes:
#     1. `muster run --nproc-per-node 1` of an NCCL all_reduce on cuda:LOCAL_RANK (world
#        size 1: NCCL refuses two ranks on one GPU); prints the result.
#     2. flight recorder: the rank spins the GPU (torch.cuda._sleep), then all_reduces with
#        a 10 s process-group timeout, so NCCL's watchdog times out and dumps; muster's root
#        cause must list the dump file, and the file must exist.
#     3. `muster stacks` (this node's agents, no --rdzv-endpoint) while the rank is blocked
#        in torch.cuda.synchronize() behind a spin: the stack must show synchronize.
#     2b. the serving agent's stored copy of the dumps (<run dir>/traces/round1/NODE/) is
#        byte-identical to each listed dump.
#     4. `muster run --warm-start` (issue 29): the rank forked from the template finds no CUDA
#        context made before it, runs an NCCL all_reduce, SIGKILLs itself; the next attempt's
#        rank (forked again) does the same and prints the time from the kill (90 s at most).
#   Without CUDA the steps run CPU stand-ins (gloo, time.sleep) and say so loudly: the
#   plumbing is checked, the GPU facts are not. Everything goes to OUTDIR (summary.txt, one
#   log per step); the exit code is the number of failed steps.
set -uo pipefail

# shellcheck source=scripts/pack_libs.sh
. "$(dirname "$0")/pack_libs.sh" || exit 2

MAX_PACK_MIB=60

pack() {
  local dir=$1 repo bin
  repo=$(cd "$(dirname "$0")/.." && pwd)
  bin=${MUSTER_BUILD_DIR:-$repo/build}/bin  # MUSTER_BUILD_DIR: another build, as the tests take it
  [ -x "$bin/muster" ] || { echo "gpu_check: $bin/muster missing: run scripts/build.sh" >&2; exit 2; }
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/lib/fallback" || exit 2
  local bins=("$bin/muster")
  if [ -x "$bin/muster-probe" ]; then
    bins+=("$bin/muster-probe")
  else
    echo "gpu_check: $bin/muster-probe not built: not packed (the steps run --probe off)" >&2
  fi
  cp "${bins[@]}" "$dir/bin/"
  local spy
  if spy=$("$repo/scripts/py_spy_venv.sh" 2>/dev/null); then
    cp "$spy" "$dir/bin/py-spy"
  else
    echo "gpu_check: py-spy not packed (scripts/py_spy_venv.sh failed)" >&2
  fi
  pack_shared_libs "$dir" "${bins[@]}" || exit 2
  strip --strip-unneeded "$dir"/bin/muster* 2>/dev/null
  cp "$0" "$dir/gpu_check.sh" && chmod +x "$dir/gpu_check.sh"
  cp "$(dirname "$0")/pack_libs.sh" "$dir/" || exit 2
  cp "$repo/scripts/gpu_check_worker.py" "$dir/"
  local mib glibc
  mib=$(du -sm "$dir" | cut -f1)
  glibc=$(objdump -T "$dir"/bin/muster* "$dir"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_2\.[0-9]*' |
    sort -V | tail -1)
  echo "gpu_check: packed $(find "$dir/lib" -name '*.so*' | wc -l) libraries, ${mib} MiB in" \
    "$dir (needs $glibc; the C++ runtime in lib/fallback needs more)"
  if [ "$mib" -ge "$MAX_PACK_MIB" ]; then
    echo "gpu_check: $dir is ${mib} MiB, over the ${MAX_PACK_MIB} MiB limit" >&2
    exit 1
  fi
}

# step NAME SECONDS CMD...: runs CMD under `timeout`, its output in $OUT/NAME.log.
step() {
  local name=$1 secs=$2
  shift 2
  echo "== $name (at most ${secs}s): $*" | tee -a "$OUT/summary.txt"
  local start=$SECONDS
  timeout -k 5 "$secs" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "   exit $rc after $((SECONDS - start))s" | tee -a "$OUT/summary.txt"
  return $rc
}

verdict() {  # verdict NAME OK(0/1) WHY
  if [ "$2" = 0 ]; then
    echo "PASS $1: $3" | tee -a "$OUT/summary.txt"
  else
    echo "FAIL $1: $3" | tee -a "$OUT/summary.txt"
    FAILED=$((FAILED + 1))
  fi
}

run() {
  local dir out
  dir=$(cd "$1" && pwd) || exit 2
  mkdir -p "$2" && out=$(cd "$2" && pwd) || exit 2
  OUT=$out
  FAILED=0
  : >"$OUT/summary.txt"
  export PATH="$dir/bin:$PATH" PYTHONUNBUFFERED=1
  local M=$dir/bin/muster W=$dir/gpu_check_worker.py PY=${PYTHON:-python3}
  if ! use_packed_libs "$dir" "$M"; then
    echo "the device's C++ runtime is too old for muster: using the packed one" |
      tee -a "$OUT/summary.txt"
  fi
  if ! "$M" --version >>"$OUT/summary.txt" 2>&1; then
    echo "FAIL: muster does not start here (ldd below)" | tee -a "$OUT/summary.txt"
    ldd "$M" >>"$OUT/summary.txt" 2>&1
    return 1
  fi
  step env 30 bash -c "uname -a; '$M' --version; nvidia-smi -L; $PY -c 'import torch; \
print(\"torch\", torch.__version__, \"cuda\", torch.cuda.is_available(), \
torch.cuda.nccl.version() if torch.cuda.is_available() else None)'"
  local cuda=0
  grep -q 'cuda True' "$OUT/env.log" && cuda=1
  if [ $cuda = 0 ]; then
    echo "SKIPPED LOUDLY: no CUDA here: CPU stand-ins (gloo, time.sleep) check the plumbing only" |
      tee -a "$OUT/summary.txt"
  fi
  export GPU_CHECK_CUDA=$cuda

  # 1. all_reduce
  step allreduce 60 "$M" run --probe off --nproc-per-node 1 --log-dir "$OUT/logs1" \
    --no-python "$PY" "$W" allreduce
  local rc=$?
  grep 'all_reduce result' "$OUT/allreduce.log" | tee -a "$OUT/summary.txt"
  grep -q 'all_reduce result 1.0' "$OUT/allreduce.log"
  verdict allreduce $(( rc != 0 || $? != 0 )) "muster run exit $rc"

  # 2. flight recorder dump on an NCCL timeout
  if [ $cuda = 0 ]; then
    echo "SKIPPED LOUDLY flight_recorder: no CUDA, so no NCCL watchdog to dump" |
      tee -a "$OUT/summary.txt"
  else
    step flight_recorder 120 "$M" run --probe off --nproc-per-node 1 --max-restarts 0 \
      --log-dir "$OUT/logs2" --no-python "$PY" "$W" timeout
    rc=$?
    local listed
    listed=$(grep -o 'flight recorder traces: [^)]*' "$OUT/flight_recorder.log" | tail -1 |
      sed 's/flight recorder traces: //; s/, / /g')
    echo "   root cause lists: ${listed:-nothing}" | tee -a "$OUT/summary.txt"
    local ok=1
    if [ -n "$listed" ]; then
      ok=0
      for f in $listed; do [ -s "$f" ] || ok=1; done
    fi
    verdict flight_recorder $(( rc == 0 || ok != 0 )) "muster run exit $rc (non-zero expected)"
    # The serving agent's copy (docs/guides/collective-traces.md: every node's dumps, one place):
    # "flight recorder traces of 1 node (N files) in HOST:DIR/" names it.
    local stored
    stored=$(grep -o 'flight recorder traces of [^)]*) in [^ ]*' "$OUT/flight_recorder.log" |
      tail -1 | sed 's/.* in [^:]*://; s/[;,.]*$//')
    echo "   stored copy: ${stored:-none named}" | tee -a "$OUT/summary.txt"
    ok=1
    if [ -n "$stored" ] && [ -d "$stored" ]; then
      find "$stored" -type f -exec ls -l {} + | tee -a "$OUT/summary.txt"
      ok=0
      for f in $listed; do
        find "$stored" -type f -name "$(basename "$f")" -exec cmp -s "$f" {} \; -print |
          grep -q . || ok=1
      done
    fi
    verdict flight_recorder_stored $ok "each dump byte-identical under the stored copy's folder"
  fi

  # 3. muster stacks on a rank blocked in torch.cuda.synchronize()
  local id=gpu-check-$$
  timeout -k 5 120 "$M" run --probe off --nproc-per-node 1 --rdzv-id "$id" \
    --log-dir "$OUT/logs3" --no-python "$PY" "$W" synchronize >"$OUT/stacks_job.log" 2>&1 &
  local job=$!
  for _ in $(seq 1 600); do
    grep -q 'blocking now' "$OUT/stacks_job.log" && break
    sleep 0.1
  done
  sleep 1  # into synchronize
  step stacks 30 "$M" stacks --rdzv-id "$id"
  rc=$?
  cat "$OUT/stacks.log" >>"$OUT/summary.txt"
  kill -TERM "$job" 2>/dev/null
  wait "$job"
  grep -q "rank 0: synchronize" "$OUT/stacks.log"
  verdict stacks $(( rc != 0 || $? != 0 )) "muster stacks exit $rc, rank 0 in synchronize"

  # 4. warm start: ranks forked from a template that imported torch and holds no CUDA context
  step warm 90 env PYTHON_EXEC="$PY" WARM_KILLED="$OUT/warm_killed" "$M" run --probe off \
    --warm-start --nproc-per-node 1 --max-restarts 1 --log-dir "$OUT/logs4" \
    --event-log "$OUT/warm_events.jsonl" "$W" warm
  rc=$?
  grep -E 'cuda initialized|all_reduce result|warm recovered|fell back|exec' "$OUT/warm.log" |
    tee -a "$OUT/summary.txt"
  local clean warm_starts
  clean=$(grep -c 'cuda initialized before the script: False' "$OUT/warm.log")
  warm_starts=$(grep -c '"start": *"warm"' "$OUT/warm_events.jsonl" 2>/dev/null)
  echo "   ranks started warm: ${warm_starts:-0} of 2; without CUDA before the script: $clean" |
    tee -a "$OUT/summary.txt"
  verdict warm $(( rc != 0 || clean != 2 || ${warm_starts:-0} != 2 )) \
    "muster run exit $rc, both attempts' ranks forked from the template without a CUDA context"
  echo "failed steps: $FAILED" | tee -a "$OUT/summary.txt"
  return $FAILED
}

case "${1:-}" in
  --pack) [ $# = 2 ] || { echo "usage: $0 --pack DIR" >&2; exit 2; }; pack "$2" ;;
  --run) [ $# = 3 ] || { echo "usage: $0 --run DIR OUTDIR" >&2; exit 2; }; run "$2" "$3" ;;
  *) echo "usage: $0 --pack DIR | --run DIR OUTDIR" >&2; exit 2 ;;
esac
