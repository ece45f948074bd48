#!/usr/bin/env bash
# One device call for sits-serve on the GPU (after bench/device/prepare.sh
# and bench/device/prepare-serve.sh; carry [".device/deps", ".device-serve"]):
# builds sits-serve and sits-run against the carried cpp-httplib, then
# bench/device/serve_check.py. $OUT gets serve.log.
set -uo pipefail
FINAL=${OUT:-$(pwd)/bench/out}
W=/tmp/serve
data=$(pwd)/.device-serve
mkdir -p "$FINAL" "$W"
export PKG_CONFIG_PATH=$data/httplib/lib/pkgconfig
export LD_LIBRARY_PATH=$data/httplib/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
nvidia-smi -L | head -1 | tee "$FINAL/serve.log"
if ! cmake "${generator[@]}" -S . -B "$W/build" -DCMAKE_BUILD_TYPE=Release \
     -DSITS_BUILD_COMPILER=OFF -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
     -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$(pwd)/.device/deps" \
     >"$FINAL/build.log" 2>&1 ||
   ! cmake --build "$W/build" -j "$(nproc)" --target sits-serve sits-run \
     >>"$FINAL/build.log" 2>&1; then
  grep -iE "error|httplib" "$FINAL/build.log" | head -20
  echo "serve: build FAILED"
  exit 1
fi
python3 bench/device/serve_check.py "$W/build/bin/sits-serve" \
  "$W/build/bin/sits-run" "$data/gqa.sits" 2>&1 | tee -a "$FINAL/serve.log"
exit "${PIPESTATUS[0]}"
