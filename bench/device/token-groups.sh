#!/usr/bin/env bash
# One device call: the tensor-core GEMV with several groups of 8 tokens per
# pass over the weights (#kernel.config token_groups) on the GPU.
#
# 1. Exact: engines of llama_gqa (fp16, 24 sequences: three groups) with and
#    without the groups (--gemv-token-groups=1) give identical logits for 21
#    sequences (sits-score score, cmp); the engine with the groups against
#    PyTorch's logits and greedy tokens (test/gpu/check_models.py).
# 2. Speed, the Llama-3-8B shape (random fp16 weights, bench/llama_bench.py
#    makes and exports it; torch.compile's static batches 1, 8 and 32 run
#    meanwhile): sits-bench at batch 1, 8, 16, 32 (context 512) of two
#    32-sequence engines, one group a pass and as many as max_batch needs
#    (four), alternating, two rounds.
# The export stays in .device-work/8b for a next call on the same machine.
# Here, before the call: bench/device/prepare.sh, then
#   mkdir -p .device-pack && tar -cJf .device-pack/device.tar.xz .device
# and bench/device/prepare-serve.sh; carry [".device-pack", ".device-serve"].
set -uo pipefail
NAME=token-groups
. bench/device/serve-env.sh
say "$(nvidia-smi -L | head -1)"
status=0
build=$W/build bin=$W/build/bin
cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DSITS_BUILD_COMPILER=OFF -DSITS_BUILD_TESTS=OFF \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$(pwd)/.device/deps" >"$FINAL/build.log" 2>&1 &&
  cmake --build "$build" -j 8 --target sits-bench sits-score sits-serve \
    >>"$FINAL/build.log" 2>&1 &
build_pid=$!

# The 8B export and the PyTorch references (the engine with the groups is
# compiled concurrently by llama_bench.py).
work8b=$(pwd)/.device-work/8b
mkdir -p "$work8b"
options="--max-batch=32 --max-seq-len=1024 --no-tokenizer"
python3 bench/llama_bench.py --shape llama3-8b --work "$work8b" \
  --json "$FINAL/torch-8b.json" --export-dtype fp16 --contexts 512 \
  --batches 1,8,32 --new-tokens 128 \
  --deadline "$(($(date +%s) + ${SITS_TORCH_SECONDS:-300}))" \
  --sitsc "$(pwd)/.device/sitsc" --engine "$W/8b-groups.sits" \
  --sitsc-args "$options" >"$FINAL/llama_bench.log" 2>&1 &
torch_pid=$!

wait "$build_pid" || { say "build FAILED"; tail -20 "$FINAL/build.log"; exit 1; }
say "runtime built"

# 1. Exact on the small model, while PyTorch runs (it takes the GPU's time
# too, but only numbers from step 2 are timed).
small="test/models/llama_gqa/model.onnx --dtype=fp16 --max-batch=24 --max-seq-len=32 --no-tokenizer"
# shellcheck disable=SC2086
sitsc $small -o "$W/groups.sits" >"$FINAL/sitsc-small.log" 2>&1 &&
  sitsc $small --gemv-token-groups=1 -o "$W/one.sits" >>"$FINAL/sitsc-small.log" 2>&1 ||
  { say "sitsc (small) FAILED"; status=1; }
tokens=$(python3 -c "print(';'.join(','.join(str((7 * s + p) % 500 + 1) for p in range(6)) for s in range(21)))")
for engine in groups one; do
  "$bin/sits-score" "$W/$engine.sits" score --tokens "$tokens" --prefill 3 \
    --out "$W/$engine.npy" >>"$FINAL/score.log" 2>&1 || { say "sits-score $engine FAILED"; status=1; }
done
if cmp -s "$W/groups.npy" "$W/one.npy"; then
  say "21 sequences: logits with 3 token groups identical to one group"
else
  say "21 sequences: logits DIFFER: $(python3 -c "import numpy as n,sys; a=n.load(sys.argv[1]); b=n.load(sys.argv[2]); print(a.shape, float(abs(a-b).max()))" "$W/groups.npy" "$W/one.npy")"
  status=1
fi
python3 test/gpu/check_models.py --sitsc "$(pwd)/.device/sitsc" \
  --runner "$bin/sits-score" --work "$W/models" --dtypes fp16 \
  --sitsc-arg=--max-batch=24 test/models/llama_gqa test/models/qwen2 \
  >"$FINAL/check-models.log" 2>&1 || status=1
say "check_models (max-batch 24): $(tail -1 "$FINAL/check-models.log")"

# 2. Speed on the 8B shape.
wait "$torch_pid"
say "torch.compile: $(python3 -c "import json; print('; '.join('B=%d %.3f ms/token' % (r['batch'], r['decode_ms_per_token']) for r in json.load(open('$FINAL/torch-8b.json')).get('torch_compile', [])))")"
sitsc "$work8b/onnx/model.onnx" -o "$W/8b-one.sits" --force $options \
  --gemv-token-groups=1 >"$FINAL/sitsc-8b-one.log" 2>&1 || { say "sitsc 8b-one FAILED"; status=1; }
for round in 1 2; do
  for engine in one groups; do
    [ -f "$W/8b-$engine.sits" ] || continue
    "$bin/sits-bench" "$W/8b-$engine.sits" --batch 1,8,16,32 --context 512 \
      --new-tokens 128 --repeats 3 --json "$FINAL/bench-$engine-$round.json" \
      >>"$FINAL/bench.log" 2>&1 || { say "sits-bench $engine FAILED"; status=1; }
  done
done
python3 - "$FINAL" <<'EOF' | tee -a "$FINAL/$NAME.log"
import glob, json, os, sys
rows = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "bench-*.json"))):
    _, engine, _ = os.path.basename(path)[:-5].split("-")
    for r in json.load(open(path)).get("results", []):
        rows.setdefault(r.get("batch"), {}).setdefault(engine, []).append(
            r.get("decode_ms_per_token"))
print("batch  one group ms/step  groups ms/step  groups/one")
for batch, sides in sorted(rows.items()):
    one, groups = min(sides.get("one", [0])), min(sides.get("groups", [0]))
    print(f"{batch:5}  {one:17.3f}  {groups:14.3f}  {groups / one if one else 0:.3f}")
EOF
say "done: exit $status"
exit $status
