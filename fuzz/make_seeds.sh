#!/usr/bin/env bash
# Regenerates the committed seed corpora (fuzz/corpus/TARGET/).
#
#   fuzz/make_seeds.sh [BUILD_DIR]
#
# The engine seeds come from sits-fuzz-engine-seeds in BUILD_DIR (default
# build/; any build with the tests and the runtime, e.g. build-asan/), the
# others from fuzz/make_seeds.py (the Python test helpers).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

cmake --build "$build" --target sits-fuzz-engine-seeds
for t in engine tokenizer chat-template model-tokenizer onnx-loader onnx-import; do
  rm -rf "fuzz/corpus/$t"
  mkdir -p "fuzz/corpus/$t"
done
"$build/bin/sits-fuzz-engine-seeds" fuzz/corpus/engine
python3 fuzz/make_seeds.py fuzz/corpus
