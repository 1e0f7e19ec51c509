#!/usr/bin/env bash
# Installs every build and test dependency of h20 from Debian's packages.
# Idempotent: packages already present are skipped, and apt-get runs only when
# something is missing.
set -euo pipefail

# python3-onnx, python3-numpy: models/llama/generate.py (GPU test models).
PKGS=(
  cmake ninja-build ccache g++ python3 python3-numpy python3-onnx
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools clang-22 lld-22 libclang-rt-22-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  googletest libgtest-dev nlohmann-json3-dev
  zlib1g-dev libzstd-dev libcurl4-openssl-dev libedit-dev libxml2-dev libffi-dev
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi
