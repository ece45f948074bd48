#!/usr/bin/env bash
# The decode-speed comparison, sits against PyTorch, as one command on the
# GPU machine, from the repository root:
#
#   bench/run.sh [tinyllama] [llama3-8b]        (default: both)
#
# Needs .device/sitsc (the static sitsc built from HEAD; or $SITSC), the
# CUDA toolkit, cmake and ninja (the runtime is built here), and python3
# with torch, transformers and onnx. For each shape: a Llama of that shape
# with random fp16 weights is exported to ONNX and compiled with sitsc
# (timed), PyTorch references run on the same weights (bench/llama_bench.py),
# the engine's load time is taken with sits-run, and sits-bench measures
# batches 1,4,8 at contexts 32,128,2048,8192 with 128 new tokens.
#
# Writes to $OUT (or bench/out): bench.log, sits-<shape>.json (what
# sits-bench wrote), torch-<shape>.json, times-<shape>.json and summary.md;
# the table is printed last. Large files stay under $SITS_BENCH_WORK
# (/tmp/sits-bench). $SITS_BENCH_BUDGET (seconds, default 560) bounds the
# whole run: optional PyTorch phases are skipped when it runs short.
# $SITS_BENCH_EXPORT (fp32 or fp16) is the graph type of the ONNX export
# (default: fp32 for tinyllama, fp16 for llama3-8b).
#
# SITS_BENCH_TVC=1 (after the shapes) or =only (instead of them) also
# measures the TVC LM head (sitsc --tvc=exact) at the Llama-3-8B head shape
# (bench/tvc_head.py: a one-layer model with its vocabulary and hidden size,
# plain and TVC engines, rank $SITS_BENCH_TVC_RANK (128) and
# $SITS_BENCH_TVC_CANDIDATES (64) candidates): sits-bench's LM-head time of
# the plain engine against the TVC engine with --tvc-no-fallback (benchmark
# only: the proof taken as succeeding), and a normal TVC run's fallback rate
# on the random weights. Writes tvc-*.json and tvc.md. The TVC compile runs
# the randomized SVD of the 128256 x 4096 head on one core (minutes).

set -u
ROOT=$(pwd)
OUT=${OUT:-$ROOT/bench/out}
WORK=${SITS_BENCH_WORK:-/tmp/sits-bench}
SITSC=${SITSC:-$ROOT/.device/sitsc}
BUDGET=${SITS_BENCH_BUDGET:-560}
REPEATS=${SITS_BENCH_REPEATS:-2}
CONTEXTS=${SITS_BENCH_CONTEXTS:-32,128,2048,8192}
BATCHES=${SITS_BENCH_BATCHES:-1,4,8}
ENGINE_OPTIONS="--max-seq-len=8448 --max-batch=8"
SHAPES=("$@")
[ ${#SHAPES[@]} -eq 0 ] && SHAPES=(tinyllama llama3-8b)
TVC=${SITS_BENCH_TVC:-0}
[ "$TVC" = only ] && SHAPES=()
START=$(date +%s)
mkdir -p "$OUT" "$WORK"
exec > >(tee "$OUT/bench.log") 2>&1
export PYTHONUNBUFFERED=1

stamp() { echo "[$(date +%H:%M:%S) +$(($(date +%s) - START))s] $*"; }
now() { date +%s.%N; }
elapsed() { python3 -c "print(round($(now) - $1, 2))"; }

stamp "sits bench: shapes ${SHAPES[*]}, budget ${BUDGET}s, sitsc $SITSC"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
if [ ! -x "$SITSC" ]; then
  stamp "ERROR: no sitsc at $SITSC (build it from HEAD and carry it)"
  exit 2
fi

# The runtime (sits-bench, sits-run), built while the models export.
stamp "building the runtime in the background"
(
  cmake -G Ninja -S "$ROOT" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release \
    -DSITS_BUILD_TESTS=OFF -DSITS_BUILD_COMPILER=OFF >"$WORK/cmake.log" 2>&1 &&
    ninja -C "$WORK/build" sits-bench sits-run >"$WORK/ninja.log" 2>&1
  echo $? >"$WORK/build.rc"
) &
BUILD_PID=$!
runtime_ready() {
  wait "$BUILD_PID" 2>/dev/null
  if [ "$(cat "$WORK/build.rc" 2>/dev/null)" != 0 ]; then
    stamp "ERROR: the runtime did not build"
    tail -30 "$WORK/cmake.log" "$WORK/ninja.log"
    return 1
  fi
  BENCH=$(find "$WORK/build" -name sits-bench -type f -perm -u+x | head -1)
  RUN=$(find "$WORK/build" -name sits-run -type f -perm -u+x | head -1)
}

count=${#SHAPES[@]}
index=0
for shape in "${SHAPES[@]}"; do
  index=$((index + 1))
  dir="$WORK/$shape"
  rm -rf "$dir"
  mkdir -p "$dir"
  engine="$dir/model.sits"
  # Time left for this shape's sits-bench once PyTorch is done: the 8B
  # shape needs about three times the small one's.
  reserve=$([ "$shape" = llama3-8b ] && echo 170 || echo 70)
  later=$([ $index -lt $count ] && echo 330 || echo 0)
  deadline=$((START + BUDGET - reserve - later))
  stamp "$shape: model, ONNX export, sitsc (background), PyTorch references"
  # The 8B shape exports its fp16 graph (16 GB instead of 32 GB of float32
  # weights to write and read); $SITS_BENCH_EXPORT overrides either.
  export_dtype=${SITS_BENCH_EXPORT:-$([ "$shape" = llama3-8b ] && echo fp16 || echo fp32)}
  python3 "$ROOT/bench/llama_bench.py" --shape "$shape" --work "$dir" \
    --export-dtype "$export_dtype" \
    --json "$OUT/torch-$shape.json" --contexts "$CONTEXTS" \
    --batches "$BATCHES" --new-tokens 128 --deadline "$deadline" \
    --sitsc "$SITSC" --engine "$engine" --sitsc-args "$ENGINE_OPTIONS"
  stamp "$shape: sitsc log:"
  tail -12 "$dir/sitsc.log" 2>/dev/null
  rm -rf "$dir/onnx" # the engine has what it needs; free the disk
  if [ ! -f "$engine" ]; then
    stamp "ERROR: $shape: no engine"
    continue
  fi
  runtime_ready || exit 3
  begin=$(now)
  "$RUN" "$engine" --prompt-ids 1,2,3 --max-new-tokens 2 >"$dir/load.log" 2>&1
  load_s=$(elapsed "$begin")
  stamp "$shape: sits-run (engine load + 2 tokens): ${load_s}s"
  cat "$dir/load.log" | tail -6
  echo "{\"load_and_first_tokens_s\": $load_s, \"engine_bytes\": $(stat -c %s "$engine")}" \
    >"$OUT/times-$shape.json"
  stamp "$shape: sits-bench"
  "$BENCH" "$engine" --batch "$BATCHES" --context "$CONTEXTS" \
    --new-tokens 128 --repeats "$REPEATS" --json "$OUT/sits-$shape.json"
  stamp "$shape: sits-bench exit $?"
  rm -f "$engine"
done

if [ "$TVC" = 1 ] || [ "$TVC" = only ]; then
  tvcdir="$WORK/tvc"
  rm -rf "$tvcdir"
  mkdir -p "$tvcdir"
  stamp "tvc: the Llama-3-8B LM head, plain and TVC engines"
  python3 "$ROOT/bench/tvc_head.py" model --work "$tvcdir" --sitsc "$SITSC" \
    --rank "${SITS_BENCH_TVC_RANK:-128}" \
    --candidates "${SITS_BENCH_TVC_CANDIDATES:-64}"
  cp "$tvcdir/compile.json" "$OUT/tvc-compile.json" 2>/dev/null
  rm -rf "$tvcdir/onnx"
  if [ -f "$tvcdir/plain.sits" ] && [ -f "$tvcdir/tvc.sits" ] && runtime_ready; then
    tvc_bench=("--batch" "$BATCHES" "--context" 32 "--new-tokens" 32 "--repeats" 1)
    "$BENCH" "$tvcdir/plain.sits" "${tvc_bench[@]}" --json "$OUT/tvc-plain.json"
    "$BENCH" "$tvcdir/tvc.sits" "${tvc_bench[@]}" --tvc-no-fallback \
      --json "$OUT/tvc-proved.json"
    "$BENCH" "$tvcdir/tvc.sits" "${tvc_bench[@]}" --json "$OUT/tvc-fallback.json"
    python3 "$ROOT/bench/tvc_head.py" report --out "$OUT/tvc.md" \
      "$OUT/tvc-plain.json" "$OUT/tvc-proved.json" "$OUT/tvc-fallback.json"
  else
    stamp "ERROR: tvc: no engines (see $tvcdir/sitsc-*.log)"
  fi
  rm -f "$tvcdir"/*.sits
fi

if [ ${#SHAPES[@]} -gt 0 ]; then
  stamp "report"
  python3 "$ROOT/bench/report.py" --out "$OUT/summary.md" "$OUT"
fi
stamp "done"
