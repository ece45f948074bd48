#!/usr/bin/env bash
# The GPU model tests: compiles every shared model (test/models/*, plus
# llama_bytes from .device/models/ or ../shared/models/) to fp32 and fp16
# engines with sitsc, builds the runtime's sits-score here, and checks on
# this machine's GPU (test/gpu/check_models.py):
#   - teacher-forced logits at every position against output_0.pb
#     (fp32 < 1e-3, fp16 < 2e-2), through prefill + decode + graphs;
#   - the 48 greedy tokens of greedy.json (every fp32 engine; fp16 for
#     llama_bytes), alone and batched with a shorter prompt;
#   - CUDA graph and direct launches give identical tokens (greedy, sampled);
#   - sampling with a seed is reproducible;
#   - engines with an int8 and an int4 KV cache (hot window 4, per-token and
#     per-channel keys) of llama_gqa (and llama_bytes) against the CPU
#     reference executor running the same quantized program
#     (test/gpu/check_kv_quant.py: greedy tokens, logits, a batch, and the
#     calibration log each run writes). Needs sits-exec ($SITS_EXEC, default
#     .device/sits-exec, else build/bin/sits-exec); skipped without it;
#   - engines with the TVC LM head (sitsc --tvc=exact) give the plain
#     engines' tokens: greedy alone and batched, without CUDA graphs, and
#     sampled with top-k 4 (<= its exact top); the fallback rate is printed.
# With WEIGHTS=fp16,int8,int4 it also checks fp16 engines with int8 and int4
# weights (sitsc --weights) against the CPU reference executor of the same
# quantized program (sits-exec): logits at every position (< 2e-2) and the
# greedy stream token by token (the reference's argmax, or a near tie).
# Prints a summary table; exits non-zero if anything failed or no GPU.
#
#   test/gpu/run-model-tests.sh [WORK_DIR]
#   WEIGHTS=fp16,int8,int4 test/gpu/run-model-tests.sh
#
# Environment: SITSC (default .device/sitsc, else build/bin/sitsc),
# SITS_TARGET (default from the GPU: sm_90a on an H100/H200), CUDACXX,
# SITS_CMAKE_ARGS (extra cmake arguments), MODELS (model folders to check,
# space-separated, instead of the default list), DTYPES (default fp32,fp16),
# WEIGHTS (default fp16: no quantized engines), SITS_EXEC (for WEIGHTS with
# int8/int4; default .device/sits-exec, else build/bin/sits-exec).
# TVC (default 1; 0 skips the TVC engines), KV (default 1; 0 skips the
# quantized KV-cache engines).
set -uo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${1:-$src/build-gpu-models}
build=$work/runtime
say() { printf 'run-model-tests: %s\n' "$*"; }

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  say "no NVIDIA GPU visible (nvidia-smi -L failed)"
  exit 1
fi
sitsc=${SITSC:-}
if [ -z "$sitsc" ]; then
  for candidate in "$src/.device/sitsc" "$src/build/bin/sitsc"; do
    [ -x "$candidate" ] && sitsc=$candidate && break
  done
fi
if [ -z "$sitsc" ] || [ ! -x "$sitsc" ]; then
  say "no sitsc: set SITSC or put a static build at .device/sitsc"
  exit 1
fi
weights=${WEIGHTS:-fp16}
sits_exec=${SITS_EXEC:-}
if [ "$weights" != fp16 ] && [ -z "$sits_exec" ]; then
  for candidate in "$src/.device/sits-exec" "$src/build/bin/sits-exec"; do
    [ -x "$candidate" ] && sits_exec=$candidate && break
  done
  if [ -z "$sits_exec" ]; then
    say "WEIGHTS=$weights needs sits-exec (the CPU reference): set SITS_EXEC or put it at .device/sits-exec"
    exit 1
  fi
fi
if ! python3 -c "import numpy, onnx" 2>/dev/null; then
  say "python3 with numpy and onnx is needed"
  exit 1
fi
target=${SITS_TARGET:-}
if [ -z "$target" ]; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
  target=sm_${cap}
  [ "$cap" = "90" ] && target=sm_90a
fi
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
generator=()
if [ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi

say "$(nvidia-smi -L | head -1), target $target, sitsc $sitsc"
mkdir -p "$build"
log=$build/build.log
start=$(date +%s)
if ! cmake "${generator[@]}" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
     -DSITS_BUILD_COMPILER=OFF -DSITS_BUILD_TESTS=OFF \
     -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="${target//[!0-9]/}" \
     ${SITS_CMAKE_ARGS:-} >"$log" 2>&1 ||
   ! cmake --build "$build" --target sits-score -j "$(nproc)" >>"$log" 2>&1; then
  grep -E "error|FAILED|Error" "$log" | head -20
  say "building sits-score failed (see $log)"
  exit 1
fi
say "built sits-score in $(( $(date +%s) - start )) s"

if [ -n "${MODELS:-}" ]; then
  read -r -a models <<<"$MODELS"
else
  models=()
  for folder in "$src"/test/models/*/; do
    [ -f "$folder/model.onnx" ] && models+=("${folder%/}")
  done
  bytes=""
  for candidate in "$src/.device/models/llama_bytes" "$src/../shared/models/llama_bytes"; do
    [ -f "$candidate/model.onnx" ] && bytes=$candidate && break
  done
  if [ -n "$bytes" ]; then
    models+=("$bytes")
  else
    say "WARNING: llama_bytes not found (.device/models/llama_bytes), its checks are skipped"
  fi
fi

python3 "$src/test/gpu/check_models.py" --sitsc "$sitsc" \
  --runner "$build/bin/sits-score" --target "$target" \
  --dtypes "${DTYPES:-fp32,fp16}" --weights "$weights" \
  --exec "${sits_exec:-sits-exec}" --work "$work/engines" \
  $([ "${TVC:-1}" = 1 ] && echo --tvc) "${models[@]}"
status=$?

sitsexec=${SITS_EXEC:-}
if [ -z "$sitsexec" ]; then
  for candidate in "$src/.device/sits-exec" "$src/build/bin/sits-exec"; do
    [ -x "$candidate" ] && sitsexec=$candidate && break
  done
fi
if [ "${KV:-1}" = 0 ]; then
  say "KV=0: quantized KV checks skipped"
elif [ -n "$sitsexec" ]; then
  kvmodels=("$src/test/models/llama_gqa")
  [ -n "${bytes:-}" ] && kvmodels+=("$bytes")
  for model in "${kvmodels[@]}"; do
    python3 "$src/test/gpu/check_kv_quant.py" --sitsc "$sitsc" \
      --exec "$sitsexec" --runner "$build/bin/sits-score" --target "$target" \
      --configs int8:per-token,int8:per-channel,int4:per-token,int4:per-channel \
      --dtypes "${DTYPES:-fp32,fp16}" --work "$work/kv-engines" "$model" ||
      status=1
  done
else
  say "WARNING: no sits-exec (SITS_EXEC, .device/sits-exec): quantized KV checks skipped"
fi
say "total $(( $(date +%s) - start )) s"
[ $status -eq 0 ] && say "PASSED" || say "FAILED"
exit $status
