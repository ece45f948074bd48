#!/usr/bin/env bash
# Here, before bench/device/bpe16k.sh: the trained llama_bpe16k model's
# 45 MB ONNX file and the static tools do not fit the device tool's 64 MiB
# together, so its fp16 engine (with the tokenizer inside) is compiled here
# and the CPU reference executor's greedy streams of held-out lines are
# recorded here (test/tools/text_streams.py record); .device-bpe16k/ then
# holds the engine, the streams, and the tokenizer files the Python tests
# read (about 27 MB). Needs bench/device/prepare.sh's .device/deps and
# .device/wheels. Call the device with carry
# [".device/deps", ".device/wheels", ".device-bpe16k"].
#
#   bench/device/prepare-bpe16k.sh [SHARED_MODELS_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
models=${1:-$(pwd)/../shared/models}
model=$models/llama_bpe16k
[ -f "$model/model.onnx" ] || { echo "prepare-bpe16k: no $model/model.onnx"; exit 1; }
[ -d .device/deps ] || bench/device/prepare.sh
out=.device-bpe16k
rm -rf "$out"
mkdir -p "$out/llama_bpe16k"
cp "$model/tokenizer.json" "$model/greedy.json" "$model/heldout.txt" "$out/llama_bpe16k/"
options=(--max-seq-len=256 --max-batch=1)
build/bin/sitsc "$model/model.onnx" -o "$out/llama_bpe16k.sits" "${options[@]}" >/dev/null
PATH=$(pwd)/build/bin:$PATH python3 test/tools/text_streams.py record \
  --model "$model/model.onnx" --lines "$model/heldout.txt" --count 8 \
  --new-tokens 48 --out "$out/streams.json" "${options[@]}"
grep -qsx '/.device-bpe16k/' .git/info/exclude || echo /.device-bpe16k/ >>.git/info/exclude
du -sh "$out"
