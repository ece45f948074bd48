#!/usr/bin/env bash
# Compiles the committed test models (and ../shared/models/llama_bytes when
# present) with two sitsc binaries under 13 option sets (weights, KV cache,
# TVC, dtypes, norm fusion, targets) and lists the engines that differ: a
# refactor of the compiler that must not change what it generates shows
# "0 of N engines differ". Both compile from this same working directory:
# sitsc binaries built before NVRTC ran in the root directory recorded it
# in the kernels' line tables.
#
#   scripts/compare-engines.sh BASE_SITSC NEW_SITSC [WORK_DIR]
set -uo pipefail
[ $# -ge 2 ] || { sed -n 2,9p "$0"; exit 2; }
base=$(realpath "$1") new=$(realpath "$2")
root=$(cd "$(dirname "$0")/.." && pwd)
work=${3:-$(mktemp -d)}
models=("$root"/test/models/{llama_gqa,qwen2,llama_opset23,llama_tied,llama_mha})
[ -f "$root/../shared/models/llama_bytes/model.onnx" ] &&
  models+=("$(realpath "$root/../shared/models/llama_bytes")")
options=(
  ""
  "--weights=int8"
  "--weights=int4"
  "--weights=int4 --weight-group=64"
  "--kv-cache=int8 --kv-hot-window=4"
  "--kv-cache=int4 --kv-keys=per-token --kv-hot-window=4"
  "--tvc=exact"
  "--dtype=fp32"
  "--dtype=bf16"
  "--norm-fusion"
  "--norm-fusion --dtype=bf16"
  "--target=sm_75"
  "--target=sm_80 --weights=int4"
)
total=0 differ=0
for i in "${!options[@]}"; do
  for model in "${models[@]}"; do
    name=$(basename "$model").$i
    for side in base new; do
      mkdir -p "$work/$side"
      sitsc=$base; [ $side = new ] && sitsc=$new
      # shellcheck disable=SC2086
      "$sitsc" "$model/model.onnx" -o "$work/$side/$name.sits" --force \
        --max-seq-len=128 --max-batch=4 --no-tokenizer ${options[$i]} \
        >/dev/null 2>"$work/$side/$name.err" || echo "$side failed: $name ${options[$i]}"
    done
    total=$((total + 1))
    if ! cmp -s "$work/base/$name.sits" "$work/new/$name.sits" ||
       ! cmp -s "$work/base/$name.err" "$work/new/$name.err"; then
      echo "differs: $name (${options[$i]:-defaults})"
      differ=$((differ + 1))
    fi
  done
done
echo "$differ of $total engines differ (in $work)"
[ $differ -eq 0 ]
