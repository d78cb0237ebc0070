# muster: a node agent for distributed PyTorch training (replaces torchrun).
#
# Two stages on Debian bookworm: `build` compiles muster (and muster-probe when the tree
# has it) with Debian's own gRPC/protobuf/abseil; the runtime stage holds only the shared
# libraries those binaries link (checked with ldd) and the binaries in /usr/local/bin.
#
#   scripts/image.sh                                   # buildah, debootstrapped base, no daemon
#   docker build -t muster .                           # or any OCI builder, from debian:bookworm
#   docker run --rm muster run --standalone --nproc-per-node 2 --no-python /bin/sh -c 'echo $RANK'
#   docker run --rm --entrypoint torchrun muster --standalone --nproc_per_node=2 ...  # muster too
#
# Training images: COPY --from=muster /usr/local/bin/muster* /usr/local/bin/ into an image
# that has python3 and torch, then run `muster run ... train.py` (examples/k8s/); copy
# /usr/local/bin/torchrun too for scripts that call torchrun (it replaces torch's).
ARG BASE_IMAGE=debian:bookworm

FROM ${BASE_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
# scripts/setup.sh's list minus what only tests, fuzzing and the demo need
# (libgtest-dev, python3-*, clang, libclang-rt-14-dev, iproute2, util-linux, procps).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libabsl-dev libspdlog-dev libfmt-dev nlohmann-json3-dev \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev prometheus-cpp-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The binaries alone (tests and the bench load generators off), installed stripped (the
# runtime image carries no debug info) by the project's install rules: muster, muster-probe
# and torchrun, a link to muster (MUSTER_INSTALL_TORCHRUN: muster started as torchrun is
# `muster run`, so an image's scripts that call torchrun run muster). The build tree is
# removed so the cached build layer stays small.
RUN rm -rf build \
 && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMUSTER_BUILD_TESTS=OFF \
      -DMUSTER_BUILD_BENCH=OFF -DMUSTER_INSTALL_TORCHRUN=ON \
 && cmake --build build -j"$(nproc)" \
 && cmake --install build --prefix /out --strip \
 && test -x /out/bin/muster && test -L /out/bin/torchrun \
 && ls -l /out/bin \
 && rm -rf build

FROM ${BASE_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
# Exactly the packages ldd names for muster and muster-probe (besides libc6, libstdc++6,
# libgcc-s1, zlib1g, which every Debian base has); libgrpc++1.51 pulls libgrpc29, libre2-9,
# libc-ares2 and libssl3; libprometheus-cpp-pull1.0 (--metrics-port) pulls
# libprometheus-cpp-core1.0 and libcivetweb1.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libabsl20220623 libspdlog1.10 libfmt9 libprometheus-cpp-pull1.0 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /usr/share/doc/* /usr/share/man/*
COPY --from=build /out/bin/ /usr/local/bin/
# muster is a child subreaper and reaps orphans: it is correct as PID 1 (no tini needed).
ENTRYPOINT ["muster"]
CMD ["--help"]
