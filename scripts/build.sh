#!/usr/bin/env bash
# Configures and builds sits (compiler, and the runtime where a CUDA toolkit
# exists) into ./build. Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."

cmake -G Ninja -S . -B build \
  -DCMAKE_BUILD_TYPE=Release \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
  -DSITS_BUILD_PYTHON=ON \
  "$@"
cmake --build build
