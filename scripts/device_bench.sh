#!/usr/bin/env bash
# B2 etcd (bench/b2_etcd.py) on a lent machine with more cores, which cannot build muster and
# has no pytest, no etcd and no network:
#
#   scripts/device_bench.sh --pack DIR        (here) DIR/build/bin: muster, rdzv_agents,
#                                             etcd_light_agents, rdzv_h2load (stripped);
#                                             DIR/lib: their shared libraries beyond glibc;
#                                             DIR/bin: this machine's etcd and etcdctl (xz);
#                                             DIR/py/pytest.py: a stand-in for the imports of
#                                             tests/integration's helpers. Under 60 MiB.
#   DIR/device_bench.sh --run DIR OUTDIR MS FAILOVER_MS RUNS
#                                             (there, in the repository's root) the bench
#                                             with those arguments; OUTDIR: env.txt, b2.txt
#                                             (the tables), b2.err (one JSON line per run).
#
# bench/RESULTS.md says which rows came from it (nproc 16, an H100 machine's CPUs).
set -uo pipefail

# shellcheck source=scripts/pack_libs.sh
. "$(dirname "$0")/pack_libs.sh" || exit 2

MAX_PACK_MIB=60

pack() {
  local dir=$1 repo bin
  repo=$(cd "$(dirname "$0")/.." && pwd)
  bin=${MUSTER_BUILD_DIR:-$repo/build}/bin
  local bins=("$bin/muster" "$bin/rdzv_agents" "$bin/etcd_light_agents" "$bin/rdzv_h2load")
  for b in "${bins[@]}"; do
    [ -x "$b" ] || {
      echo "device_bench: $b missing: ninja -C build muster rdzv_agents etcd_light_agents rdzv_h2load" >&2
      exit 2
    }
  done
  local etcd etcdctl
  etcd=$(command -v etcd) && etcdctl=$(command -v etcdctl) || {
    echo "device_bench: etcd or etcdctl not on PATH: scripts/setup.sh installs etcd-server" >&2
    exit 2
  }
  rm -rf "$dir" && mkdir -p "$dir/build/bin" "$dir/bin" "$dir/py" || exit 2
  cp "${bins[@]}" "$dir/build/bin/" || exit 2
  pack_shared_libs "$dir" "${bins[@]}" || exit 2
  strip --strip-unneeded "$dir"/build/bin/* 2>/dev/null
  xz -T2 -6 -c "$etcd" >"$dir/bin/etcd.xz" && xz -T2 -6 -c "$etcdctl" >"$dir/bin/etcdctl.xz" || exit 2
  cat >"$dir/py/pytest.py" <<'EOF'
"""A stand-in for pytest: bench/b2_etcd.py imports tests/integration helpers that import it."""


class _Any:
    def __call__(self, *a, **k):
        return a[0] if len(a) == 1 and callable(a[0]) and not k else (lambda f: f)

    def __getattr__(self, name):
        return _Any()


def __getattr__(name):
    return _Any()
EOF
  cp "$0" "$dir/device_bench.sh" && chmod +x "$dir/device_bench.sh"
  cp "$(dirname "$0")/pack_libs.sh" "$dir/" || exit 2
  local mib
  mib=$(du -sm "$dir" | cut -f1)
  echo "device_bench: ${mib} MiB in $dir"
  if [ "$mib" -ge "$MAX_PACK_MIB" ]; then
    echo "device_bench: $dir is ${mib} MiB, over the ${MAX_PACK_MIB} MiB limit" >&2
    exit 1
  fi
}

run() {
  local dir out=$2 ms=$3 fo=$4 runs=$5
  dir=$(cd "$1" && pwd) || exit 2
  mkdir -p "$out" /tmp/device_bench_bin || exit 2
  for b in etcd etcdctl; do
    xz -dc "$dir/bin/$b.xz" >"/tmp/device_bench_bin/$b" && chmod +x "/tmp/device_bench_bin/$b" || exit 2
  done
  export PYTHONPATH=$dir/py PATH=/tmp/device_bench_bin:$PATH MUSTER_BUILD_DIR=$dir/build
  use_packed_libs "$dir" "$dir/build/bin/muster"
  ulimit -n "$(ulimit -Hn)" 2>/dev/null
  { nproc; uptime; ulimit -n; python3 --version; etcd --version | head -1; } >"$out/env.txt" 2>&1
  timeout 540 python3 bench/b2_etcd.py --ms "$ms" --runs "$runs" --failover-ms "$fo" \
    --failover-runs 2 >"$out/b2.txt" 2>"$out/b2.err"
  local rc=$?
  echo "rc=$rc" >>"$out/b2.txt"
  cat "$out/env.txt" "$out/b2.txt"
  return $rc
}

case "${1:-}" in
  --pack) [ $# -eq 2 ] || { echo "usage: $0 --pack DIR" >&2; exit 2; }; pack "$2" ;;
  --run) [ $# -eq 6 ] || { echo "usage: $0 --run DIR OUTDIR MS FAILOVER_MS RUNS" >&2; exit 2; }
    run "$2" "$3" "$4" "$5" "$6" ;;
  *) echo "usage: $0 --pack DIR | --run DIR OUTDIR MS FAILOVER_MS RUNS" >&2; exit 2 ;;
esac
