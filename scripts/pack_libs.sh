# shellcheck shell=bash
# Sourced by scripts/gpu_check.sh and scripts/device_bench.sh, which pack muster's binaries
# for a lent machine that cannot build them, and copied into their pack beside them.

# pack_shared_libs DIR FILE...: the shared libraries FILEs need beyond glibc's into DIR/lib,
# stripped. glibc's own are the device's (a copy would not match its ld.so); the C++
# runtime needs this glibc's version (2.36 on Debian 12), so it goes to DIR/lib/fallback,
# used only where the device's own runtime is too old (use_packed_libs).
pack_shared_libs() {
  local dir=$1
  shift
  mkdir -p "$dir/lib/fallback" || return 2
  ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux[^/]*)\.so' |
    while read -r so; do cp -L "$so" "$dir/lib/"; done
  mv "$dir"/lib/libstdc++.so.* "$dir"/lib/libgcc_s.so.* "$dir/lib/fallback/" 2>/dev/null
  strip --strip-unneeded "$dir"/lib/*.so* "$dir"/lib/fallback/*.so* 2>/dev/null
  return 0
}

# use_packed_libs DIR EXE: LD_LIBRARY_PATH gets DIR/lib, and DIR/lib/fallback as well when
# EXE (--version) does not start with the device's C++ runtime; 1 in that case, else 0.
use_packed_libs() {
  local dir=$1 exe=$2
  export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  "$exe" --version >/dev/null 2>&1 && return 0
  export LD_LIBRARY_PATH="$dir/lib:$dir/lib/fallback${LD_LIBRARY_PATH#"$dir/lib"}"
  return 1
}
