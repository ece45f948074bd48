#!/usr/bin/env bash
# Builds the CUDA-free libraries (engine format, tokenizer, chat templates,
# text) and their tests with AddressSanitizer and UBSan (SITS_ENABLE_ASAN)
# into ./build-asan and runs them through ctest: the unit tests of those
# libraries and the fuzz targets' replay of their corpora and crash inputs.
# The compiler half (MLIR) is left out: see docs/reliability.md for why.
# Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."

# -O1 -g with assertions on (no -DNDEBUG): the usual ASan trade-off between
# compile time, run time and stack traces.
cmake -G Ninja -S . -B build-asan \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" \
  -DSITS_ENABLE_ASAN=ON \
  -DSITS_BUILD_COMPILER=OFF \
  -DSITS_BUILD_RUNTIME=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
  -DSITS_BUILD_PYTHON=OFF >/dev/null
cmake --build build-asan
# The first report of either sanitizer fails its test; there are no
# suppressions.
ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "$(nproc)" "$@"
