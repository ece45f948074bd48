#!/usr/bin/env bash
# One device call for serving numbers (bench/serve_load.py against
# sits-serve on this machine's GPU): output tokens/s, TTFT and inter-token
# latency at 1, 8 and 32 concurrent streams; TTFT of requests sharing a
# 1024-token prefix with and without the prefix cache; the p99 inter-token
# latency at 32 streams under --sla-p99-token-ms of 1.5x the one-stream
# latency; and sits-bench's batch-1 ms/token on the same engine.
#
# The engine: llama_gqa (the small test model) in fp16 with the Llama-3-shaped
# test tokenizer, 32 slots of 2048 tokens, compiled here by the carried sitsc.
# Here, before the call: as for bench/device/serve-gpu-tests.sh (carry
# [".device-pack", ".device-serve"]). $OUT gets serve-bench.log and the JSON.
set -uo pipefail
NAME=serve-bench
. bench/device/serve-env.sh
say "$(nvidia-smi -L | head -1)"
build_tools sits-serve sits-bench || exit 1
engine=$W/gqa.sits
sitsc test/models/llama_gqa/model.onnx --tokenizer="$data/tok" \
  --max-seq-len=2048 --max-batch=32 -o "$engine" >/dev/null 2>>"$FINAL/serve-bench.log" ||
  { say "sitsc FAILED"; exit 1; }
"$bin/sits-bench" "$engine" --batch 1,8,32 --context 512 --new-tokens 128 \
  --json "$FINAL/sits-bench.json" >"$FINAL/sits-bench.log" 2>&1
say "sits-bench: $(grep -E '^ *[0-9]' "$FINAL/sits-bench.log" | head -3 | tr -s ' ' | tr '\n' ';')"

SERVE_ENGINE=$engine SERVE_MODEL=gqa
. bench/device/serve-load.sh

start_server
load warmup --max-seconds 120 --requests 8 --concurrency 8 --prompt-len 64,64 --output-len 16,16 >/dev/null
load c1 --max-seconds 120 --requests 16 --concurrency 1 --prompt-len 128,1024 --output-len 64,128
load c8 --max-seconds 120 --requests 64 --concurrency 8 --prompt-len 128,1024 --output-len 64,128
load c32 --max-seconds 120 --requests 128 --concurrency 32 --prompt-len 128,1024 --output-len 64,128
load prefix-off --max-seconds 120 --requests 32 --concurrency 4 --shared-prefix 1024 --prompt-len 32,64 --output-len 16,16
stop_server
itl=$(python3 -c "import json; print(json.load(open('$FINAL/load-c1.json'))['itl_ms_p50'])")
sla=$(python3 -c "print(round(1.5 * $itl, 3))")
start_server --prefix-cache-blocks=4096
load prefix-warm --max-seconds 120 --requests 1 --concurrency 1 --shared-prefix 1024 --prompt-len 32,32 --output-len 4,4 >/dev/null
load prefix-on --max-seconds 120 --requests 32 --concurrency 4 --shared-prefix 1024 --prompt-len 32,64 --output-len 16,16
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^sits_prefix_cache_(hit_rate|blocks)|^sits_kv_blocks' | tee -a "$FINAL/serve-bench.log"
stop_server
say "SLA target: $sla ms (1.5 x the one-stream ITL p50 $itl ms)"
start_server --sla-p99-token-ms="$sla"
load sla-c32 --max-seconds 120 --requests 128 --concurrency 32 --prompt-len 128,1024 --output-len 64,128
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^sits_admitted_batch_limit|^sits_sla_window' | tee -a "$FINAL/serve-bench.log"
stop_server
say "done"
