#!/usr/bin/env bash
# One device call for the trained llama_bpe16k model (after
# bench/device/prepare-bpe16k.sh; carry [".device/deps", ".device/wheels",
# ".device-bpe16k"]): builds the runtime and the Python package, then
#   - sits-run --prompt on the recorded held-out lines gives the CPU
#     reference executor's greedy ids and text (text_streams.py check);
#   - the Python tests of llama_bpe16k (tokenizer against greedy.json and
#     held-out text; Engine.generate equals sits-run, ids and text) with GPU
#     skips counted as failures;
#   - sits-run --stats on a held-out line, batch 1.
# $OUT gets bpe16k.log.
set -uo pipefail
FINAL=${OUT:-$(pwd)/bench/out}
W=/tmp/bpe16k
B=$W/build
data=$(pwd)/.device-bpe16k
mkdir -p "$FINAL" "$W"
say() { printf '[%s] %s\n' "$(date +%T)" "$*" | tee -a "$FINAL/bpe16k.log"; }
status=0

say "$(nvidia-smi -L | head -1)"
say "building the runtime and the Python package in $B"
generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
if ! cmake "${generator[@]}" -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DSITS_BUILD_COMPILER=OFF \
     -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DCMAKE_PREFIX_PATH="$(pwd)/.device/deps" -DSITS_BUILD_PYTHON=ON \
     -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" \
     -DPython3_EXECUTABLE="$(command -v python3)" >"$FINAL/build.log" 2>&1 ||
   ! cmake --build "$B" -j "$(nproc)" >>"$FINAL/build.log" 2>&1; then
  tail -20 "$FINAL/build.log"
  say "bpe16k: build FAILED"
  exit 1
fi
export PATH="$B/bin:$PATH"

say "sits-run --prompt on held-out lines against the CPU reference's streams"
python3 test/tools/text_streams.py check --engine "$data/llama_bpe16k.sits" \
  --streams "$data/streams.json" 2>&1 | tee -a "$FINAL/bpe16k.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

say "pytest of llama_bpe16k (SITS_REQUIRE_GPU=1)"
PYTHONPATH=$B/python SITS_BIN_DIR=$B/bin SITS_SHARED_MODELS_DIR=$data \
  SITS_BPE16K_ENGINE=$data/llama_bpe16k.sits SITS_REQUIRE_GPU=1 \
  python3 -m pytest -q -rs -p no:cacheprovider test/python -k "bpe16k or trained" 2>&1 |
  tail -15 | tee -a "$FINAL/bpe16k.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

line=$(awk 'NF' "$data/llama_bpe16k/heldout.txt" | sed -n 2p)
say "sits-run --prompt '$line' --stats"
sits-run "$data/llama_bpe16k.sits" --prompt "$line" --max-new-tokens 200 \
  --ignore-eos --stats 2>&1 | tee -a "$FINAL/bpe16k.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
[ $status -eq 0 ] && say "bpe16k: PASSED" || say "bpe16k: FAILED"
exit $status
