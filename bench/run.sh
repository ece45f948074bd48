#!/usr/bin/env bash
# The decode-speed comparison, sits against PyTorch, as one command on the
# GPU machine, from the repository root:
#
#   bench/run.sh [tinyllama] [llama3-8b]        (default: both)
#   SITS_BENCH_WEIGHTS=fp16 bench/run.sh          (no int4 engines)
#   bench/run.sh llama3-8b-l2    (the 8B shape's first two layers and head:
#                                 its kernels profiled in a minute or two)
#   bench/run.sh llama3-8b-attn  (two 8B layers, a 2048-token vocabulary:
#                                 the attention at long contexts)
#
# On a machine with a GPU per shape (nvidia-h200-x2) the shapes run side by
# side, each on its own GPU with its own log (bench-<shape>.log); one
# after the other otherwise (SITS_BENCH_PARALLEL=0 forces that).
#
# Needs .device/sitsc (the static sitsc built from HEAD; or $SITSC), the
# CUDA toolkit, cmake and ninja (the runtime is built here), and python3
# with torch, transformers and onnx. For each shape: a Llama of that shape
# with random fp16 weights is exported to ONNX and compiled with sitsc
# (timed), PyTorch references run on the same weights (bench/llama_bench.py),
# the engine's load time is taken with sits-run, and sits-bench measures
# batches 1,4,8 at contexts 32,128,2048,8192 with 128 new tokens. With int4
# in $SITS_BENCH_WEIGHTS (default fp16,int4) a second engine of each shape
# with int4 weights (--weights=int4 --weight-scale=absmax, compiled
# concurrently) is measured at batches $SITS_BENCH_INT4_BATCHES (1,8) and
# contexts $SITS_BENCH_INT4_CONTEXTS (32,2048) (int4-<shape>.json), and the
# report compares its decode ms/token with fp16's (the target: <= 0.45x).
# The int4 runs take time from the optional PyTorch phases: for every
# PyTorch number too, run one shape per call.
#
# Writes to $OUT (or bench/out): bench.log, sits-<shape>.json (what
# sits-bench wrote), torch-<shape>.json, times-<shape>.json and summary.md;
# the table is printed last. Large files stay under $SITS_BENCH_WORK
# (/tmp/sits-bench). $SITS_BENCH_BUDGET (seconds, default 560) bounds the
# whole run: optional PyTorch phases are skipped when it runs short.
# $SITS_BENCH_EXPORT (fp32 or fp16) is the graph type of the ONNX export
# (default: fp32 for tinyllama, fp16 for llama3-8b). The export is of a
# two-layer twin grown to the model's depth with its weights
# (bench/onnx_graft.py); SITS_BENCH_EXPORT_METHOD=dynamo exports the model
# itself (more than 5 minutes for the 8B shape).
# $SITS_BENCH_TORCH_BATCHES (default: the batches) limits the
# torch.compile references (each batch compiles for about 40 s).
# $SITS_BENCH_KV (default fp16) lists KV caches to measure: with
# "fp16,int4" (or int8) an engine with that quantized cache is compiled
# from the same export and measured at $SITS_BENCH_KV_CONTEXTS (default
# 8192), into kv-<shape>-<kv>.json; bench/kv_compare.py prints decode time
# and the bytes read against the fp16 cache.
#
# SITS_BENCH_PROFILE=1 prints the kernels of a decode step of the fp16
# engine with their times (bench/kernel_profile.py: Nsight Compute, batch 1,
# contexts 32 and 8192) into profile-<shape>-b1-c<context>.json, and of
# the second engine (int4 or SITS_BENCH_ALT_ARGS) at context 32, and of
# each quantized-KV engine at $SITS_BENCH_KV_CONTEXTS.
# SITS_BENCH_SERIAL=1 also runs sits-bench on the fp16 engine with
# --no-programmatic-launch (every kernel waits for the previous one to end)
# at batches 1,8 and contexts 32,8192, into serial-<shape>.json: what
# programmatic dependent launch gains.
#
# SITS_BENCH_TVC=1 (after the shapes) or =only (instead of them) also
# measures the TVC LM head (sitsc --tvc=exact) at the Llama-3-8B head shape
# (bench/tvc_head.py: a one-layer model with its vocabulary and hidden size,
# plain and TVC engines, rank $SITS_BENCH_TVC_RANK (128) and
# $SITS_BENCH_TVC_CANDIDATES (64) candidates): sits-bench's LM-head time of
# the plain engine against the TVC engine with --tvc-no-fallback (benchmark
# only: the proof taken as succeeding), and a normal TVC run's fallback rate
# on the random weights. Writes tvc-*.json and tvc.md; with
# SITS_BENCH_PROFILE=1 also the kernels of both heads at batch 1
# (tvc-profile-plain.json, tvc-profile-proved.json). The TVC compile runs
# the randomized SVD of the 128256 x 4096 head on all cores (about 55 s on
# the H200's 16).

set -u
ROOT=$(pwd)
OUT=${OUT:-$ROOT/bench/out}
WORK=${SITS_BENCH_WORK:-/tmp/sits-bench}
SITSC=${SITSC:-$ROOT/.device/sitsc}
BUDGET=${SITS_BENCH_BUDGET:-560}
REPEATS=${SITS_BENCH_REPEATS:-2}
CONTEXTS=${SITS_BENCH_CONTEXTS:-32,128,2048,8192}
BATCHES=${SITS_BENCH_BATCHES:-1,4,8}
KV_TYPES=${SITS_BENCH_KV:-fp16}
KV_CONTEXTS=${SITS_BENCH_KV_CONTEXTS:-8192}
ENGINE_OPTIONS="--max-seq-len=8448 --max-batch=8"
WEIGHTS=${SITS_BENCH_WEIGHTS:-fp16,int4}
INT4=0
case ",$WEIGHTS," in *,int4,*) INT4=1 ;; esac
# int4: absmax scales (the MSE search only changes accuracy, and takes long
# on an 8B model).
INT4_OPTIONS="--weights=int4 --weight-scale=absmax"
# SITS_BENCH_ALT_ARGS (with SITS_BENCH_ALT_NAME, default "alt") makes the
# second engine one with these sitsc options instead (e.g.
# "--no-norm-fusion"), into <name>-<shape>.json, for an A/B comparison.
INT4_NAME=int4
if [ -n "${SITS_BENCH_ALT_ARGS:-}" ]; then
  INT4=1
  INT4_OPTIONS=$SITS_BENCH_ALT_ARGS
  INT4_NAME=${SITS_BENCH_ALT_NAME:-alt}
fi
INT4_BATCHES=${SITS_BENCH_INT4_BATCHES:-1,8}
INT4_CONTEXTS=${SITS_BENCH_INT4_CONTEXTS:-32,2048}
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
  # A poll, not `wait`: the shapes may run in subshells.
  while [ ! -f "$WORK/build.rc" ] && kill -0 "$BUILD_PID" 2>/dev/null; do
    sleep 1
  done
  if [ "$(cat "$WORK/build.rc" 2>/dev/null)" != 0 ]; then
    stamp "ERROR: the runtime did not build"
    tail -n 30 "$WORK/cmake.log" "$WORK/ninja.log"
    return 1
  fi
  BENCH=$(find "$WORK/build" -name sits-bench -type f -perm -u+x | head -1)
  RUN=$(find "$WORK/build" -name sits-run -type f -perm -u+x | head -1)
}

# One shape: export, compile, references, sits-bench ($1: the shape, $2: its
# index in SHAPES).
bench_shape() {
  local shape=$1 index=$2
  local dir engine reserve later int4_engine int4_args deadline export_dtype
  local onnx kv kvengine begin load_s ctx
  dir="$WORK/$shape"
  rm -rf "$dir"
  mkdir -p "$dir"
  engine="$dir/model.sits"
  # Time left for this shape's sits-bench once PyTorch is done: the 8B
  # shape needs about three times the small one's.
  reserve=$([ "$shape" = llama3-8b ] && echo 170 || echo 70)
  # The later shapes of a serial run.
  later=$([ "$PARALLEL" = 0 ] && [ $index -lt $count ] && echo 330 || echo 0)
  # The int4 engine's sits-bench (fewer batches and contexts).
  if [ $INT4 = 1 ]; then
    reserve=$((reserve + $([ "$shape" = llama3-8b ] && echo 70 || echo 30)))
    [ "$PARALLEL" = 0 ] && [ $index -lt $count ] && later=$((later + 70))
  fi
  int4_engine="$dir/model-int4.sits"
  int4_args=()
  [ $INT4 = 1 ] && int4_args=(--int4-engine "$int4_engine" "--int4-args=$INT4_OPTIONS")
  deadline=$((START + BUDGET - reserve - later))
  stamp "$shape: model, ONNX export, sitsc (background), PyTorch references"
  # The 8B shape exports its fp16 graph (16 GB instead of 32 GB of float32
  # weights to write and read); $SITS_BENCH_EXPORT overrides either.
  export_dtype=${SITS_BENCH_EXPORT:-$([ "$shape" = llama3-8b ] && echo fp16 || echo fp32)}
  python3 "$ROOT/bench/llama_bench.py" --shape "$shape" --work "$dir" \
    --export-dtype "$export_dtype" \
    --export-method "${SITS_BENCH_EXPORT_METHOD:-graft}" \
    --torch-batches "${SITS_BENCH_TORCH_BATCHES:-$BATCHES}" \
    --json "$OUT/torch-$shape.json" --contexts "$CONTEXTS" \
    --batches "$BATCHES" --new-tokens 128 --deadline "$deadline" \
    --sitsc "$SITSC" --engine "$engine" --sitsc-args "$ENGINE_OPTIONS" \
    "${int4_args[@]}"
  stamp "$shape: sitsc log:"
  tail -12 "$dir/sitsc.log" 2>/dev/null
  [ $INT4 = 1 ] && stamp "$shape: sitsc --weights=int4 log:" &&
    tail -12 "$dir/sitsc-int4.log" 2>/dev/null
  # Engines with a quantized KV cache, from the same export.
  onnx=$(find "$dir/onnx" -name '*.onnx' 2>/dev/null | head -1)
  for kv in ${KV_TYPES//,/ }; do
    [ "$kv" = fp16 ] || [ -z "$onnx" ] && continue
    stamp "$shape: sitsc --kv-cache=$kv"
    "$SITSC" "$onnx" -o "$dir/model-kv$kv.sits" --force $ENGINE_OPTIONS \
      --kv-cache="$kv" 2>&1 | tail -8
  done
  rm -rf "$dir/onnx" # the engine has what it needs; free the disk
  if [ ! -f "$engine" ]; then
    stamp "ERROR: $shape: no engine"
    return
  fi
  if ! runtime_ready; then
    touch "$WORK/failed" # the exit status, also from a side-by-side shape
    return
  fi
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
  if [ "${SITS_BENCH_PROFILE:-0}" = 1 ]; then
    for ctx in ${SITS_BENCH_PROFILE_CONTEXTS:-32 8192}; do
      stamp "$shape: kernel profile (ncu), batch 1, context $ctx"
      python3 "$ROOT/bench/kernel_profile.py" "$engine" --sits-bench "$BENCH" \
        --batch 1 --context $ctx --json "$OUT/profile-$shape-b1-c$ctx.json"
    done
  fi
  if [ "${SITS_BENCH_SERIAL:-0}" = 1 ]; then
    stamp "$shape: sits-bench --no-programmatic-launch"
    "$BENCH" "$engine" --batch 1,8 --context 32,8192 --new-tokens 128 \
      --repeats "$REPEATS" --no-programmatic-launch \
      --json "$OUT/serial-$shape.json"
  fi
  rm -f "$engine"
  if [ $INT4 = 1 ]; then
    if [ -f "$int4_engine" ]; then
      stamp "$shape: sits-bench, second engine ($INT4_OPTIONS)"
      "$BENCH" "$int4_engine" --batch "$INT4_BATCHES" \
        --context "$INT4_CONTEXTS" --new-tokens 128 --repeats "$REPEATS" --json "$OUT/$INT4_NAME-$shape.json"
      stamp "$shape: sits-bench (int4) exit $?"
      if [ "${SITS_BENCH_PROFILE:-0}" = 1 ]; then
        stamp "$shape: kernel profile (ncu) of the second engine, batch 1, context 32"
        python3 "$ROOT/bench/kernel_profile.py" "$int4_engine" \
          --sits-bench "$BENCH" --batch 1 --context 32 \
          --json "$OUT/profile-$INT4_NAME-$shape-b1-c32.json"
      fi
      rm -f "$int4_engine"
    else
      stamp "ERROR: $shape: no int4 engine"
    fi
  fi
  for kv in ${KV_TYPES//,/ }; do
    kvengine="$dir/model-kv$kv.sits"
    [ -f "$kvengine" ] || continue
    stamp "$shape: sits-bench, $kv KV cache"
    "$BENCH" "$kvengine" --batch "$BATCHES" --context "$KV_CONTEXTS" \
      --new-tokens 128 --repeats "$REPEATS" --json "$OUT/kv-$shape-$kv.json"
    stamp "$shape: sits-bench ($kv KV) exit $?"
    python3 "$ROOT/bench/kv_compare.py" "$OUT/sits-$shape.json" \
      "$OUT/kv-$shape-$kv.json"
    if [ "${SITS_BENCH_PROFILE:-0}" = 1 ]; then
      for ctx in ${KV_CONTEXTS//,/ }; do
        stamp "$shape: kernel profile (ncu) of the $kv KV cache, batch 1, context $ctx"
        python3 "$ROOT/bench/kernel_profile.py" "$kvengine" --sits-bench "$BENCH" \
          --batch 1 --context $ctx --json "$OUT/profile-kv$kv-$shape-b1-c$ctx.json"
      done
    fi
    rm -f "$kvengine"
  done
}

count=${#SHAPES[@]}
# With a GPU for each shape, the shapes run side by side, each on its own
# GPU (CUDA_VISIBLE_DEVICES) with its own log: one run of both shapes with
# every reference then fits in ten minutes. SITS_BENCH_PARALLEL=0 runs them
# one after the other on the first GPU.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
PARALLEL=${SITS_BENCH_PARALLEL:-$([ "$count" -gt 1 ] && [ "$gpus" -ge "$count" ] && echo 1 || echo 0)}
if [ "$PARALLEL" = 1 ] && [ "$gpus" -lt "$count" ]; then
  stamp "ERROR: SITS_BENCH_PARALLEL=1 needs a GPU per shape ($count), found $gpus"
  exit 2
fi
rm -f "$WORK/failed"
if [ "$PARALLEL" = 1 ]; then
  stamp "shapes side by side on $count of $gpus GPUs"
  pids=()
  index=0
  for shape in "${SHAPES[@]}"; do
    stamp "$shape: GPU $index, log $OUT/bench-$shape.log"
    CUDA_VISIBLE_DEVICES=$index bench_shape "$shape" $((index + 1)) \
      >"$OUT/bench-$shape.log" 2>&1 &
    pids+=($!)
    index=$((index + 1))
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  for shape in "${SHAPES[@]}"; do
    stamp "$shape: log"
    cat "$OUT/bench-$shape.log"
  done
else
  index=0
  for shape in "${SHAPES[@]}"; do
    index=$((index + 1))
    bench_shape "$shape" $index
  done
fi

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
    if [ "${SITS_BENCH_PROFILE:-0}" = 1 ]; then
      stamp "tvc: kernel profiles (ncu), batch 1: plain head, TVC proved"
      python3 "$ROOT/bench/kernel_profile.py" "$tvcdir/plain.sits" \
        --sits-bench "$BENCH" --json "$OUT/tvc-profile-plain.json"
      python3 "$ROOT/bench/kernel_profile.py" "$tvcdir/tvc.sits" \
        --sits-bench "$BENCH" --bench-arg=--tvc-no-fallback \
        --json "$OUT/tvc-profile-proved.json"
    fi
  else
    stamp "ERROR: tvc: no engines (see $tvcdir/sitsc-*.log)"
  fi
  rm -f "$tvcdir"/*.sits
fi

if [ ${#SHAPES[@]} -gt 0 ]; then
  stamp "report"
  python3 "$ROOT/bench/report.py" --out "$OUT/summary.md" "$OUT"
fi
if [ -f "$WORK/failed" ]; then
  stamp "ERROR: the runtime did not build"
  exit 3
fi
stamp "done"
