#!/usr/bin/env bash
# Here, after bench/device/prepare.sh: packs .device/ (xz: the 37 MB of tools
# take about 9 MB) and base engines compiled with BASE_SITSC (an older sitsc,
# for a before/after comparison on the GPU) into .device-pack/, so that both
# fit the device tool's 64 MiB beside the checkout. Options per engine in
# .device-pack/options.txt (name, model, sitsc options), which
# bench/device/kernel-cores.sh compiles again with the new sitsc there.
#
#   bench/device/pack.sh BASE_SITSC
set -euo pipefail
[ $# -eq 1 ] || { sed -n 2,9p "$0"; exit 2; }
base=$(realpath "$1")
cd "$(dirname "$0")/../.."
shared=$(realpath ../shared/models 2>/dev/null || echo /work/shared/models)
pack=.device-pack
rm -rf "$pack" && mkdir -p "$pack/engines"
# Models as the device sees them: test/models travels with the checkout,
# llama_bytes goes into .device/models.
mkdir -p .device/models
cp -r "$shared/llama_bytes" .device/models/
cat >"$pack/engines/options.txt" <<OPTIONS
fp16 .device/models/llama_bytes/model.onnx --weights=int8 --max-seq-len=8192 --max-batch=8
kv8 .device/models/llama_bytes/model.onnx --weights=int8 --kv-cache=int8 --max-seq-len=8192 --max-batch=8
fp32 test/models/llama_gqa/model.onnx --dtype=fp32 --max-seq-len=4096 --max-batch=8
OPTIONS
while read -r name model options; do
  # shellcheck disable=SC2086
  "$base" "$model" -o "$pack/engines/base-$name.sits" --no-tokenizer $options >/dev/null
done <"$pack/engines/options.txt"
tar -cJf "$pack/base-engines.tar.xz" -C "$pack/engines" .
rm -rf "$pack/engines"
tar -cJf "$pack/device.tar.xz" .device
grep -qsx '/.device-pack/' .git/info/exclude || echo /.device-pack/ >>.git/info/exclude
du -sh "$pack"
