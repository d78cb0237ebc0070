#!/usr/bin/env bash
# Another etcd build for the etcd backend's tests and bench, beside Debian 12's 3.4.23:
#
#   scripts/fetch_etcd.sh [SUITE] [DIR]    SUITE: a Debian suite (default trixie: etcd 3.5);
#                                          DIR: where to unpack (default ~/.cache/muster/etcd-SUITE)
#
# Prints the path of its etcd binary, for MUSTER_ETCD (tests/integration/etcd_cluster.py):
#   MUSTER_ETCD=$(scripts/fetch_etcd.sh) /usr/bin/python3 bench/b2_etcd.py --ms 1024,4096
# Nothing is installed: the package is unpacked into DIR (dpkg-deb -x).
set -euo pipefail

suite=${1:-trixie}
dir=${2:-${XDG_CACHE_HOME:-$HOME/.cache}/muster/etcd-$suite}
mirror=http://deb.debian.org/debian
if [ -x "$dir/usr/bin/etcd" ]; then
  echo "$dir/usr/bin/etcd"
  exit 0
fi
file=$(curl -fsS --max-time 120 "$mirror/dists/$suite/main/binary-amd64/Packages.xz" | xz -dc |
  awk '/^Package: etcd-server$/ {p = 1} p && !done && /^Filename:/ {print $2; done = 1}') || true
if [ -z "$file" ]; then
  echo "fetch_etcd: no etcd-server package in Debian $suite at $mirror (a suite name such as trixie?)" >&2
  exit 2
fi
mkdir -p "$dir"
curl -fsS --max-time 300 -o "$dir/etcd-server.deb" "$mirror/$file"
dpkg-deb -x "$dir/etcd-server.deb" "$dir"
rm -f "$dir/etcd-server.deb"
"$dir/usr/bin/etcd" --version | head -1 >&2
echo "$dir/usr/bin/etcd"
