#!/usr/bin/env bash
# One device call for the quantized GEMVs' f16 operands (issue 8's int4
# weights gate), from the repository root on the GPU machine:
#   1. the GPU model tests with int8 and int4 weights: llama_gqa and qwen2
#      (fp16 too), and a Llama with an intermediate of whole chunks
#      (test/tools/enlarge_llama.py, as emulate-quant-operands.test), whose
#      gate/up GEMV writes the down projection's operands;
#   2. the Llama-3-8B shape, fp16 against int4 weights, batches 1 and 8 at
#      a 32-token prompt, with the kernels of a step profiled
#      (bench/run.sh; about 4 minutes).
#
# Here, before the call: bench/device/prepare.sh (the static sitsc and
# sits-exec in .device/); then run `bench/device/int4-operands.sh` with
# carry [".device"]. The device tool returns at most 8 files: $OUT gets the
# two model-test logs, the bench's summary.md and everything in
# int4-operands.tar.gz; the last lines printed are the verdicts and the
# INT4 line of the report (int4 / fp16 at batch 1; the target is 0.45x).
set -uo pipefail
FINAL=${OUT:-$(pwd)/bench/out}
OUT=/tmp/int4-operands
mkdir -p "$FINAL" "$OUT"
export SITSC=${SITSC:-$(pwd)/.device/sitsc}
export SITS_EXEC=${SITS_EXEC:-$(pwd)/.device/sits-exec}
verdicts=()

python3 test/tools/enlarge_llama.py /tmp/llama_i384 --graph fp32 --scale 1 \
  --intermediate 384 --vocab 512 --values normal --test-data
MODELS="test/models/llama_gqa test/models/qwen2" DTYPES=fp16 \
  WEIGHTS=fp16,int8,int4 TVC=0 KV=0 \
  test/gpu/run-model-tests.sh /tmp/models-a 2>&1 | tee "$OUT/model-tests.log"
verdicts+=("models llama_gqa qwen2: exit ${PIPESTATUS[0]}")
MODELS=/tmp/llama_i384 WEIGHTS=int8,int4 TVC=0 KV=0 \
  test/gpu/run-model-tests.sh /tmp/models-b 2>&1 |
  tee "$OUT/model-tests-i384.log"
verdicts+=("models llama_i384: exit ${PIPESTATUS[0]}")

SITS_BENCH_WEIGHTS=fp16,int4 SITS_BENCH_BATCHES=1,8 SITS_BENCH_CONTEXTS=32 \
  SITS_BENCH_INT4_CONTEXTS=32 SITS_BENCH_INT4_BATCHES=1,8 \
  SITS_BENCH_PROFILE=1 SITS_BENCH_PROFILE_CONTEXTS=32 SITS_BENCH_BUDGET=1 \
  OUT=$OUT/bench bench/run.sh llama3-8b >/dev/null 2>&1
verdicts+=("bench: exit $?")

tar czf "$FINAL/int4-operands.tar.gz" -C "$(dirname "$OUT")" \
  "$(basename "$OUT")"
cp "$OUT"/model-tests*.log "$OUT/bench/summary.md" "$FINAL/" 2>/dev/null
printf '%s\n' "${verdicts[@]}"
grep -h "model/dtype runs passed" "$OUT"/model-tests*.log
grep -h "^INT4\|^SUMMARY" "$OUT/bench/bench.log"
