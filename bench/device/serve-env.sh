# Sourced by the serving device scripts (serve-gpu-tests.sh, serve-bench.sh)
# with NAME set: $FINAL and $W (work folder) made, say() logging to
# $FINAL/$NAME.log, the tools of .device-pack unpacked onto PATH, and the
# cpp-httplib of .device-serve found by pkg-config and the loader.
FINAL=${OUT:-$(pwd)/bench/out}
W=/tmp/$NAME
data=$(pwd)/.device-serve
mkdir -p "$FINAL" "$W"
say() { printf '[%s] %s\n' "$(date +%T)" "$*" | tee -a "$FINAL/$NAME.log"; }
tar -xJf .device-pack/device.tar.xz
export PATH="$(pwd)/.device:$PATH"
export PKG_CONFIG_PATH=$data/httplib/lib/pkgconfig
export LD_LIBRARY_PATH=$data/httplib/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# build_tools TARGET...: the runtime (no compiler) for sm_90 into $W/build,
# with the tests configured when a target is a test program (Sits*Test);
# sets $bin. On failure it logs the errors and returns 1.
build_tools() {
  local tests=OFF target
  for target in "$@"; do
    [[ $target == Sits*Test* ]] && tests=ON
  done
  if cmake -G Ninja -S . -B "$W/build" -DCMAKE_BUILD_TYPE=Release \
       -DSITS_BUILD_COMPILER=OFF -DSITS_BUILD_TESTS=$tests \
       -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
       -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$(pwd)/.device/deps" \
       >"$FINAL/build.log" 2>&1 &&
     cmake --build "$W/build" -j "$(nproc)" --target "$@" \
       >>"$FINAL/build.log" 2>&1; then
    bin=$W/build/bin
    return 0
  fi
  grep -iE "error|httplib" "$FINAL/build.log" | head -20 | tee -a "$FINAL/$NAME.log"
  say "build FAILED"
  return 1
}
# export_8b [LOG_DIR]: the Llama-3-8B shape's fp16 export (random weights,
# bench/llama_bench.py, no PyTorch timing) in $work8b, reused when an
# earlier call on the same machine left it; its log in LOG_DIR (default
# $FINAL). On failure it logs why and returns 1.
work8b=$(pwd)/.device-work/8b
export_8b() {
  local logs=${1:-$FINAL}
  if [ -f "$work8b/onnx/model.onnx" ]; then
    say "reusing the 8B export"
    return 0
  fi
  mkdir -p "$work8b"
  if ! python3 bench/llama_bench.py --shape llama3-8b --work "$work8b" \
    --json "$W/export.json" --export-dtype fp16 --contexts 512 --batches 1 \
    --deadline "$(date +%s)" >"$logs/llama_bench.log" 2>&1; then
    say "export FAILED"
    tail -5 "$logs/llama_bench.log"
    return 1
  fi
  say "exported"
}
# export_tinyllama: the TinyLlama-1.1B shape's fp16 export (random weights,
# bench/llama_bench.py) in $tl, reused when there. On failure it logs why
# and returns 1.
tl=$W/tinyllama
export_tinyllama() {
  [ -f "$tl/onnx/model.onnx" ] && return 0
  python3 bench/llama_bench.py --shape tinyllama --work "$tl" \
    --json "$W/tl.json" --export-dtype fp16 --contexts 512 --batches 1 \
    --deadline "$(date +%s)" >"$FINAL/export.log" 2>&1 && return 0
  say "TinyLlama export FAILED"
  tail -5 "$FINAL/export.log"
  return 1
}
# archive_on_exit: at most 8 files come back from a call, so on exit (also
# when a signal or the call's timeout ends the script) everything in $FINAL
# but $NAME.log goes into one archive, $NAME-files.tar.gz.
archive_on_exit() {
  trap archive EXIT
  trap 'say "stopped by a signal"; exit 143' TERM INT
}
archive() {
  # Made beside $FINAL, not in it: tar refuses a folder that changes.
  (cd "$FINAL" && tar czf "$W/files.tar.gz" --exclude="$NAME.log" . &&
    find . -mindepth 1 -maxdepth 1 ! -name "$NAME.log" -exec rm -rf {} + &&
    mv "$W/files.tar.gz" "$NAME-files.tar.gz")
}
