#!/usr/bin/env bash
# One device call for the paged quantized KV cache (sitsc --kv-layout=paged
# --kv-cache=int8|int4: cold rows and scales in the pool's blocks, the FP16
# hot ring per sequence):
#   1. the Session gtests over real engines (PagedQuantSessionTest, int8
#      and int4: paged tokens equal contiguous ones for a batch of prompts
#      fed in chunks; a loaded prefix (shared cold blocks, a copied tail,
#      restored FP16 rows) gives a full prefill's tokens; the scheduler with
#      the prefix cache on gives the tokens of it off), with the toy
#      PagedSessionTest, SessionBlocksTest and ServeSessionTest beside them;
#      and sits-serve over a paged int8 engine with the prefix cache giving
#      the contiguous engine's tokens (test/serve/test_serve_gpu.py -k paged)
#      when .device-serve/wheels has the openai wheels;
#   2. the generated kernels on the GPU against the CPU reference of the
#      quantized program (test/gpu/check_kv_quant.py through sits-score:
#      greedy tokens, a batch, logits through decode and chunked prefill,
#      the calibration log), paged in blocks of 16, fp32 and fp16;
#   3. decode ms/token, contiguous against paged, int8 and int4 (sits-bench,
#      llama_gqa fp16, 32 slots of 2048 tokens, hot window 512, batch 1, 8
#      and 32 at a 1024-token context).
#
# Here, before the call (the sitsc carried must be one that knows a paged
# quantized cache): bench/device/prepare.sh, then .device-pack/device.tar.xz
# (`mkdir -p .device-pack && tar -cJf .device-pack/device.tar.xz .device`
# is enough), and bench/device/prepare-serve.sh. Call with carry
# [".device-pack", ".device-serve"] and timeout_s 600. $OUT gets the logs
# (paged-quant-kv.log, the summary) and sits-bench's JSON.
set -uo pipefail
NAME=paged-quant-kv
. bench/device/serve-env.sh
status=0
say "$(nvidia-smi -L | head -1)"
build_tools SitsRuntimeGpuTest sits-serve sits-bench sits-score || exit 1
say "built"

# 1. The Session over real int8/int4 engines, and the toy paged tests.
if ! test/gpu/make-quant-engines.sh "$W/engines" sitsc --target=sm_90a \
     >"$FINAL/engines.log" 2>&1; then
  say "make-quant-engines FAILED: $(tail -3 "$FINAL/engines.log")"
  exit 1
fi
SITS_TEST_QUANT_ENGINES=$W/engines "$bin/SitsRuntimeGpuTest" \
  --gtest_filter='PagedQuantSessionTest.*:QuantizedCaches/*:PagedSessionTest.*:SessionBlocksTest.*:ServeSessionTest.*' \
  >"$FINAL/gtest.log" 2>&1 || status=1
say "gtests: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$FINAL/gtest.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$FINAL/gtest.log" | head -10 | tee -a "$FINAL/$NAME.log"

# sits-serve over the paged int8 engine with the prefix cache, through the
# openai client (test/serve/test_serve_gpu.py, the paged tests beside it),
# when .device-serve/wheels has the openai wheels (see serve-gpu-tests.sh).
if ls "$data"/wheels/*.whl >/dev/null 2>&1 &&
   python3 -m pip install -q --no-index --no-deps --target "$W/py" \
     "$data"/wheels/*.whl >"$FINAL/pip.log" 2>&1; then
  PYTHONPATH=$W/py SITS_REQUIRE_GPU=1 SITS_BIN_DIR=$bin python3 -m pytest -q \
    -rs -p no:cacheprovider test/serve/test_serve_gpu.py -k "paged" \
    >"$FINAL/pytest.log" 2>&1 || status=1
  say "test_serve_gpu.py -k paged: $(tail -1 "$FINAL/pytest.log")"
else
  say "no openai wheels in .device-serve/wheels: test_serve_gpu.py not run"
fi

# 2. The generated paged quantized kernels against the CPU reference.
python3 test/gpu/check_kv_quant.py --sitsc sitsc --exec sits-exec \
  --runner "$bin/sits-score" --work "$W/check" \
  --configs int8:per-token,int8:per-channel,int4:per-token,int4:per-channel \
  --dtypes fp32,fp16 --sitsc-arg=--kv-layout=paged \
  --sitsc-arg=--kv-block-tokens=16 test/models/llama_gqa \
  >"$FINAL/check.log" 2>&1 || status=1
say "check_kv_quant (paged): $(tail -1 "$FINAL/check.log")"

# 3. Decode speed, contiguous against paged, on one engine shape.
for bits in int8 int4; do
  for layout in contiguous paged; do
    name=$bits-$layout
    sitsc test/models/llama_gqa/model.onnx --max-seq-len=2048 --max-batch=32 \
      --kv-cache=$bits --kv-hot-window=512 --kv-layout=$layout \
      --no-tokenizer -o "$W/$name.sits" >>"$FINAL/sitsc.log" 2>&1 ||
      { say "sitsc $name FAILED"; status=1; continue; }
    "$bin/sits-bench" "$W/$name.sits" --batch 1,8,32 --context 1024 \
      --new-tokens 128 --json "$FINAL/bench-$name.json" \
      >"$W/bench-$name.log" 2>&1 || status=1
    say "sits-bench $name: $(grep -E '^ *[0-9]' "$W/bench-$name.log" | head -3 | tr -s ' ' | tr '\n' ';')"
  done
done
say "done: exit $status"
exit $status
