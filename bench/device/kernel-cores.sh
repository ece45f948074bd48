#!/usr/bin/env bash
# One device call for a change to the kernel library that must keep the
# kernels' results and speed: the GPU model tests of the new kernels
# (test/gpu/run-model-tests.sh with int8 and int4 weights: every shared
# model in fp32 and fp16, the quantized KV caches, the TVC head), then
# sits-bench on engines of the same models and options compiled here with
# the new kernels and, before the call, with the old ones (BASE engines),
# alternating base and new on this one GPU.
#
# Here, before the call:
#   bench/device/prepare.sh                  # .device/ with the new sitsc
#   bench/device/pack.sh BASE_SITSC          # .device-pack/: .device and the
#                                            # base engines, xz-compressed
# then call with carry [".device-pack"]. $OUT gets kernel-cores.log, the
# model test log and the benchmark JSON.
set -uo pipefail
FINAL=${OUT:-$(pwd)/bench/out}
W=/tmp/kernel-cores
mkdir -p "$FINAL" "$W/engines"
say() { printf '[%s] %s\n' "$(date +%T)" "$*" | tee -a "$FINAL/kernel-cores.log"; }
status=0

tar -xJf .device-pack/device.tar.xz
tar -xJf .device-pack/base-engines.tar.xz -C "$W/engines"
export PATH="$(pwd)/.device:$PATH"
say "$(nvidia-smi -L | head -1)"

# The runtime's tools, configured as test/gpu/run-model-tests.sh does (which
# then reuses this build).
# The text libraries' headers and archives come in .device/deps.
export SITS_CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$(pwd)/.device/deps"
build=$W/models/runtime bin=$W/models/runtime/bin
cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DSITS_BUILD_COMPILER=OFF -DSITS_BUILD_TESTS=OFF \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90 \
  $SITS_CMAKE_ARGS >"$FINAL/build.log" 2>&1 &&
  cmake --build "$build" --target sits-bench sits-score -j "$(nproc)" >>"$FINAL/build.log" 2>&1 ||
  { say "building the runtime failed"; tail -20 "$FINAL/build.log"; exit 1; }
say "runtime built"
# The new engines: the options the base ones were made with (pack.sh).
while read -r name model options; do
  # shellcheck disable=SC2086
  sitsc "$model" -o "$W/engines/new-$name.sits" --no-tokenizer $options \
    >/dev/null 2>>"$FINAL/kernel-cores.log" || { say "sitsc failed: $name"; status=1; }
done <"$W/engines/options.txt"
for round in 1 2; do
  while read -r name _; do
    for side in base new; do
      "$bin/sits-bench" "$W/engines/$side-$name.sits" --batch 1,8 \
        --context 128,2048,4000 --new-tokens 64 --repeats 3 \
        --json "$FINAL/bench-$side-$name-$round.json" \
        >>"$FINAL/bench.log" 2>&1 || { say "bench failed: $side-$name"; status=1; }
    done
  done <"$W/engines/options.txt"
done
python3 - "$FINAL" <<'EOF' | tee -a "$FINAL/kernel-cores.log"
import glob, json, os, sys
rows = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "bench-*.json"))):
    _, side, name, _ = os.path.basename(path)[:-5].split("-")
    for r in json.load(open(path)).get("results", []):
        key = (name, r.get("batch"), r.get("context"))
        rows.setdefault(key, {}).setdefault(side, []).append(r.get("decode_ms_per_token"))
print("engine batch context  base ms/token  new ms/token  new/base")
for (name, batch, context), sides in sorted(rows.items()):
    base, new = min(sides.get("base", [0])), min(sides.get("new", [0]))
    print(f"{name:6} {batch:5} {context:7}  {base:13.4f}  {new:12.4f}  {new / base if base else 0:.3f}")
EOF

WEIGHTS=fp16,int8,int4 test/gpu/run-model-tests.sh "$W/models" \
  >"$FINAL/model-tests.log" 2>&1 || status=1
say "model tests: exit $status; summary:"
tail -40 "$FINAL/model-tests.log" | tee -a "$FINAL/kernel-cores.log"

say "done: exit $status"
exit $status
