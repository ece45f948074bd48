#!/usr/bin/env bash
# One device call: the tensor-core prefill GEMM split over K and not.
#   1. micro/gemm_split.cu: gemmTensorCore with kSplitK on and off on the
#      Llama-3-8B o_proj shape (K = N = 4096), 16 to 4096 tokens, 1 to 8
#      splits, microseconds a launch.
#   2. The 8B shape's paged engine (64 sequences of 2560 tokens) as sitsc
#      builds it and with --gemm-k-splits=1: sits-bench's prefill at batch 1
#      of 16 to 2048 tokens and at batch 8 of 128.
# Here, before the call: bench/device/prepare.sh, the pack (see
# serve-table.sh); carry [".device-pack", ".device-serve"]. $OUT gets
# gemm-split.log and build.log.
set -uo pipefail
NAME=gemm-split
. bench/device/serve-env.sh
say "$(nvidia-smi -L | head -1)"
build_tools sits-bench &
build_pid=$!
mkdir -p "$W/inc/sits"
cp backends/cuda/kernels/*.cuh "$W/inc/sits/"
if /usr/local/cuda/bin/nvcc -arch=sm_90a -std=c++17 -O3 -I "$W/inc" \
  -o "$W/gemm_split" bench/device/micro/gemm_split.cu >"$W/nvcc.log" 2>&1; then
  "$W/gemm_split" 2>&1 | tee -a "$FINAL/$NAME.log"
else
  say "nvcc FAILED: $(head -5 "$W/nvcc.log")"
fi
export_8b || exit 1
wait "$build_pid" || exit 1
bin=$W/build/bin
declare -A engines=([split]=$W/8b-split.sits [whole]=$W/8b-whole.sits)
for kind in split whole; do
  extra=()
  [ "$kind" = whole ] && extra=(--gemm-k-splits=1)
  sitsc "$work8b/onnx/model.onnx" -o "${engines[$kind]}" --force \
    --max-batch=64 --max-seq-len=2560 --kv-layout=paged "${extra[@]}" \
    >"$W/sitsc-$kind.log" 2>&1 ||
    { say "sitsc $kind FAILED"; tail -5 "$W/sitsc-$kind.log"; exit 1; }
done
for round in 1 2; do
  for kind in split whole; do
    "$bin/sits-bench" "${engines[$kind]}" --batch 1 \
      --context 16,48,64,128,256,512,2048 --new-tokens 2 --repeats 2 \
      >"$W/prefill-$kind.log" 2>&1
    say "round $round $kind prefill b1: $(grep -E '^ *[0-9]' "$W/prefill-$kind.log" | awk '{print $2 ":" $4}' | tr '\n' ' ')"
    "$bin/sits-bench" "${engines[$kind]}" --batch 8 --context 128 \
      --new-tokens 2 --repeats 2 >"$W/prefill8-$kind.log" 2>&1
    say "round $round $kind prefill b8x128: $(grep -E '^ *[0-9]' "$W/prefill8-$kind.log" | awk '{print $4}')"
  done
done
say "done"
