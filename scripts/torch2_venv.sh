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
# The venv also has DeepSpeed and HF Accelerate (for the DeepSpeed/Accelerate tests), pinned,
# installed --no-deps with their runtime dependencies listed here, pinned (a resolver run
# would see torch's nvidia-* requirements and fetch them). DeepSpeed is an sdist, built here
# against the venv's torch with DS_BUILD_OPS=0 (no CUDA op is built) except its CPU
# shared-memory comm op (DS_BUILD_SHM_COMM=1): with no GPU, DeepSpeed picks its CPU
# accelerator by itself (DS_ACCELERATOR=cpu is not needed) and that accelerator needs this
# op in every deepspeed.init_distributed(); not built in advance, each worker would JIT-compile
# it there (~1 min of CPU, 4.5 min on a busy 2-core machine). Cost: ~14 MB download plus
# that one compile, one time. A cached venv without them gets them on the next run. If they
# cannot be installed (PyPI unreachable) torch still works: the script warns on stderr, exits
# 0, and the DeepSpeed/Accelerate tests skip naming the reason.
#
# Cache: ${MUSTER_CACHE:-~/.cache/muster}. Output: the wrapper's path on stdout (and exit 0),
# or a message on stderr and exit 1 when torch 2.x cannot be had here.
set -euo pipefail
TORCH_VERSION=${MUSTER_TORCH2_VERSION:-2.15.0}
DEEPSPEED_VERSION=0.19.8
ACCELERATE_VERSION=1.15.0
# Their runtime requirements (DeepSpeed: einops hjson msgpack ninja packaging psutil py-cpuinfo
# pydantic tqdm; Accelerate: psutil pyyaml huggingface_hub safetensors), resolved once by pip;
# and `wheel`, which the venv's setuptools needs to build DeepSpeed's wheel.
EXTRA_DEPS=(einops==0.8.2 hjson==3.1.0 msgpack==1.2.4 ninja==1.13.2 packaging==26.3
  psutil==7.2.2 py-cpuinfo==9.0.0 pydantic==2.14.3 pydantic_core==2.50.4 annotated-types==0.8.0
  typing-inspection==0.4.5 tqdm==4.70.1 PyYAML==6.0.3 safetensors==0.8.0 huggingface_hub==2.4.0
  hf-xet==1.8.0 click==8.5.1 httpx2==2.16.2 httpcore2==2.16.2 anyio==4.16.0 idna==3.20
  truststore==0.10.5 h11==0.16.0 wheel==0.48.0)
CACHE=${MUSTER_CACHE:-$HOME/.cache/muster}
VENV=$CACHE/torch2-venv
WRAPPER=$CACHE/torch2-python
mkdir -p "$CACHE"
exec 9>"$CACHE/.torch2.lock"
flock -w 1200 9

# Both at their pinned versions, DeepSpeed with its CPU shared-memory op built in.
have_extras() {
  "$VENV/bin/python" -c "from importlib.metadata import files, version as v
assert v('deepspeed') == '$DEEPSPEED_VERSION' and v('accelerate') == '$ACCELERATE_VERSION'
assert any('deepspeed_shm_comm_op' in str(f) for f in files('deepspeed'))" >/dev/null 2>&1
}

# Adds DeepSpeed and Accelerate; never fails the script (torch alone is still useful).
install_extras() {
  echo "torch2_venv: adding deepspeed $DEEPSPEED_VERSION and accelerate $ACCELERATE_VERSION" \
    "to $VENV (one time: ~14 MB download, then DeepSpeed's CPU op compiles, ~1-2 min)" >&2
  local log start=$SECONDS
  log=$(mktemp)
  # 1. Wheels only. `python -m pip`: bin/pip's shebang names the venv's original path.
  # 2. DeepSpeed's sdist, built against the venv's torch (no build isolation; through the
  #    wrapper, which finds torch's libraries), by ninja on the venv's PATH. No pip cache: a
  #    cached wheel of the same version may have been built with other DS_BUILD_* settings.
  if "$VENV/bin/python" -m pip install -q --disable-pip-version-check --timeout 30 --retries 2 \
      --no-deps "accelerate==$ACCELERATE_VERSION" "${EXTRA_DEPS[@]}" >"$log" 2>&1 &&
    PATH="$VENV/bin:$PATH" DS_BUILD_OPS=0 DS_BUILD_SHM_COMM=1 DS_ENABLE_NINJA=1 \
      "$WRAPPER" -m pip install -q --disable-pip-version-check --timeout 30 --retries 2 \
      --no-deps --no-build-isolation --no-cache-dir --force-reinstall \
      "deepspeed==$DEEPSPEED_VERSION" >>"$log" 2>&1 &&
    have_extras; then
    echo "torch2_venv: deepspeed and accelerate installed in $((SECONDS - start)) s" >&2
  else
    echo "torch2_venv: WARNING: could not install deepspeed $DEEPSPEED_VERSION / accelerate" \
      "$ACCELERATE_VERSION (the DeepSpeed and Accelerate tests will skip):" \
      "$(tail -c 1500 "$log")" >&2
  fi
  rm -f "$log"
}

if [[ -x $WRAPPER ]] && "$WRAPPER" -c 'import torch.distributed as d; assert d.is_gloo_available()' \
    >/dev/null 2>&1; then
  have_extras || install_extras
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
install_extras
echo "$WRAPPER"
