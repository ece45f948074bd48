#!/usr/bin/env bash
# One device call: where a decode step of more than 8 sequences goes.
# sits-bench gives the 8B shape 6.7 ms a step at batch 1 and 8, but 10.6 at
# 16 and 11.2 at 32 (several token groups a pass), 23.5 at 16 with one group
# a pass: this call splits such steps by kernel on the TinyLlama-1.1B shape
# (random fp16 weights, bench/llama_bench.py), where the same code runs.
#   1. three engines, --max-batch=32: token groups as max_batch needs (four)
#      with the GEMVs' inputs as 16-bit operands (the default), the same
#      with f32 inputs (--half-operands=false), and one group a pass
#      (--gemv-token-groups=1); greedy tokens of each at batch 1 and 32;
#   2. sits-bench at batch 1, 8, 16, 32, context 512, each engine;
#   3. Nsight Compute (clocks left alone) on the GEMVs of a step of batch
#      32 of the two engines with four groups: duration, memory and warp-stall sections
#      (ncu-*.csv), summed by kernel in decode-kernels.log.
# Here, before the call: bench/device/prepare.sh, `rm -rf .device/models`,
# `tar -cJf .device-pack/device.tar.xz .device`; carry [".device-pack",
# ".device-serve"].
set -uo pipefail
NAME=decode-kernels
. bench/device/serve-env.sh
archive_on_exit
say "$(nvidia-smi -L | head -1); ncu: $(command -v ncu || echo none)"
build_tools sits-run sits-bench &
build_pid=$!

export_tinyllama || exit 1
say "exported"
engines="groups f32x one"
# BASE_SITSC=NAME (a sitsc in .device, say an earlier build): a fourth
# engine, "base", compiled as "groups" by that sitsc, for an A/B of kernel
# changes in one call.
[ -n "${BASE_SITSC:-}" ] && engines="$engines base"
for engine in $engines; do
  extra=()
  compiler=sitsc
  [ $engine = one ] && extra=(--gemv-token-groups=1)
  [ $engine = f32x ] && extra=(--half-operands=false)
  [ $engine = base ] && compiler=".device/$BASE_SITSC"
  "$compiler" "$tl/onnx/model.onnx" -o "$W/$engine.sits" --force --dtype=fp16 \
    --max-batch=32 --max-seq-len=1024 --no-tokenizer "${extra[@]}" \
    >"$FINAL/sitsc-$engine.log" 2>&1 || { say "sitsc $engine FAILED"; exit 1; }
done
wait "$build_pid" || exit 1 # build_tools said why
bin=$W/build/bin
say "built"

ids=1,2,3,4,5,6,7,8,9,10,11
for batch in 1 32; do
  for engine in $engines; do
    timeout 60 "$bin/sits-run" "$W/$engine.sits" --prompt-ids $ids --batch $batch \
      --max-new-tokens 48 --ignore-eos >"$FINAL/run-$engine-b$batch.txt" 2>&1
    grep '^tokens' "$FINAL/run-$engine-b$batch.txt" >"$W/tokens-$engine-b$batch"
  done
  same=$(cat "$W"/tokens-*-b$batch | sort | uniq -c | wc -l)
  say "batch $batch: $(wc -l <"$W/tokens-groups-b$batch") token lines; distinct across engines: $same (1 = identical)"
done

for round in 1 2; do
for engine in $engines; do
  "$bin/sits-bench" "$W/$engine.sits" --batch 1,8,16,32 --context 512 \
    --new-tokens 64 --repeats 2 --json "$FINAL/bench-$engine-$round.json" \
    >"$FINAL/bench-$engine-$round.log" 2>&1
  say "sits-bench $engine round $round (exit $?):"
  grep -E '^ *[0-9]' "$FINAL/bench-$engine-$round.log" | tee -a "$FINAL/$NAME.log"
done
done

for engine in ${NCU_ENGINES:-groups f32x}; do
  for batch in 32; do
    timeout 90 ncu --clock-control none -k regex:gemv --launch-count 100 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section LaunchStats --csv --page details \
      "$bin/sits-run" "$W/$engine.sits" --prompt-ids $ids --batch "$batch" \
      --max-new-tokens 3 --ignore-eos >"$FINAL/ncu-$engine-b$batch.csv" \
      2>"$FINAL/ncu-$engine-b$batch.err"
    say "ncu $engine batch $batch: exit $? $(wc -l <"$FINAL/ncu-$engine-b$batch.csv") lines"
  done
done
python3 bench/device/ncu_summary.py "$FINAL"/ncu-*.csv | tee -a "$FINAL/$NAME.log"
say "done"
