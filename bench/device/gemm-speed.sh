#!/usr/bin/env bash
# One device call: the prefill tensor-core GEMM (gemm.cuh's gemmTensorCore)
# of .device/sitsc against the one of .device/sitsc-base (an older sitsc,
# e.g. main's, for a same-machine before/after comparison; skipped when
# absent).
#
# 1. Numerics on the GPU: test/gpu/check_models.py (fp16 and bf16 engines of
#    llama_gqa and qwen2 against PyTorch's logits and greedy tokens) with the
#    new sitsc; and the logits of the new and the base engine of llama_gqa
#    (fp16, 21 sequences, prompts of 6 tokens prefilled in chunks of 3),
#    whose largest difference is printed (the f32 sums run in a different
#    order: close, not identical).
# 2. Speed on the Llama-3-8B shape (random fp16 weights; bench/llama_bench.py
#    exports it, or an earlier call's export in .device-work/8b is reused):
#    sits-bench prefill tokens/s at batch 1, 8 and 32, context 512, of the
#    new and the base engine, alternating, two rounds.
# Here, before the call: bench/device/prepare.sh, then
#   strip -o .device/sitsc-base BASE_BUILD/bin/sitsc   # optional baseline
#   mkdir -p .device-pack && tar -cJf .device-pack/device.tar.xz .device
# and bench/device/prepare-serve.sh; carry [".device-pack", ".device-serve"].
# $OUT gets gemm-speed.log, the logs and the sits-bench JSON.
set -uo pipefail
NAME=gemm-speed
. bench/device/serve-env.sh
say "$(nvidia-smi -L | head -1)"
status=0
build_tools sits-bench sits-score &
build_pid=$!
base=$(pwd)/.device/sitsc-base
[ -x "$base" ] || { say "no .device/sitsc-base: new engine only"; base=; }

export_8b || exit 1
options="--max-batch=32 --max-seq-len=1024 --no-tokenizer"
# shellcheck disable=SC2086
sitsc "$work8b/onnx/model.onnx" -o "$W/8b-new.sits" --force $options \
  >"$FINAL/sitsc-8b-new.log" 2>&1 || { say "sitsc 8b-new FAILED"; status=1; }
if [ -n "$base" ]; then
  # shellcheck disable=SC2086
  "$base" "$work8b/onnx/model.onnx" -o "$W/8b-base.sits" --force $options \
    >"$FINAL/sitsc-8b-base.log" 2>&1 || { say "sitsc 8b-base FAILED"; status=1; }
fi
wait "$build_pid" || exit 1 # build_tools said why
bin=$W/build/bin # set by build_tools, but in its background subshell

# 1. Numerics.
python3 test/gpu/check_models.py --sitsc "$(pwd)/.device/sitsc" \
  --runner "$bin/sits-score" --work "$W/models" --dtypes fp16,bf16 \
  test/models/llama_gqa test/models/qwen2 >"$FINAL/check-models.log" 2>&1 ||
  status=1
say "check_models: $(tail -1 "$FINAL/check-models.log")"
if [ -n "$base" ]; then
  small="test/models/llama_gqa/model.onnx --dtype=fp16 --max-batch=24 --max-seq-len=32 --no-tokenizer"
  tokens=$(python3 -c "print(';'.join(','.join(str((7 * s + p) % 500 + 1) for p in range(6)) for s in range(21)))")
  for side in new base; do
    compiler=sitsc
    [ $side = base ] && compiler=$base
    # shellcheck disable=SC2086
    "$compiler" $small -o "$W/small-$side.sits" >>"$FINAL/sitsc-small.log" 2>&1 &&
      "$bin/sits-score" "$W/small-$side.sits" score --tokens "$tokens" \
        --prefill 3 --out "$W/small-$side.npy" >>"$FINAL/score.log" 2>&1 ||
      { say "small $side FAILED"; status=1; }
  done
  say "llama_gqa logits, new against base: $(python3 -c "import numpy as n,sys; a=n.load(sys.argv[1]); b=n.load(sys.argv[2]); print(a.shape, 'max |diff|', float(abs(a-b).max()), 'max |logit|', float(abs(b).max()))" "$W/small-new.npy" "$W/small-base.npy" 2>&1)"
fi

# 2. Prefill speed.
for round in 1 2; do
  for engine in base new; do
    [ -f "$W/8b-$engine.sits" ] || continue
    "$bin/sits-bench" "$W/8b-$engine.sits" --batch 1,8,32 --context 512 \
      --new-tokens 8 --repeats 3 --json "$FINAL/bench-$engine-$round.json" \
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
            r.get("prefill_tokens_per_s"))
# The 8B shape's linear layers: 2 * 7.0e9 FLOP a token (attention apart).
print("batch  base prefill tok/s  new prefill tok/s  new/base  new linear TFLOP/s")
for batch, sides in sorted(rows.items()):
    base, new = max(sides.get("base", [0])), max(sides.get("new", [0]))
    print(f"{batch:5}  {base:18.0f}  {new:17.0f}  {new / base if base else 0:8.3f}"
          f"  {new * 2 * 6.98e9 / 1e12:18.0f}")
EOF
say "done: exit $status"
exit $status
