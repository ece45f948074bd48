#!/usr/bin/env bash
# One device call: what prefill_few (steps of at most 32 token rows on the
# decode GEMVs) changes on the Llama-3-8B shape (random fp16 weights), over
# the paged engine of serve-table.sh (64 sequences of 2560 tokens) built
# twice: as sitsc builds it, and with --few-row-prefill-tokens=0 (every
# prefill step on the GEMM).
#   0. test/gpu/check_models.py on llama_gqa and qwen2 (fp16, bf16), whose
#      prefill steps all run prefill_few.
#   1. sits-bench's prefill of 8 to 64 tokens at batch 1 (prefill_few up to
#      32) and the decode step at batch 1 and 8, on both engines.
#   2. sits-serve on both engines: streamed requests (prompts 128-2048,
#      128-512 new tokens, Poisson arrivals) at 8 and 32 streams
#      (SECONDS_PER_LEVEL, default 20, each), and with --sla-p99-token-ms at
#      1.5x the batch-1 step at 8 and 32 streams (the batch limit, the
#      prefill budget and the window p99 sampled every 0.5 s).
# Here, before the call: as for serve-table.sh; carry [".device-pack",
# ".device-serve"]. $OUT gets few-rows.log, build.log and server.err, and
# the rest in one archive at the end (kept apart until then, so that a call
# cut short still brings the log back: at most 8 files come back).
set -uo pipefail
NAME=few-rows
. bench/device/serve-env.sh
say "$(nvidia-smi -L | head -1)"
FILES=$W/files
LOAD_JSON_DIR=$FILES
mkdir -p "$FILES"
seconds=${SECONDS_PER_LEVEL:-20}
build_tools sits-serve sits-bench sits-score &
build_pid=$!

export_8b "$FILES" || exit 1
wait "$build_pid" || exit 1 # build_tools said why
bin=$W/build/bin # set by build_tools, but in its background subshell
# Numerics of prefill_few on the GPU while the 8B engines compile: the test
# models' engines (4 sequences, prefill chunks of 8: every prefill step has
# at most 32 rows) against PyTorch's logits and greedy tokens.
python3 test/gpu/check_models.py --sitsc "$(pwd)/.device/sitsc" \
  --runner "$bin/sits-score" --work "$W/models" --dtypes fp16,bf16 \
  test/models/llama_gqa test/models/qwen2 >"$FILES/check-models.log" 2>&1 &
check_pid=$!
declare -A engines=([few]=$W/8b-few.sits [gemm]=$W/8b-gemm.sits)
for kind in few gemm; do
  extra=()
  [ "$kind" = gemm ] && extra=(--few-row-prefill-tokens=0)
  sitsc "$work8b/onnx/model.onnx" -o "${engines[$kind]}" --force \
    --tokenizer="$data/tok" --max-batch=64 --max-seq-len=2560 \
    --kv-layout=paged "${extra[@]}" >"$FILES/sitsc-$kind.log" 2>&1 ||
    { say "sitsc $kind FAILED"; tail -5 "$FILES/sitsc-$kind.log"; exit 1; }
  say "compiled $kind: $(grep -o 'kernels .*' "$FILES/sitsc-$kind.log" | head -1)"
done
wait "$check_pid"
say "check_models (exit $?): $(tail -1 "$FILES/check-models.log")"

for kind in few gemm; do
  "$bin/sits-bench" "${engines[$kind]}" --batch 1 --context 8,16,32,64 \
    --new-tokens 8 --json "$FILES/small-$kind.json" >"$FILES/small-$kind.log" 2>&1
  say "$kind small prefills: $(grep -E '^ *[0-9]' "$FILES/small-$kind.log" | tr -s ' ' | tr '\n' ';')"
done
"$bin/sits-bench" "${engines[few]}" --batch 1,8 --context 512 --new-tokens 64 \
  --json "$FILES/decode.json" >"$FILES/decode.log" 2>&1
say "decode: $(grep -E '^ *[0-9]' "$FILES/decode.log" | tr -s ' ' | tr '\n' ';')"
b1=$(python3 -c "import json; print([r['decode_ms_per_token'] for r in json.load(open('$FILES/decode.json'))['results'] if r['batch'] == 1][0])")
sla=$(python3 -c "print(round(1.5 * $b1, 3))")
say "SLA target: $sla ms (1.5 x sits-bench's batch-1 $b1 ms/step)"

SERVE_MAX_QUEUE=512
. bench/device/serve-load.sh
for kind in few gemm; do
  SERVE_ENGINE=${engines[$kind]}
  start_server
  load "$kind-warmup" --requests 8 --concurrency 8 --prompt-len 64,64 \
    --output-len 16,16 --max-seconds 30 >/dev/null
  for c in 8 32; do
    load "$kind-c$c" --requests 256 --concurrency "$c" --rate "$c" \
      --prompt-len 128,2048 --output-len 128,512 --max-seconds "$seconds"
  done
  stop_server
  start_server --sla-p99-token-ms="$sla" --max-prefill-chunk=512 \
    --max-step-prefill-tokens=512
  (while sleep 0.5; do
    echo "$(date +%s.%N) $(curl -s "http://127.0.0.1:$port/metrics" |
      grep -E '^sits_(admitted_batch_limit|step_prefill_budget_tokens|sla_window_p99_seconds|running_requests) ' |
      tr '\n' ' ')"
  done >"$FILES/sla-trace-$kind.txt" 2>/dev/null) &
  trace_pid=$!
  for c in 8 32; do
    load "$kind-sla-c$c" --requests 256 --concurrency "$c" --rate "$c" \
      --prompt-len 128,2048 --output-len 128,512 --max-seconds "$seconds"
    curl -s "http://127.0.0.1:$port/metrics" |
      grep -E '^sits_admitted_batch_limit|^sits_step_prefill_budget|^sits_sla_' |
      tee -a "$FINAL/$NAME.log"
  done
  kill "$trace_pid" 2>/dev/null
  stop_server
done
tar czf "$FINAL/$NAME-files.tar.gz" -C "$FILES" .
say "done"
