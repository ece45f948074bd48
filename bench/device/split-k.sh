#!/usr/bin/env bash
# One device call: what splitting K in the tensor-core prefill GEMM changes
# on the Llama-3-8B shape (random fp16 weights), over the paged engine of
# serve-table.sh (64 sequences of 2560 tokens) built twice: as sitsc builds
# it (k_splits chosen per layer) and with --gemm-k-splits=1 (never split).
#   0. micro/gemm_split.cu: the kernel alone with kSplitK on and off on the
#      8B o_proj shape, 16 to 4096 tokens, 1 to 8 splits (while the export
#      runs); test/gpu/check_models.py on llama_gqa and qwen2 (fp16, bf16) with
#      --gemm-k-splits=2 (their prefill GEMMs split, partial sums and
#      counters on the GPU) against PyTorch's logits and greedy tokens.
#   1. sits-bench's prefill at batch 1 of 64 to 2048 tokens and at batch 8
#      of 128, and the decode step at batch 1, on both engines.
#   2. sits-serve: streamed requests (prompts 128-2048, 128-512 new tokens,
#      Poisson arrivals) at 1, 8, 32 and 64 streams on the split engine and
#      at 32 on the other (SECONDS_PER_LEVEL, default 20, each).
#   3. With SLA_SECONDS set: --sla-p99-token-ms at 1.5x the batch-1 step
#      while the streams rise 1, 8, 16, 32, 64 (SLA_SECONDS each), the
#      batch limit, the prefill budget, the window p99 and the tail's bulk
#      steps sampled every 0.5 s (SLA_SERVE_ARGS: more sits-serve options
#      for it).
# Here, before the call: as for serve-table.sh; carry [".device-pack",
# ".device-serve"]. $OUT gets split-k.log, build.log and server.err, and
# the rest in one archive when the script ends (also by a signal: at most 8
# files come back).
set -uo pipefail
NAME=split-k
. bench/device/serve-env.sh
say "$(nvidia-smi -L | head -1)"
FILES=$W/files
LOAD_JSON_DIR=$FILES
mkdir -p "$FILES"
# The archive also when the call's timeout ends the script.
trap 'tar czf "$FINAL/$NAME-files.tar.gz" -C "$FILES" .' EXIT
trap 'say "stopped by a signal"; exit 143' TERM INT
seconds=${SECONDS_PER_LEVEL:-20}
build_tools sits-serve sits-bench sits-score &
build_pid=$!
# The kernel alone (micro/gemm_split.cu), while the export runs on the CPU.
mkdir -p "$W/inc/sits"
cp backends/cuda/kernels/*.cuh "$W/inc/sits/"
(if /usr/local/cuda/bin/nvcc -arch=sm_90a -std=c++17 -O3 -I "$W/inc" \
  -o "$W/gemm_split" bench/device/micro/gemm_split.cu >"$W/nvcc.log" 2>&1; then
  "$W/gemm_split" >"$FILES/gemm-split.txt" 2>&1
else
  head -5 "$W/nvcc.log" >"$FILES/gemm-split.txt"
fi) &
micro_pid=$!

export_8b "$FILES" || exit 1
wait "$micro_pid"
say "gemm_split (us a launch): $(tr -s ' ' <"$FILES/gemm-split.txt" | tr '\n' ';')"
wait "$build_pid" || exit 1 # build_tools said why
bin=$W/build/bin # set by build_tools, but in its background subshell
python3 test/gpu/check_models.py --sitsc "$(pwd)/.device/sitsc" \
  --runner "$bin/sits-score" --work "$W/models" --dtypes fp16,bf16 \
  --sitsc-arg=--gemm-k-splits=2 test/models/llama_gqa test/models/qwen2 \
  >"$FILES/check-models.log" 2>&1 &
check_pid=$!
declare -A engines=([split]=$W/8b-split.sits [whole]=$W/8b-whole.sits)
for kind in split whole; do
  extra=()
  [ "$kind" = whole ] && extra=(--gemm-k-splits=1)
  sitsc "$work8b/onnx/model.onnx" -o "${engines[$kind]}" --force \
    --tokenizer="$data/tok" --max-batch=64 --max-seq-len=2560 \
    --kv-layout=paged --audit="$FILES/audit-$kind.json" "${extra[@]}" \
    >"$FILES/sitsc-$kind.log" 2>&1 ||
    { say "sitsc $kind FAILED"; tail -5 "$FILES/sitsc-$kind.log"; exit 1; }
done
say "split GEMM launches: $(python3 -c "import json; r = json.load(open('$FILES/audit-split.json')); print([p['counters'].get('gemm_split_k') for p in r['passes'] if p['name'] == 'kernel-select-linear-kernels'])")"
wait "$check_pid"
say "check_models (exit $?): $(tail -1 "$FILES/check-models.log")"

for kind in split whole; do
  "$bin/sits-bench" "${engines[$kind]}" --batch 1 --context 48,64,128,256,512,2048 \
    --new-tokens 4 --json "$FILES/prefill-$kind.json" >"$FILES/prefill-$kind.log" 2>&1
  say "$kind prefill b1: $(grep -E '^ *[0-9]' "$FILES/prefill-$kind.log" | tr -s ' ' | tr '\n' ';')"
  "$bin/sits-bench" "${engines[$kind]}" --batch 8 --context 128 \
    --new-tokens 4 --json "$FILES/prefill8-$kind.json" >"$FILES/prefill8-$kind.log" 2>&1
  say "$kind prefill b8: $(grep -E '^ *[0-9]' "$FILES/prefill8-$kind.log" | tr -s ' ' | tr '\n' ';')"
done
"$bin/sits-bench" "${engines[split]}" --batch 1 --context 512 --new-tokens 64 \
  --json "$FILES/decode.json" >"$FILES/decode.log" 2>&1
say "decode: $(grep -E '^ *[0-9]' "$FILES/decode.log" | tr -s ' ' | tr '\n' ';')"
b1=$(python3 -c "import json; print([r['decode_ms_per_token'] for r in json.load(open('$FILES/decode.json'))['results'] if r['batch'] == 1][0])")

SERVE_MAX_QUEUE=512
. bench/device/serve-load.sh
serve_levels() { # KIND LEVELS...
  local kind=$1 c
  shift
  SERVE_ENGINE=${engines[$kind]}
  start_server
  load "$kind-warmup" --requests 8 --concurrency 8 --prompt-len 64,64 \
    --output-len 16,16 --max-seconds 30 >/dev/null
  for c in "$@"; do
    load "$kind-c$c" --requests 256 --concurrency "$c" --rate "$c" \
      --prompt-len 128,2048 --output-len 128,512 --max-seconds "$seconds"
  done
  stop_server
}
serve_levels split 1 8 32 64
serve_levels whole 32

if [ -n "${SLA_SECONDS:-}" ]; then
  sla=$(python3 -c "print(round(1.5 * $b1, 3))")
  say "SLA target: $sla ms (1.5 x sits-bench's batch-1 $b1 ms/step)"
  SERVE_ENGINE=${engines[split]}
  start_server --sla-p99-token-ms="$sla" ${SLA_SERVE_ARGS:-}
  (while sleep 0.5; do
    echo "$(date +%s.%N) $(curl -s "http://127.0.0.1:$port/metrics" |
      grep -E '^sits_(admitted_batch_limit|step_prefill_budget_tokens|sla_window_p99_seconds|sla_tail_share|sla_bulk_steps_total|sla_prompt_rows_off|running_requests) ' |
      tr '\n' ' ')"
  done >"$FILES/sla-trace.txt" 2>/dev/null) &
  trace_pid=$!
  for c in 1 8 16 32 64; do
    load "sla-c$c" --requests 256 --concurrency "$c" --rate "$c" \
      --prompt-len 128,2048 --output-len 128,512 --max-seconds "$SLA_SECONDS"
    curl -s "http://127.0.0.1:$port/metrics" |
      grep -E '^sits_admitted_batch_limit|^sits_step_prefill_budget|^sits_sla_' |
      tee -a "$FINAL/$NAME.log"
  done
  kill "$trace_pid" 2>/dev/null
  stop_server
fi
say "done"
