#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into ./build-fuzz and
# runs them.
#
#   scripts/fuzz.sh [TARGET|all|runtime|compiler] [SECONDS]
#
# TARGET is a name from fuzz/CMakeLists.txt without its `fuzz-` prefix
# (engine, tokenizer, chat-template, model-tokenizer, serve-request,
# onnx-loader, onnx-import); `runtime` runs the first five (no MLIR build),
# `compiler` the ONNX ones, `all` (the default) every one, each for SECONDS
# (default 60). Each run starts from the committed seeds (fuzz/corpus/TARGET)
# and crash inputs (fuzz/regressions/TARGET) plus what earlier runs found
# (build-fuzz/corpus/TARGET, not committed), with the target's dictionary. A
# crash, leak, sanitizer report or timeout stops the script with a non-zero
# exit; the input is in build-fuzz/artifacts/TARGET/ (commit it to
# fuzz/regressions/TARGET with its fix). Extra libFuzzer flags:
# SITS_FUZZ_FLAGS. On a shared machine: `nice -n 19 scripts/fuzz.sh ...`.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-all}
seconds=${2:-60}
runtime_targets=(engine tokenizer chat-template model-tokenizer serve-request)
compiler_targets=(onnx-loader onnx-import)
case "$what" in
  all) targets=("${runtime_targets[@]}" "${compiler_targets[@]}") ;;
  runtime) targets=("${runtime_targets[@]}") ;;
  compiler) targets=("${compiler_targets[@]}") ;;
  *) targets=("$what") ;;
esac
need_compiler=OFF
for t in "${targets[@]}"; do
  [ -d "fuzz/corpus/$t" ] || { echo "fuzz.sh: unknown target '$t'" >&2; exit 2; }
  case "$t" in onnx-*) need_compiler=ON ;; esac
done

# The runtime targets need no MLIR: a build dir made for them alone is
# reconfigured with the compiler when an ONNX target is asked for.
if [ ! -f build-fuzz/CMakeCache.txt ] ||
   { [ "$need_compiler" = ON ] &&
     grep -q '^SITS_BUILD_COMPILER:BOOL=OFF' build-fuzz/CMakeCache.txt; }; then
  # -O1 -g with assertions (no -DNDEBUG): a failed assertion is a finding.
  cmake -G Ninja -S . -B build-fuzz \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DSITS_BUILD_FUZZERS=ON -DSITS_BUILD_COMPILER="$need_compiler" \
    -DSITS_BUILD_RUNTIME=OFF -DSITS_BUILD_TESTS=OFF >/dev/null
fi
cmake --build build-fuzz --target "${targets[@]/#/fuzz-}"

dict_of() {
  case "$1" in
    engine) echo engine ;;
    tokenizer | model-tokenizer) echo tokenizer ;;
    chat-template) echo jinja ;;
    serve-request) echo serve ;;
    onnx-*) echo onnx ;;
  esac
}

# Debian's LLVM and protobuf are not instrumented: container-overflow checks
# would report false positives across them (as in test/lit.cfg.py).
export ASAN_OPTIONS=${ASAN_OPTIONS:-allow_user_poisoning=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
for t in "${targets[@]}"; do
  work=build-fuzz/corpus/$t
  artifacts=build-fuzz/artifacts/$t
  log=build-fuzz/fuzz-$t.log
  mkdir -p "$work" "$artifacts"
  echo "== fuzz-$t: ${seconds}s"
  # New inputs go to $work; the committed folders are only read. The log
  # keeps everything; the terminal gets it without the NEW/REDUCE lines.
  # -entropic=0: libFuzzer 14's entropic scheduler spent 40% of the time in
  # UpdateFeatureFrequency here (7x fewer executions per second).
  set +e +o pipefail
  # shellcheck disable=SC2086
  build-fuzz/bin/fuzz-"$t" "$work" "fuzz/corpus/$t" "fuzz/regressions/$t" \
    -dict="fuzz/dict/$(dict_of "$t").dict" \
    -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2560 \
    -max_len=131072 -entropic=0 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" ${SITS_FUZZ_FLAGS:-} 2>&1 | tee "$log" |
    grep --line-buffered -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE)'
  status=${PIPESTATUS[0]}
  set -e -o pipefail
  if [ "$status" -ne 0 ]; then
    echo "fuzz.sh: fuzz-$t failed (exit $status); inputs in $artifacts/," \
         "log in $log" >&2
    exit "$status"
  fi
done
