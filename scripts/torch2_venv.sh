#!/usr/bin/env bash
# Creates (once) a test-only venv with torch 2.x from PyPI, outside the repo, and prints the
# path of a python wrapper that runs it. Used for the modern-protocol and mixed-version tests.
#
# PyPI's torch 2.15 wheel is built against CUDA 13 and would pull ~3 GB of nvidia-* wheels.
# We only need it on the CPU (gloo), so we install it --no-deps, add its pure-Python deps,
# take the CUDA 13 runtime libraries the machine image already has (/usr/local/cuda), add
# the four wheels that image lacks (NCCL 2.30, cuSPARSELt, NVSHMEM, cuFile), and point
# libcuda.so.1 at the toolkit's stub: torch imports, torch.cuda reports no GPU.
#
# Cache: ${MUSTER_CACHE:-~/.cache/muster}. Output: the wrapper's path on stdout (and exit 0),
# or a message on stderr and exit 1 when torch 2.x cannot be had here.
set -euo pipefail
TORCH_VERSION=${MUSTER_TORCH2_VERSION:-2.15.0}
CACHE=${MUSTER_CACHE:-$HOME/.cache/muster}
VENV=$CACHE/torch2-venv
WRAPPER=$CACHE/torch2-python
mkdir -p "$CACHE"
exec 9>"$CACHE/.torch2.lock"
flock -w 1200 9

if [[ -x $WRAPPER ]] && "$WRAPPER" -c 'import torch.distributed as d; assert d.is_gloo_available()' \
    >/dev/null 2>&1; then
  echo "$WRAPPER"
  exit 0
fi

CUDA_LIB=/usr/local/cuda/lib64
if [[ ! -e $CUDA_LIB/libcudart.so.13 || ! -e $CUDA_LIB/stubs/libcuda.so ]]; then
  echo "torch2_venv: no CUDA 13 runtime under $CUDA_LIB; cannot load PyPI's torch $TORCH_VERSION" >&2
  exit 1
fi
echo "torch2_venv: creating $VENV with torch $TORCH_VERSION (one time, ~1 GB download)" >&2
rm -rf "$VENV"
/usr/bin/python3 -m venv "$VENV"
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
"${PIP[@]}" --no-deps "torch==$TORCH_VERSION" nvidia-nccl-cu13==2.30.7 \
  nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2 "nvidia-cufile==1.17.1.22.*" >&2
"${PIP[@]}" filelock typing-extensions sympy networkx jinja2 fsspec numpy >&2
mkdir -p "$CACHE/driver-stub"
ln -sf "$CUDA_LIB/stubs/libcuda.so" "$CACHE/driver-stub/libcuda.so.1"
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
LIBS=$(find "$SITE/nvidia" -name lib -type d | sort | tr '\n' ':')$CUDA_LIB:$CACHE/driver-stub
cat >"$WRAPPER" <<WRAP
#!/bin/sh
# torch $TORCH_VERSION (PyPI) on the CPU; written by muster's scripts/torch2_venv.sh.
LD_LIBRARY_PATH="$LIBS\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$VENV/bin/python" "\$@"
WRAP
chmod +x "$WRAPPER"
"$WRAPPER" -W ignore -c 'import torch.distributed as d; assert d.is_gloo_available()' >&2
echo "$WRAPPER"
