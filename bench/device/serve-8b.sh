#!/usr/bin/env bash
# One device call: serving the Llama-3-8B shape (random fp16 weights) with
# sits-serve against PyTorch's static batches on the same GPU.
#
# 1. bench/llama_bench.py makes the model, exports it (fp16 graph) and,
#    while torch.compile's gpt-fast style decoder runs static batches of
#    1, 8 and 32 sequences (512-token prompts, 128 new tokens), compiles
#    the export with the carried sitsc into a 32-slot engine of 1024 tokens
#    per slot (plus one engine per extra option set, SITS_SERVE_VARIANTS:
#    "name:--opt --opt;name2:..." e.g. a paged KV cache).
# 2. sits-bench: the engine's static batches 1, 8, 32 at context 512.
# 3. sits-serve + bench/serve_load.py: streamed requests with 512-token
#    prompts and 128 new tokens at 1, 8 and 32 concurrent streams.
# Here, before the call: bench/device/prepare.sh, then pack the .device
# tools (bench/device/pack.sh), and bench/device/prepare-serve.sh; carry
# [".device-pack", ".device-serve"]. $OUT gets serve-8b.log and the JSON.
set -uo pipefail
NAME=serve-8b
. bench/device/serve-env.sh
say "$(nvidia-smi -L | head -1)"
cmake -G Ninja -S . -B "$W/build" -DCMAKE_BUILD_TYPE=Release \
  -DSITS_BUILD_COMPILER=OFF -DSITS_BUILD_TESTS=OFF \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$(pwd)/.device/deps" >"$FINAL/build.log" 2>&1 &&
  cmake --build "$W/build" -j 4 --target sits-serve sits-bench \
    >>"$FINAL/build.log" 2>&1 &
build_pid=$!

options="--max-batch=32 --max-seq-len=1024 --tokenizer=$data/tok"
python3 bench/llama_bench.py --shape llama3-8b --work "$W/8b" \
  --json "$FINAL/torch-8b.json" --export-dtype fp16 --contexts 512 \
  --batches 1,8,32 --new-tokens 128 --deadline "$(($(date +%s) + ${SITS_TORCH_SECONDS:-330}))" \
  --sitsc "$(pwd)/.device/sitsc" --engine "$W/8b-base.sits" \
  --sitsc-args "$options" >"$FINAL/llama_bench.log" 2>&1
say "torch.compile: $(python3 -c "import json; print('; '.join('B=%d %.3f ms/token %.0f tok/s' % (r['batch'], r['decode_ms_per_token'], r['decode_tokens_per_s']) for r in json.load(open('$FINAL/torch-8b.json'))['torch_compile']))")"
wait "$build_pid" || { say "build FAILED"; tail -20 "$FINAL/build.log"; exit 1; }
bin=$W/build/bin

engines=("base:$W/8b-base.sits")
IFS=';' read -ra variants <<<"${SITS_SERVE_VARIANTS:-}"
for variant in "${variants[@]}"; do
  [ -n "$variant" ] || continue
  name=${variant%%:*}
  sitsc "$W/8b/onnx/model.onnx" -o "$W/8b-$name.sits" --force $options \
    ${variant#*:} >"$FINAL/sitsc-$name.log" 2>&1 &&
    engines+=("$name:$W/8b-$name.sits") || say "sitsc $name FAILED"
done

for entry in "${engines[@]}"; do
  name=${entry%%:*}
  engine=${entry#*:}
  [ -f "$engine" ] || { say "$name: no engine"; continue; }
  "$bin/sits-bench" "$engine" --batch 1,8,32 --context 512 --new-tokens 128 \
    --json "$FINAL/sits-bench-$name.json" >"$FINAL/sits-bench-$name.log" 2>&1
  say "$name sits-bench: $(grep -E '^ *[0-9]' "$FINAL/sits-bench-$name.log" | head -3 | tr -s ' ' | tr '\n' ';')"
  "$bin/sits-serve" "$engine" --port=0 --model-name=m --max-queue=256 \
    >"$W/server.out" 2>>"$FINAL/server-$name.err" &
  server_pid=$!
  port=""
  for _ in $(seq 300); do
    port=$(grep -o '127.0.0.1:[0-9]*' "$W/server.out" | head -1 | cut -d: -f2)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { say "$name: server did not start"; kill "$server_pid"; continue; }
  for c in 1 8 32; do
    python3 bench/serve_load.py --url "http://127.0.0.1:$port" --model m \
      --vocab 512 --label "$name-c$c" --json "$FINAL/load-$name-c$c.json" \
      --max-seconds 60 --requests $((c * 2)) --concurrency "$c" \
      --prompt-len 512,512 --output-len 128,128 | tee -a "$FINAL/$NAME.log"
  done
  kill -TERM "$server_pid"
  wait "$server_pid"
done
say "done"
