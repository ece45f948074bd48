#!/usr/bin/env bash
# Installs what sits needs to build and test on Debian 12: LLVM/MLIR 22,
# protobuf and the ONNX schema from Debian's packages, and the Python packages
# the test helpers use (never the product). The CUDA toolkit is expected in
# /usr/local/cuda already.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
  SUDO=sudo
fi

PACKAGES=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libprotobuf-dev protobuf-compiler libonnx-dev
  libzstd-dev zlib1g-dev
  libpcre2-dev libutf8proc-dev nlohmann-json3-dev libcpp-httplib-dev
  pybind11-dev python3-dev
  cmake ninja-build g++ libgtest-dev python3 python3-pip
  # lit's per-test time limit (test/lit.cfg.py) needs psutil in the Python
  # lit runs on.
  python3-psutil
  # The fuzz targets (scripts/fuzz.sh): clang with libFuzzer and the
  # sanitizer runtimes.
  clang-14 libclang-rt-14-dev
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

# Test helpers only: reference evaluations with onnx/onnxruntime/numpy, the
# `tokenizers` package as the tokenizer's reference, and transformers (with
# jinja2) as the chat templates' reference, pytest for the Python
# package's tests, and openai as the client of the serving tests.
# onnx is pinned: test/conformance's list of the node tests sits does not
# pass is written against that version's cases.
ONNX_VERSION=1.23.2
PY_PACKAGES=("onnx==$ONNX_VERSION" onnxruntime numpy tokenizers transformers jinja2 pytest openai)
if ! python3 -c "import onnx, onnxruntime, numpy, tokenizers, transformers, jinja2, pytest, openai
assert onnx.__version__ == '$ONNX_VERSION'" 2>/dev/null; then
  python3 -m pip install -q "${PY_PACKAGES[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${PY_PACKAGES[@]}"
fi
