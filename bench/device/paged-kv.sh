#!/usr/bin/env bash
# One device call for the paged KV cache (sitsc --kv-layout=paged):
#   1. the Session gtests (PagedSessionTest: paged tokens equal contiguous
#      ones, restarted slots reuse their blocks, a shared prefix gives a full
#      prefill's tokens with a pool too small for copies, a full pool is
#      KVCacheFull; SessionBlocksTest and SessionStepTest beside them), and
#      test/serve/test_serve_gpu.py (a paged engine's shared prefix blocks
#      give sits-exec's tokens) when .device-serve/wheels has the openai
#      wheels (see serve-gpu-tests.sh);
#   2. the generated paged kernels on the GPU against PyTorch
#      (test/gpu/check_models.py on llama_gqa, fp32 and fp16, blocks of 16
#      and a pool smaller than the batch's full sequences: logits at every
#      position, 48 greedy tokens, a batch of two prompts);
#   3. decode ms/token, contiguous against paged, on the same engine shape
#      (sits-bench, batch 1, 8 and 32 at a 512-token context);
#   4. serving, contiguous against paged (bench/serve_load.py against
#      sits-serve, 32 slots of 2048 tokens): throughput, TTFT and ITL at 1,
#      8 and 32 streams, and TTFT of requests sharing a 1024-token prefix
#      with the prefix cache off and on (copies for the contiguous engine,
#      shared blocks for the paged one).
#
# Here, before the call (the sitsc carried must be one that knows
# --kv-layout): bench/device/prepare.sh, then .device-pack/device.tar.xz
# (bench/device/pack.sh makes it, with base engines this script does not
# use; `mkdir -p .device-pack && tar -cJf .device-pack/device.tar.xz
# .device` is enough), and bench/device/prepare-serve.sh. Call with carry
# [".device-pack", ".device-serve"] and timeout_s 600. $OUT gets the logs
# (paged-kv.log, the summary) and the loads' JSON in loads.tar.gz.
set -uo pipefail
NAME=paged-kv
. bench/device/serve-env.sh
status=0
say "$(nvidia-smi -L | head -1)"
build_tools SitsRuntimeGpuTest sits-serve sits-bench sits-score || exit 1
say "built"

# 1. The Session on a GPU.
"$bin/SitsRuntimeGpuTest" >"$FINAL/gtest.log" 2>&1 || status=1
say "gtests: $(grep -E '^\[  (PASSED|FAILED) ' "$FINAL/gtest.log" | tr '\n' ' ')"

# sits-serve over contiguous and paged engines through the openai client
# (test/serve/test_serve_gpu.py; the wheels as serve-gpu-tests.sh takes
# them), sits-exec from .device.
if ls "$data"/wheels/*.whl >/dev/null 2>&1 &&
   python3 -m pip install -q --no-index --no-deps --target "$W/py" \
     "$data"/wheels/*.whl >"$FINAL/pip.log" 2>&1; then
  PYTHONPATH=$W/py SITS_REQUIRE_GPU=1 SITS_BIN_DIR=$bin python3 -m pytest -q \
    -rs -p no:cacheprovider test/serve/test_serve_gpu.py \
    >"$FINAL/pytest.log" 2>&1 || status=1
  say "test_serve_gpu.py: $(tail -1 "$FINAL/pytest.log")"
else
  say "no openai wheels in .device-serve/wheels: test_serve_gpu.py not run"
fi

# 2. The generated paged kernels against PyTorch.
python3 test/gpu/check_models.py --sitsc sitsc --runner "$bin/sits-score" \
  --target sm_90a --work "$W/models" --dtypes fp32,fp16 \
  --sitsc-arg=--kv-layout=paged --sitsc-arg=--kv-block-tokens=16 \
  --sitsc-arg=--kv-pool-blocks=20 test/models/llama_gqa \
  >"$FINAL/models.log" 2>&1 || status=1
say "check_models (paged): $(tail -1 "$FINAL/models.log")"

# The imported exports (test/models/exports) as GPU engines: the Optimum
# past-key/value export and the GenAI builder's fp32 graph in fp32 give
# llama_gqa's 48 greedy tokens; the builder's int4 graph (its MatMulNBits
# levels kept) gives onnxruntime's tokens on the same quantized graph.
check_export() { # folder, expected-tokens file, sitsc options...
  local folder=$1 expected=$2; shift 2
  local name; name=$(basename "$folder")
  sitsc "test/models/exports/$folder/model.onnx" --max-seq-len=64 \
    --max-batch=1 -o "$W/$name.sits" "$@" >>"$FINAL/sitsc.log" 2>&1 ||
    { say "export $name: sitsc FAILED"; status=1; return; }
  local prompt want got
  prompt=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['prompt'])))" "$expected")
  want=$(python3 -c "import json,sys; print(' '.join(map(str, json.load(open(sys.argv[1]))['greedy'])))" "$expected")
  got=$("$bin/sits-score" "$W/$name.sits" generate --tokens "$prompt" \
    --max-new-tokens 48 2>>"$FINAL/sitsc.log" | sed -n 's/^tokens\[0\]: //p')
  if [ "$got" = "$want" ]; then say "export $name on the GPU: 48/48 tokens"
  else say "export $name on the GPU: MISMATCH got '$got'"; status=1; fi
}
check_export optimum test/models/llama_gqa/greedy.json --dtype=fp32
check_export genai_fp32 test/models/llama_gqa/greedy.json --dtype=fp32
check_export genai_int4 test/models/exports/genai_int4/greedy_ort.json

# 3 and 4 on one engine shape: llama_gqa fp16, 32 slots of 2048 tokens.
compile() { # name, sitsc options...
  local name=$1; shift
  sitsc test/models/llama_gqa/model.onnx --tokenizer="$data/tok" \
    --max-seq-len=2048 --max-batch=32 -o "$W/$name.sits" "$@" \
    >>"$FINAL/sitsc.log" 2>&1 || { say "sitsc $name FAILED"; exit 1; }
}
compile contiguous
compile paged --kv-layout=paged
for layout in contiguous paged; do
  "$bin/sits-bench" "$W/$layout.sits" --batch 1,8,32 --context 512 \
    --new-tokens 128 --json "$FINAL/bench-$layout.json" \
    >"$W/bench-$layout.log" 2>&1 || status=1
  say "sits-bench $layout: $(grep -E '^ *[0-9]' "$W/bench-$layout.log" | head -3 | tr -s ' ' | tr '\n' ';')"
done

SERVE_MODEL=gqa LOAD_JSON_DIR=$W
. bench/device/serve-load.sh
for layout in contiguous paged; do
  SERVE_ENGINE=$W/$layout.sits
  start_server
  load "$layout-warmup" --max-seconds 120 --requests 8 --concurrency 8 --prompt-len 64,64 \
    --output-len 16,16 >/dev/null
  load "$layout-c1" --max-seconds 120 --requests 16 --concurrency 1 --prompt-len 128,1024 \
    --output-len 64,128
  load "$layout-c8" --max-seconds 120 --requests 64 --concurrency 8 --prompt-len 128,1024 \
    --output-len 64,128
  load "$layout-c32" --max-seconds 120 --requests 128 --concurrency 32 --prompt-len 128,1024 \
    --output-len 64,128
  load "$layout-prefix-off" --max-seconds 120 --requests 32 --concurrency 4 --shared-prefix 1024 \
    --prompt-len 32,64 --output-len 16,16
  stop_server
  start_server --prefix-cache-blocks=256
  load "$layout-prefix-warm" --max-seconds 120 --requests 1 --concurrency 1 --shared-prefix 1024 \
    --prompt-len 32,32 --output-len 4,4 >/dev/null
  load "$layout-prefix-on" --max-seconds 120 --requests 32 --concurrency 4 --shared-prefix 1024 \
    --prompt-len 32,64 --output-len 16,16
  curl -s "http://127.0.0.1:$port/metrics" |
    grep -E '^sits_prefix_cache_(hit_rate|blocks)|^sits_kv_blocks' | tee -a "$FINAL/$NAME.log"
  stop_server
done
grep -h "prefix cache of" "$FINAL/server.err" | tee -a "$FINAL/$NAME.log"
# At most 8 files come back: the loads in one.
tar -czf "$FINAL/loads.tar.gz" -C "$W" $(cd "$W" && ls load-*.json)
say "done: exit $status"
exit $status
