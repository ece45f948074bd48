#!/usr/bin/env bash
# One device call for issue 8's KV gate (the int4 cache's decode attention
# at 8192 tokens of context at least 2.5x faster than the fp16 cache's):
# the 8B attention shape (bench/llama_bench.py --shape llama3-8b-attn: two
# Llama-3-8B layers, a 2048-token vocabulary) compiled with the fp16 and the
# int4 cache at several keys per split block (sitsc --decode-split-keys;
# 256 is the default), each profiled by kernel at batches 1 and 8 and
# context 8192 (bench/kernel_profile.py, Nsight Compute). Prints a table of
# the attention kernel's microseconds a layer for each (the gate compares
# the int4 cache's best with the fp16 cache's best). First, outside any
# engine, bench/decode_block_times.cu times both kernels' blocks at the
# same split sizes at 8192 and 2048, with the caches cold (L2 flushed
# before each launch, as in an engine step) and warm (block-times-*.txt: a
# launch by events, and when each block starts and ends).
#
# Here, before the call: bench/device/prepare.sh (the static sitsc in
# .device/); then call with carry [".device"]. $OUT gets the table
# (kv-split-sweep.md), the block times and everything else in
# kv-split-sweep.tar.gz.
set -uo pipefail
FINAL=${OUT:-$(pwd)/bench/out}
W=/tmp/kv-split-sweep
SITSC=${SITSC:-$(pwd)/.device/sitsc}
SPLITS=${SPLITS:-128 256 512 1024}
mkdir -p "$FINAL" "$W"
say() { printf '[%s] %s\n' "$(date +%T)" "$*" | tee -a "$W/progress.log"; }

say "building sits-bench and decode-block-times"
cmake -G Ninja -S . -B build -DSITS_BUILD_COMPILER=OFF \
  -DSITS_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >"$W/build.log" 2>&1 &&
  cmake --build build --target sits-bench decode-block-times \
    >>"$W/build.log" 2>&1 ||
  { say "build failed"; tail -20 "$W/build.log"; exit 1; }
sizes=$(echo $SPLITS | tr ' ' ',')
for context in 8192 2048; do
  for caches in cold warm; do
    log="$W/block-times-$context-$caches.txt"
    build/bin/decode-block-times "$context" "$sizes" "$caches" >"$log" 2>&1
    say "block times at $context, $caches L2:"
    grep "a launch" "$log" | tee -a "$W/progress.log"
  done
done
say "exporting llama3-8b-attn"
python3 bench/llama_bench.py --shape llama3-8b-attn --work "$W" \
  --json "$W/export.json" --export-dtype fp16 --deadline 0 --batches 1 \
  --contexts 32 --sitsc "$SITSC" --engine "$W/unused.sits" \
  --sitsc-args="--max-seq-len=8448 --max-batch=8" >"$W/export.log" 2>&1
[ -f "$W/onnx/model.onnx" ] || { say "no export"; tail -20 "$W/export.log"; exit 1; }

table="$W/kv-split-sweep.md"
echo "| cache | split keys | b1 us/layer | b8 us/layer |" >"$table"
echo "|---|---|---|---|" >>"$table"
for keys in $SPLITS; do
  for kv in fp16 int4; do
    engine="$W/$kv-$keys.sits"
    extra=""
    [ "$kv" = int4 ] && extra="--kv-cache=int4"
    "$SITSC" "$W/onnx/model.onnx" -o "$engine" --force --max-seq-len=8448 \
      --max-batch=8 --decode-split-keys="$keys" $extra >>"$W/sitsc.log" 2>&1 ||
      { say "sitsc failed for $kv $keys"; continue; }
    row="| $kv | $keys |"
    for b in 1 8; do
      json="$W/prof-$kv-$keys-b$b.json"
      timeout 120 python3 bench/kernel_profile.py "$engine" \
        --sits-bench build/bin/sits-bench --batch "$b" --context 8192 \
        --json "$json" >"$W/prof-$kv-$keys-b$b.log" 2>&1
      # Two layers: the attention family's microseconds a step, halved.
      us=$(python3 -c "import json,sys
d=json.load(open(sys.argv[1]))
print('%.1f' % (sum(k['us_per_step'] for k in d['kernels']
                   if k['kernel'].startswith('attention_decode')) / 2))" \
        "$json" 2>/dev/null || echo "-")
      row="$row $us |"
    done
    echo "$row" >>"$table"
    say "$row"
    rm -f "$engine"
  done
done
cp "$table" "$W"/block-times-*.txt "$FINAL/"
tar czf "$FINAL/kv-split-sweep.tar.gz" --exclude='*.sits' \
  --exclude='kv-split-sweep/onnx' -C /tmp kv-split-sweep
cat "$table"
