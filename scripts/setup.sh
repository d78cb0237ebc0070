#!/usr/bin/env bash
# Installs what muster needs to build and test, from Debian only. Idempotent: packages
# already present are not touched, and apt is not even updated when nothing is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libabsl-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libgtest-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev prometheus-cpp-dev
  python3 python3-pytest python3-pytest-xdist python3-torch python3-venv python3-grpcio python3-grpc-tools python3-yaml
  clang libclang-rt-14-dev
  iproute2 util-linux procps
  etcd-server etcd-client
  openssh-server openssh-client
  # The real Prometheus server scrapes --metrics-port in tests/integration/test_metrics.py,
  # run directly with a temporary config; its system service is never started (below).
  prometheus
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) == 0 ]] || SUDO=sudo
  if [[ " ${missing[*]} " == *" openssh-server "* ]]; then
    # openssh-server is for the debug-mode test, which runs its own sshd inside a test pod.
    # The host gets no sshd from it: Debian's switch /etc/ssh/sshd_not_to_be_run keeps
    # ssh.service, ssh.socket and /etc/init.d/ssh from ever starting one (delete it to use
    # the package's sshd).
    $SUDO mkdir -p /etc/ssh
    $SUDO touch /etc/ssh/sshd_not_to_be_run
  fi
  if [[ " ${missing[*]} " == *" openssh-server "* || " ${missing[*]} " == *" prometheus "* ]]; then
    # A policy-rc.d denies starting services (sshd, prometheus) during this install.
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
      printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
      $SUDO chmod 755 /usr/sbin/policy-rc.d
      trap "$SUDO rm -f /usr/sbin/policy-rc.d" EXIT
    fi
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# kubernetes-validate (PyPI, pinned) for the manifest schema test, in a venv outside the repo.
"$(dirname "$0")/k8s_validate_venv.sh" >/dev/null
# py-spy (PyPI, pinned) for `muster stacks`' outside reads, in a venv outside the repo;
# tests/integration/test_stacks_outside.py puts it on the agents' PATH.
"$(dirname "$0")/py_spy_venv.sh" >/dev/null
