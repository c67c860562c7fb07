#!/usr/bin/env bash
# Installs the Debian packages placer needs to build, test and serve. Does nothing when all are
# present; uses sudo when not root. Safe to run again.
set -euo pipefail

packages=(
  build-essential cmake make git ccache pkg-config
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libabsl-dev libre2-dev
  libtorch-dev libsleef-dev libopenblas0-pthread libgloo-dev
  libspdlog-dev prometheus-cpp-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev
  libicu-dev
  curl openssl libssl-dev
  python3-torch
  python3-grpcio python3-protobuf python3-numpy
  prometheus
)

# The GPT-2 tokenizer agreement test runs the npm package gpt-3-encoder with node. A node
# from elsewhere (NodeSource's bundles npm) is fine, and Debian's npm would conflict with it.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# tests/deploy validates the Kubernetes manifests with Node.js packages. A node and npm that
# are already installed (say from NodeSource, which Debian's npm would conflict with) are used.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# libtorch calls whatever libblas.so.3 the alternatives select; the reference BLAS is 2-20x
# slower than OpenBLAS, so insist on OpenBLAS.
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
case "$blas" in
  *openblas*) ;;
  *)
    echo "install-deps: selecting OpenBLAS as libblas.so.3 (was ${blas:-none})"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo update-alternatives --set libblas.so.3-x86_64-linux-gnu \
      /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3
    ;;
esac
