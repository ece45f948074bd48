#!/usr/bin/env bash
# One device call for the persistent decode kernel (sitsc
# --decode-kernels=persistent), then the runtime's GPU tests:
#   1. the engines: llama_gqa (test/models) and the TinyLlama-1.1B shape
#      (random fp16 weights, exported by bench/llama_bench.py), each compiled
#      once with --decode-kernels=persistent: the engine carries both the
#      persistent kernels and the graph-mode decode, so
#      --no-persistent-decode runs the same weights the other way. The
#      TinyLlama shape on 264 blocks (two per SM), and with BLOCKS_132=1
#      also on the default 132.
#   2. correctness: greedy tokens of the persistent steps against the
#      graph-mode steps (sits-run, batch 1 and 8, 96 new tokens).
#   3. speed: sits-bench at batch 1, 2, 4, 8, context 32 and 1024, 128 new
#      tokens, persistent and graph mode one after the other.
#   4. the TinyLlama shape's persistent step by task: an engine of sitsc
#      --persistent-trace, sits-bench --persistent-trace (trace-tinyllama-trace.json).
#   4b. GRAPH_NCU=1: the same TinyLlama engine's graph-mode decode kernels
#      of attention and gate/up under Nsight Compute (batch 1, two decode
#      steps; bench/device/ncu_summary.py): what a graph-mode kernel takes
#      against the persistent task's tiles in step 4.
#   5. RUN_TESTS=1 (default): bench/device/runtime-gpu-tests.sh, which
#      includes test/runtime/persistent-decode-gpu.test.
# With .device/sitsc-alt (another build of sitsc, e.g. with a changed
# persistent.cuh), the TinyLlama engines are made by it too (NAME-alt) and
# steps 2-4 run on them as well. ONLY_TINYLLAMA=1 leaves llama_gqa out.
# Here, before the call: bench/device/prepare.sh, `rm -rf .device/models`,
# `tar -cJf .device-pack/device.tar.xz .device`; carry [".device-pack",
# ".device-serve"]. $OUT gets persistent.log and the logs of each step.
set -uo pipefail
NAME=persistent
. bench/device/serve-env.sh
archive_on_exit
say "$(nvidia-smi -L | head -1)"
build_tools sits-run sits-bench &
build_pid=$!

export_tinyllama && say "exported"

compile() { # NAME MODEL [SITSC OPTION...]
  local log=$FINAL/sitsc-$1.log name=$1 model=$2
  shift 2
  if sitsc "$model" -o "$W/$name.sits" --force --dtype=fp16 --max-batch=8 \
       --max-seq-len=2048 --decode-kernels=persistent "$@" >"$log" 2>&1; then
    sitsc --inspect "$W/$name.sits" >"$FINAL/inspect-$name.txt" 2>&1
    say "compiled $name: $(grep -iE 'persistent' "$FINAL/inspect-$name.txt" | head -3 | tr '\n' ';')"
  else
    say "sitsc $name FAILED: $(tail -3 "$log" | tr '\n' ' ')"
    return 1
  fi
}
models=()
traced=()
[ "${ONLY_TINYLLAMA:-0}" = 1 ] ||
  { compile gqa test/models/llama_gqa/model.onnx && models+=(gqa); }
variants=("")
[ -x .device/sitsc-alt ] && variants+=(-alt)
if [ -f "$tl/onnx/model.onnx" ]; then
  for v in "${variants[@]}"; do
    [ -n "$v" ] && sitsc() { .device/sitsc-alt "$@"; }
    [ "${BLOCKS_132:-0}" = 1 ] && compile "tinyllama$v" "$tl/onnx/model.onnx" && models+=("tinyllama$v")
    # Two blocks per SM (the kernel's registers allow it).
    compile "tinyllama-264$v" "$tl/onnx/model.onnx" --persistent-blocks=264 && models+=("tinyllama-264$v")
    compile "tinyllama-trace$v" "$tl/onnx/model.onnx" --persistent-blocks=264 --persistent-trace &&
      traced+=("tinyllama-trace$v")
  done
  unset -f sitsc
fi
wait "$build_pid" || exit 1 # build_tools said why
bin=$W/build/bin

for m in "${models[@]}"; do
  for batch in 1 8; do
    for mode in persistent graph; do
      flag=()
      [ $mode = graph ] && flag=(--no-persistent-decode)
      timeout 120 "$bin/sits-run" "$W/$m.sits" --prompt-ids 1,2,3,4,5,6,7,8,9,10,11 \
        --max-new-tokens 96 --batch $batch --ignore-eos "${flag[@]}" \
        >"$FINAL/run-$m-b$batch-$mode.txt" 2>&1
      say "sits-run $m batch $batch $mode: exit $? $(grep '^decode:' "$FINAL/run-$m-b$batch-$mode.txt")"
    done
    if diff <(grep '^tokens' "$FINAL/run-$m-b$batch-persistent.txt") \
            <(grep '^tokens' "$FINAL/run-$m-b$batch-graph.txt") >/dev/null; then
      say "$m batch $batch: tokens IDENTICAL"
    else
      say "$m batch $batch: tokens DIFFER"
    fi
  done
  for mode in persistent graph; do
    flag=()
    [ $mode = graph ] && flag=(--no-persistent-decode)
    timeout 240 "$bin/sits-bench" "$W/$m.sits" --batch 1,2,4,8 --context 32,1024 \
      --new-tokens 128 --repeats 3 "${flag[@]}" --json "$FINAL/bench-$m-$mode.json" \
      >"$FINAL/bench-$m-$mode.log" 2>&1
    say "sits-bench $m $mode (exit $?):"
    grep -E '^ *[0-9]' "$FINAL/bench-$m-$mode.log" | tee -a "$FINAL/$NAME.log"
  done
done

# Where a persistent step's time goes: each task's tiles (sits-bench
# --persistent-trace on the traced engine).
for m in "${traced[@]}"; do
  timeout 120 "$bin/sits-bench" "$W/$m.sits" --batch 1,8 --context 32,1024 \
    --new-tokens 32 --repeats 1 --persistent-trace "$FINAL/trace-$m.json" \
    >"$FINAL/bench-$m.log" 2>&1
  say "$m (exit $?):"
  grep -E '^ *[0-9]|persistent step' "$FINAL/bench-$m.log" | tee -a "$FINAL/$NAME.log"
done

if [ "${GRAPH_NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
  for m in "${models[@]}"; do
    case $m in tinyllama-264*) ;; *) continue ;; esac
    timeout 150 ncu --clock-control none -k 'regex:attention_decode|gemv_glu' \
      --launch-count 88 --section SpeedOfLight --section LaunchStats \
      --section Occupancy --csv --page details \
      "$bin/sits-run" "$W/$m.sits" --prompt-ids 1,2,3,4,5,6,7,8,9,10,11 \
      --max-new-tokens 3 --batch 1 --ignore-eos --no-persistent-decode \
      >"$FINAL/ncu-$m-graph.csv" 2>"$FINAL/ncu-$m-graph.err"
    say "ncu $m graph: exit $? $(wc -l <"$FINAL/ncu-$m-graph.csv") lines"
  done
  python3 bench/device/ncu_summary.py "$FINAL"/ncu-*-graph.csv | tee -a "$FINAL/$NAME.log"
fi

if [ "${RUN_TESTS:-1}" = 1 ]; then
  say "runtime GPU tests"
  OUT=$FINAL/tests bench/device/runtime-gpu-tests.sh >"$FINAL/runtime-gpu-tests.out" 2>&1
  say "runtime GPU tests: exit $? $(grep -E 'gtest|python|lit test|run-gpu-tests:' "$FINAL/runtime-gpu-tests.out" | tail -6 | tr '\n' ';')"
fi
say "done"
