#!/usr/bin/env bash
# Writes the engines PagedQuantSessionTest (SitsRuntimeGpuTest) runs:
# llama_gqa with an int8 and an int4 KV cache (hot window 16, per-channel
# key blocks of 16), contiguous and paged in blocks of 16, into DIR:
# int8.sits, int8-paged.sits, int4.sits, int4-paged.sits.
#   test/gpu/make-quant-engines.sh DIR [SITSC] [sitsc options...]
# (SITSC defaults to the sitsc on PATH; the options, e.g. --target=sm_90a,
# go to every engine.)
set -euo pipefail
dir=$1
sitsc=${2:-sitsc}
shift $(( $# >= 2 ? 2 : 1 ))
model="$(cd "$(dirname "$0")/.." && pwd)/models/llama_gqa/model.onnx"
mkdir -p "$dir"
common=(--max-seq-len=256 --max-batch=4 --max-prefill-tokens=32
        --kv-hot-window=16 --kv-channel-block=16 --no-tokenizer --force)
for bits in int8 int4; do
  "$sitsc" "$model" "${common[@]}" --kv-cache=$bits "$@" \
    -o "$dir/$bits.sits" >/dev/null
  "$sitsc" "$model" "${common[@]}" --kv-cache=$bits --kv-layout=paged \
    --kv-block-tokens=16 "$@" -o "$dir/$bits-paged.sits" >/dev/null
done
