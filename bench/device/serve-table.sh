#!/usr/bin/env bash
# One device call: sits-serve's table on the Llama-3-8B shape (random fp16
# weights), over a paged engine of 64 sequences of 2560 tokens.
#
# PARTS (default "table prefix"; "sla" too where time allows):
#   gtests  the Session::step GPU tests (SessionStepTest,
#           PagedSessionTest, SessionBlocksTest), built beside the tools,
#           after the measurements.
#   table   streamed requests with prompts of 128-2048 tokens and 128-512 new
#           tokens, Poisson arrivals at c per second (more than the server
#           completes, so the c streams stay busy) and at most c in flight,
#           c = 1, 8, 32, 64 or TABLE_LEVELS (each level stops after SECONDS_PER_LEVEL,
#           default 60, or 256 requests); sits-bench batch 1 and 64 on the
#           engine.
#   prefix  TTFT of requests sharing a 1024-token prefix, prefix cache off
#           and on.
#   sla     --sla-p99-token-ms at 1.5x sits-bench's batch-1 ms/step while
#           the concurrency rises 1, 8, 16, 32, 64 (SLA_SECONDS, default 20,
#           each), chunks of 512 and bulk steps of up to 8192 prompt
#           tokens (SLA_SERVE_ARGS replaces these options); the batch
#           limit, the prefill budget, the window p99, the tail share, the
#           bulk steps and prompt rows off sampled every 0.5 s
#           (sla-trace.txt).
#   small   sits-bench's prefill of 8 to 64 tokens at batch 1 and 8: what a
#           packed step of few rows costs against the decode step.
#   checks  test/gpu/check_models.py on llama_gqa and qwen2 (fp16), last:
#           the engines' kernels against PyTorch's logits.
#   chunk   the table's levels CHUNK_LEVELS (default 32) again with
#           --max-prefill-chunk=CHUNK (default 512); a CHUNK over 512 needs
#           an engine compiled for it: ENGINE_ARGS=--max-prefill-tokens=CHUNK.
#   torch   bench/torch_serve.py: PyTorch (torch.compile, static batches)
#           serving the table's requests at TORCH_LEVELS (default
#           1,8,32,64), SECONDS_PER_LEVEL each, after sits-serve is done.
# After each level the log gets its steps by kind (bench/step_kinds.py:
# decode, prefill and bulk steps, their mean time and rows).
# The export is made by bench/llama_bench.py (no PyTorch timing: that is
# bench/device/token-groups.sh's), or reused from .device-work/8b when an
# earlier call on the same machine left it.
# Here, before the call: as for bench/device/token-groups.sh; carry
# [".device-pack", ".device-serve"]. $OUT gets serve-table.log and the JSON.
set -uo pipefail
NAME=serve-table
. bench/device/serve-env.sh
say "$(nvidia-smi -L | head -1)"
archive_on_exit
parts=" ${PARTS:-table prefix} "
seconds=${SECONDS_PER_LEVEL:-60}
targets="sits-serve sits-bench sits-score"
if [[ $parts == *" gtests "* ]]; then
  targets="$targets SitsRuntimeGpuTest"
fi
# $targets unquoted: one word per target.
build_tools $targets &
build_pid=$!

export_8b || exit 1
engine=$W/8b-paged.sits
sitsc "$work8b/onnx/model.onnx" -o "$engine" --force --tokenizer="$data/tok" \
  --max-batch=64 --max-seq-len=2560 --kv-layout=paged ${ENGINE_ARGS:-} \
  >"$FINAL/sitsc.log" 2>&1 || { say "sitsc FAILED"; tail -5 "$FINAL/sitsc.log"; exit 1; }
wait "$build_pid" || exit 1 # build_tools said why
bin=$W/build/bin
"$bin/sits-bench" "$engine" --batch 1,32,64 --context 512 --new-tokens 128 \
  --json "$FINAL/sits-bench.json" >"$FINAL/sits-bench.log" 2>&1
say "sits-bench: $(grep -E '^ *[0-9]' "$FINAL/sits-bench.log" | tr -s ' ' | tr '\n' ';')"
b1=$(python3 -c "import json; print([r['decode_ms_per_token'] for r in json.load(open('$FINAL/sits-bench.json'))['results'] if r['batch'] == 1][0])")

SERVE_ENGINE=$engine SERVE_MAX_QUEUE=512
. bench/device/serve-load.sh

if [[ $parts == *" table "* ]]; then
  start_server
  load warmup --requests 8 --concurrency 8 --prompt-len 64,64 --output-len 16,16 --max-seconds 30 >/dev/null
  for c in ${TABLE_LEVELS:-1 8 32 64}; do
    load "c$c" --requests 256 --concurrency "$c" --rate "$c" \
      --prompt-len 128,2048 --output-len 128,512 --max-seconds "$seconds"
  done
  curl -s "http://127.0.0.1:$port/metrics" | grep -E '^sits_kv_blocks|^sits_running|^sits_requests_preempted' | tee -a "$FINAL/$NAME.log"
  stop_server
fi
if [[ $parts == *" chunk "* ]]; then
  chunk=${CHUNK:-512}
  start_server --max-prefill-chunk="$chunk"
  for c in ${CHUNK_LEVELS:-32}; do
    load "chunk$chunk-c$c" --requests 256 --concurrency "$c" --rate "$c" \
      --prompt-len 128,2048 --output-len 128,512 --max-seconds "$seconds"
  done
  stop_server
fi
if [[ $parts == *" prefix "* ]]; then
  start_server
  load prefix-off --requests 24 --concurrency 4 --shared-prefix 1024 --prompt-len 32,64 --output-len 16,16 --max-seconds 40
  stop_server
  start_server --prefix-cache-blocks=4096
  load prefix-warm --requests 1 --concurrency 1 --shared-prefix 1024 --prompt-len 32,32 --output-len 4,4 >/dev/null
  load prefix-on --requests 24 --concurrency 4 --shared-prefix 1024 --prompt-len 32,64 --output-len 16,16 --max-seconds 40
  curl -s "http://127.0.0.1:$port/metrics" | grep -E '^sits_prefix_cache_hit_rate' | tee -a "$FINAL/$NAME.log"
  stop_server
fi
if [[ $parts == *" sla "* ]]; then
  sla=$(python3 -c "print(round(1.5 * $b1, 3))")
  say "SLA target: $sla ms (1.5 x sits-bench's batch-1 $b1 ms/step)"
  # A prompt in steps of one 512-token chunk (the engine's prefill chunk):
  # every step that prefills stalls the running streams, so a few large
  # ones leave fewer slow inter-token gaps than many small ones.
  # SLA_SERVE_ARGS: bulk steps of up to 8192 prompt tokens by default.
  start_server --sla-p99-token-ms="$sla" \
    ${SLA_SERVE_ARGS:---max-prefill-chunk=512 --max-step-prefill-tokens=8192}
  (while sleep 0.5; do
    echo "$(date +%s.%N) $(curl -s "http://127.0.0.1:$port/metrics" |
      grep -E '^sits_(admitted_batch_limit|step_prefill_budget_tokens|sla_window_p99_seconds|sla_tail_share|sla_bulk_steps_total|sla_prompt_rows_off|running_requests) ' |
      tr '\n' ' ')"
  done >"$FINAL/sla-trace.txt" 2>/dev/null) &
  trace_pid=$!
  for c in 1 8 16 32 64; do
    load "sla-c$c" --requests 256 --concurrency "$c" --rate "$c" \
      --prompt-len 128,2048 --output-len 128,512 --max-seconds "${SLA_SECONDS:-20}"
    curl -s "http://127.0.0.1:$port/metrics" | grep -E '^sits_admitted_batch_limit|^sits_step_prefill_budget|^sits_sla_' | tee -a "$FINAL/$NAME.log"
  done
  kill "$trace_pid" 2>/dev/null
  stop_server
fi
if [[ $parts == *" small "* ]]; then
  "$bin/sits-bench" "$engine" --batch 1,8 --context 8,16,32,64 --new-tokens 8 \
    --json "$FINAL/sits-bench-small.json" >"$FINAL/sits-bench-small.log" 2>&1
  say "small steps: $(grep -E '^ *[0-9]' "$FINAL/sits-bench-small.log" | tr -s ' ' | tr '\n' ';')"
fi
if [[ $parts == *" torch "* ]]; then
  python3 bench/torch_serve.py --shape llama3-8b \
    --levels "${TORCH_LEVELS:-1,8,32,64}" --requests 256 \
    --prompt-len 128,2048 --output-len 128,512 --max-seconds "$seconds" \
    --json "$FINAL/torch-serve.json" >"$FINAL/torch-serve.log" 2>&1
  say "torch_serve (exit $?): $(grep -E '^\{' "$FINAL/torch-serve.log" | tr '\n' ' ')"
fi
# The correctness checks last: the measurements above run on an idle GPU.
if [[ $parts == *" gtests "* ]]; then
  "$bin/SitsRuntimeGpuTest" \
    --gtest_filter='SessionStepTest.*:PagedSessionTest.*:SessionBlocksTest.*' \
    >"$FINAL/gtest.log" 2>&1
  say "gtests: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$FINAL/gtest.log" | tr '\n' ' ')"
fi
if [[ $parts == *" checks "* ]]; then
  python3 test/gpu/check_models.py --sitsc "$(pwd)/.device/sitsc" \
    --runner "$bin/sits-score" --work "$W/models" --dtypes fp16 \
    test/models/llama_gqa test/models/qwen2 >"$FINAL/check-models.log" 2>&1
  say "check_models (exit $?): $(tail -1 "$FINAL/check-models.log")"
fi
say "done"
