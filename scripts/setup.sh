#!/usr/bin/env bash
# Installs every build and test dependency of h20 from Debian's packages, and
# ONNX Runtime's Node binding from npm (the oracle behind scripts/ort-run.sh).
# Idempotent: packages already present are skipped, apt-get runs only when
# something is missing, and npm only when the pinned version is not installed.
set -euo pipefail

# python3-onnx, python3-numpy: models/llama/generate.py (GPU test models).
# nodejs, npm: ONNX Runtime's Node binding, below (checked by command, as a
# Node.js from elsewhere, e.g. NodeSource's, brings its own npm).
PKGS=(
  cmake ninja-build ccache g++ python3 python3-numpy python3-onnx
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools clang-22 lld-22 libclang-rt-22-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  googletest libgtest-dev nlohmann-json3-dev
  zlib1g-dev libzstd-dev libcurl4-openssl-dev libedit-dev libxml2-dev libffi-dev
)

missing=()
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
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

# ONNX Runtime (CPU), the second numerical oracle (scripts/ort-run.sh): the
# onnxruntime-node package from npm, pinned, into third_party/ort/ (git-ignored).
# --ignore-scripts: its install script only downloads GPU providers; the CPU
# binding ships in the package. Installed into a temporary folder and moved
# into place once it loads, so a failed or interrupted install never looks
# installed; other platforms' binaries are removed (about 250 MB).
# H20_SKIP_ORT=1 skips this step.
ORT_NODE_VERSION=1.30.0
ort_dir=$(cd "$(dirname "$0")/.." && pwd)/third_party/ort
ort_pkg=$ort_dir/node_modules/onnxruntime-node
ort_fail() {
  echo "setup: error: could not install onnxruntime-node $ORT_NODE_VERSION into $ort_dir: $*" >&2
  echo "setup: (H20_SKIP_ORT=1 skips it; the tests that need it are then reported unsupported)" >&2
  exit 1
}
if [[ ${H20_SKIP_ORT:-0} == 1 ]]; then
  echo "setup: H20_SKIP_ORT=1: not installing onnxruntime-node"
elif [[ -f $ort_pkg/package.json ]] &&
     grep -q "\"version\": *\"$ORT_NODE_VERSION\"" "$ort_pkg/package.json"; then
  echo "setup: onnxruntime-node $ORT_NODE_VERSION present"
else
  command -v node >/dev/null || ort_fail "node is not on PATH"
  command -v npm >/dev/null || ort_fail "npm is not on PATH"
  echo "setup: installing onnxruntime-node $ORT_NODE_VERSION (npm) into $ort_dir"
  mkdir -p "$(dirname "$ort_dir")"
  tmp=$(mktemp -d "$ort_dir.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  printf '{"private": true, "dependencies": {"onnxruntime-node": "%s"}}\n' "$ORT_NODE_VERSION" \
    > "$tmp/package.json"
  if ! (cd "$tmp" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error); then
    ort_fail "npm install failed (is the npm registry reachable?)"
  fi
  arch=$(node -p 'process.platform + "/" + process.arch')
  bin=$tmp/node_modules/onnxruntime-node/bin/napi-v6
  [[ -f $bin/$arch/onnxruntime_binding.node ]] || ort_fail "the package has no CPU binding for $arch"
  for d in "$bin"/*/*; do
    [[ $d == "$bin/$arch" ]] || rm -rf "$d"
  done
  if ! err=$(cd "$tmp" && node -e 'require("onnxruntime-node")' 2>&1); then
    ort_fail "its native binding does not load: $err"
  fi
  rm -rf "$ort_dir"
  mv "$tmp" "$ort_dir"
  trap - EXIT
  echo "setup: onnxruntime-node $ORT_NODE_VERSION installed"
fi
