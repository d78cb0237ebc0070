#!/usr/bin/env bash
# Builds the muster container image from ./Dockerfile with buildah (no Docker daemon, no
# registry): a minbase debootstrap of Debian bookworm becomes the local base image, the
# Dockerfile is built on it, and the image's muster is run: `muster --version` and a
# standalone two-worker job, started as muster and as torchrun (the image's alias).
#
#   scripts/image.sh            # everything; prints a timing per step
#
# Environment:
#   MUSTER_CACHE           cache directory (default ~/.cache/muster); the rootfs is kept in
#                          $MUSTER_CACHE/bookworm-rootfs and reused (delete it to refresh)
#   MUSTER_IMAGE           image name (default localhost/muster:dev)
#   MUSTER_BASE_IMAGE      base image name (default localhost/muster-base:bookworm)
#   DEBIAN_MIRROR          default http://deb.debian.org/debian
#   MUSTER_STORAGE_DRIVER  buildah storage driver (default: buildah's; vfs when overlay fails)
#
# Needs root (debootstrap, buildah's chroot isolation); installs buildah and debootstrap
# from Debian when missing. Idempotent: the rootfs and base image are made once, and
# buildah's layer cache makes an unchanged rebuild take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${MUSTER_CACHE:-$HOME/.cache/muster}
ROOTFS=$CACHE/bookworm-rootfs
BASE=${MUSTER_BASE_IMAGE:-localhost/muster-base:bookworm}
IMAGE=${MUSTER_IMAGE:-localhost/muster:dev}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

die() { echo "image.sh: ERROR: $*" >&2; exit 1; }
log() { echo "image.sh: $*"; }
T0=$SECONDS
step_start=$SECONDS
timing() { log "$1 took $((SECONDS - step_start)) s"; step_start=$SECONDS; }

[[ -f Dockerfile ]] || die "no Dockerfile in $(pwd)"
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || die "needs root (debootstrap, buildah chroot isolation); no sudo"
  exec sudo --preserve-env=MUSTER_CACHE,MUSTER_IMAGE,MUSTER_BASE_IMAGE,DEBIAN_MIRROR,MUSTER_STORAGE_DRIVER \
    MUSTER_CACHE="$CACHE" "$0" "$@"
fi

# --- 1. tools ------------------------------------------------------------------------
missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if ((${#missing[@]})); then
  command -v apt-get >/dev/null || die "${missing[*]} missing and no apt-get to install them"
  log "installing ${missing[*]}"
  apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || die "could not install ${missing[*]}"
fi
log "$(buildah --version)"

BUILDAH=(buildah)
if [[ -n ${MUSTER_STORAGE_DRIVER:-} ]]; then
  BUILDAH+=(--storage-driver "$MUSTER_STORAGE_DRIVER")
elif ! info_err=$(buildah info 2>&1 >/dev/null); then
  log "buildah's default storage does not work here ($info_err); using vfs"
  BUILDAH+=(--storage-driver vfs)
fi
"${BUILDAH[@]}" info >/dev/null 2>&1 || die "buildah cannot open its storage: $("${BUILDAH[@]}" info 2>&1 | tail -1)"
log "storage driver: $("${BUILDAH[@]}" info --format '{{.store.GraphDriverName}}' 2>/dev/null || echo '?')"
timing "tools"

# --- 2. debootstrapped rootfs (cached) -----------------------------------------------
if [[ ! -f $ROOTFS/.muster-complete ]]; then
  log "debootstrap --variant=minbase bookworm into $ROOTFS (once; about a minute)"
  rm -rf "$ROOTFS.tmp"
  mkdir -p "$CACHE"
  debootstrap --variant=minbase bookworm "$ROOTFS.tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log" >&2; die "debootstrap failed (log: $CACHE/debootstrap.log)"; }
  cat >"$ROOTFS.tmp/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  # What the official debian images leave out: package caches, lists, device nodes.
  rm -rf "$ROOTFS.tmp"/var/cache/apt/archives/*.deb "$ROOTFS.tmp"/var/lib/apt/lists/* \
         "$ROOTFS.tmp"/dev/* "$ROOTFS.tmp"/etc/hostname
  date -u +%Y%m%dT%H%M%SZ >"$ROOTFS.tmp/.muster-complete"
  rm -rf "$ROOTFS"
  mv "$ROOTFS.tmp" "$ROOTFS"
  timing "debootstrap"
else
  log "reusing $ROOTFS (made $(cat "$ROOTFS/.muster-complete"))"
fi
STAMP=$(cat "$ROOTFS/.muster-complete")

# --- 3. base image from the rootfs ---------------------------------------------------
have_stamp=$("${BUILDAH[@]}" inspect --type image --format '{{index .ImageAnnotations "muster.rootfs"}}' \
  "$BASE" 2>/dev/null || true)
if [[ $have_stamp != "$STAMP" ]]; then
  log "importing $ROOTFS as $BASE"
  ctr=$("${BUILDAH[@]}" from scratch)
  trap '"${BUILDAH[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
  mnt=$("${BUILDAH[@]}" mount "$ctr")
  tar -C "$ROOTFS" --numeric-owner --exclude=./.muster-complete -cf - . | tar -C "$mnt" --numeric-owner -xpf - \
    || die "copying the rootfs into the base container failed"
  "${BUILDAH[@]}" umount "$ctr" >/dev/null
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd /bin/bash --annotation "muster.rootfs=$STAMP" "$ctr"
  "${BUILDAH[@]}" commit --quiet --rm "$ctr" "$BASE" >/dev/null || die "buildah commit $BASE failed"
  trap - EXIT
  timing "base image import"
else
  log "reusing base image $BASE"
fi

# --- 4. the Dockerfile -----------------------------------------------------------------
log "building $IMAGE from Dockerfile (BASE_IMAGE=$BASE; compiles muster inside)"
"${BUILDAH[@]}" bud --isolation chroot --layers --pull=never \
  --build-arg "BASE_IMAGE=$BASE" -t "$IMAGE" -f Dockerfile . \
  || die "buildah bud failed (see the output above)"
size=$("${BUILDAH[@]}" images --noheading --format '{{.Size}}' "$IMAGE" 2>/dev/null | head -1 || true)
log "built $IMAGE${size:+ ($size)}"
timing "image build"

# --- 5. run the image's muster -------------------------------------------------------
entry=$("${BUILDAH[@]}" inspect --type image --format '{{.OCIv1.Config.Entrypoint}}' "$IMAGE")
[[ $entry == "[muster]" ]] || die "image entrypoint is $entry, expected [muster]"
ctr=$("${BUILDAH[@]}" from --pull=never "$IMAGE")
trap '"${BUILDAH[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
run() { "${BUILDAH[@]}" run --isolation chroot "$ctr" -- "$@"; }

version=$(run muster --version) || die "muster --version failed in the image"
log "version: $version"
[[ $version == "muster "* ]] || die "unexpected version line: $version"
if run sh -c 'command -v muster-probe' >/dev/null 2>&1; then
  log "muster-probe: present"
else
  log "muster-probe: not in this tree's build (not installed)"
fi

job=$(run muster run --standalone --nproc-per-node 2 --no-python /bin/sh -c 'echo rank $RANK of $WORLD_SIZE' 2>&1) \
  || { echo "$job" >&2; die "the standalone job failed in the image"; }
echo "$job" | sed 's/^/  | /'
for r in 0 1; do
  grep -q "rank $r of 2" <<<"$job" || die "the standalone job's output lacks 'rank $r of 2'"
done
# The image's torchrun is muster (a link): a torchrun command line runs the same job.
alias_job=$(run torchrun --standalone --nproc_per_node=2 --no-python /bin/sh -c 'echo rank $RANK of $WORLD_SIZE' 2>&1) \
  || { echo "$alias_job" >&2; die "torchrun (muster by that name) failed in the image"; }
for r in 0 1; do
  grep -q "rank $r of 2" <<<"$alias_job" || die "torchrun's job output lacks 'rank $r of 2'"
done
log "torchrun: $(run readlink /usr/local/bin/torchrun) (muster run by torchrun's name)"
timing "run"
log "OK: $IMAGE runs '$version' and a standalone 2-worker job (total $((SECONDS - T0)) s)"
