#!/usr/bin/env bash
# Builds the runtime alone (compiler off, CUDA toolkit + GoogleTest only) and
# runs its tests on the GPU of this machine: the gtest suites (the `gpu` label
# and the CPU ones), the Python package's tests (test/python, where pybind11
# and pytest are installed; engines compiled with the sitsc of .device/) and,
# when lit and FileCheck are found, the lit tests of test/runtime/. Prints a
# short summary; exits non-zero if anything failed, if a GPU test skipped,
# or if there is no GPU.
#
# The text libraries' headers and archives are taken from .device/deps where
# the machine has no PCRE2/utf8proc/nlohmann-json packages
# (bench/device/prepare.sh puts them there).
#
#   test/runtime/run-gpu-tests.sh [BUILD_DIR]
#
# Environment: SITS_CUDA_ARCH (default 90), CMAKE_GENERATOR, LIT, FILECHECK,
# SITS_CMAKE_ARGS (extra cmake arguments, e.g. -DSITS_GTEST_SOURCE_DIR=...).
set -uo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$src/build-gpu}
arch=${SITS_CUDA_ARCH:-90}
log=$build/gpu-tests.log

say() { printf '%s\n' "$*"; }

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  say "run-gpu-tests: no NVIDIA GPU visible (nvidia-smi -L failed)"
  exit 1
fi
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$nvcc" ]; then
  say "run-gpu-tests: nvcc not found (set CUDACXX or put the CUDA toolkit on PATH)"
  exit 1
fi

generator=()
if [ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi
extra=()
[ -d "$src/.device/deps" ] && extra+=(-DCMAKE_PREFIX_PATH="$src/.device/deps")
python_summary="not built (no pybind11 or pytest for python3)"
if python3 -c "import pybind11, pytest" 2>/dev/null; then
  extra+=(-DSITS_BUILD_PYTHON=ON -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)"
          -DPython3_EXECUTABLE="$(command -v python3)")
  python_summary="not run"
fi
# sitsc and sits-exec (static, from bench/device/prepare.sh) for the tests
# that compile engines.
[ -d "$src/.device" ] && export PATH="$src/.device:$PATH"

mkdir -p "$build"
say "run-gpu-tests: $(nvidia-smi -L | head -1)"
say "run-gpu-tests: building in $build (sm_$arch), log in $log"
configure() {
  cmake "${generator[@]}" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DSITS_BUILD_COMPILER=OFF -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" "$@" ${SITS_CMAKE_ARGS:-} >>"$log" 2>&1
}
status=0
: >"$log"
if ! configure "${extra[@]}"; then
  # Without the Python module rather than without any test (its failure
  # still fails the run).
  if [ "$python_summary" = "not run" ]; then
    tail -20 "$log"
    python_summary="FAILED: configure with -DSITS_BUILD_PYTHON=ON failed (see $log)"
    status=1
    rm -f "$build/CMakeCache.txt"
    extra=()
    [ -d "$src/.device/deps" ] && extra+=(-DCMAKE_PREFIX_PATH="$src/.device/deps")
  fi
  if ! configure "${extra[@]}"; then
    tail -20 "$log"
    say "run-gpu-tests: configure failed (GoogleTest installed? see $log)"
    exit 1
  fi
fi
if ! cmake --build "$build" -j "$(nproc)" >>"$log" 2>&1; then
  grep -E "error|FAILED" "$log" | head -20
  say "run-gpu-tests: build failed (see $log)"
  exit 1
fi

gpu_summary="not run"
cpu_summary="not run"
lit_summary="not run"

# The real int8/int4 engines PagedQuantSessionTest runs, where a sitsc is
# at hand (the runtime-only build has none: those tests then skip).
if command -v sitsc >/dev/null 2>&1 &&
   "$src/test/gpu/make-quant-engines.sh" "$build/quant-engines" sitsc >>"$log" 2>&1; then
  export SITS_TEST_QUANT_ENGINES=$build/quant-engines
fi

# gtest through ctest: GPU label first, then everything else.
if ctest --test-dir "$build" -L gpu --output-on-failure >"$build/ctest-gpu.log" 2>&1; then
  gpu_summary=$(grep -E "tests passed|tests failed" "$build/ctest-gpu.log" | tail -1)
else
  status=1
  gpu_summary="FAILED: $(grep -E "tests passed|tests failed" "$build/ctest-gpu.log" | tail -1)"
  grep -E "Failed|\*\*\*" "$build/ctest-gpu.log" | head -20
fi
if grep "Skipped" "$build/ctest-gpu.log" |
   grep -qv "PagedQuantSessionTest" ||
   { [ -n "${SITS_TEST_QUANT_ENGINES:-}" ] &&
     grep -q "Skipped" "$build/ctest-gpu.log"; }; then
  status=1
  gpu_summary="$gpu_summary (some GPU tests SKIPPED: the GPU was not usable)"
fi
if ctest --test-dir "$build" -LE "gpu|python" --output-on-failure >"$build/ctest-cpu.log" 2>&1; then
  cpu_summary=$(grep -E "tests passed|tests failed" "$build/ctest-cpu.log" | tail -1)
else
  status=1
  cpu_summary="FAILED: $(grep -E "tests passed|tests failed" "$build/ctest-cpu.log" | tail -1)"
fi

# The Python package's tests: a GPU test that skips is a failure here.
if [ "$python_summary" = "not run" ]; then
  if SITS_REQUIRE_GPU=1 ctest --test-dir "$build" -L python -V >"$build/python.log" 2>&1; then
    python_summary=$(grep -E "[0-9]+ passed" "$build/python.log" | tail -1)
  else
    status=1
    python_summary="FAILED: $(grep -E "[0-9]+ (passed|failed)" "$build/python.log" | tail -1)"
    grep -E "^E |FAILED|Error" "$build/python.log" | head -30
  fi
fi

# lit tests of test/runtime (FileCheck comes with LLVM).
lit_cmd=${LIT:-$(command -v lit || command -v llvm-lit || ls /usr/lib/llvm-*/bin/lit 2>/dev/null | tail -1 || true)}
filecheck=${FILECHECK:-$(command -v FileCheck || ls /usr/lib/llvm-*/bin/FileCheck 2>/dev/null | tail -1 || true)}
if [ -n "$lit_cmd" ] && [ -n "$filecheck" ]; then
  mkdir -p "$build/test/runtime"
  cat >"$build/test/lit.site.cfg.py" <<EOF
config.sits_src_root = r"$src"
config.sits_obj_root = r"$build"
config.sits_tools_dir = r"$build/bin"
config.llvm_tools_dir = r"$(dirname "$filecheck")"
config.python_executable = r"$(command -v python3)"
config.sits_build_runtime = True
config.sits_asan = False
config.sits_shared_models = r""
lit_config.load_config(config, r"$src/test/lit.cfg.py")
EOF
  if "$lit_cmd" -sv --show-unsupported "$build/test/runtime" >"$build/lit.log" 2>&1; then
    lit_summary=$(grep -E "Passed|Unsupported|Failed" "$build/lit.log" | tr -s ' ' | paste -sd, -)
  else
    status=1
    lit_summary="FAILED: $(grep -E "Passed|Failed" "$build/lit.log" | tr -s ' ' | paste -sd, -)"
    grep -E "^FAIL|error:" "$build/lit.log" | head -20
  fi
  # Passing tests are not listed (-s); the GPU ones must not be unsupported.
  if grep -qE "UNSUPPORTED: sits :: runtime/(run|bench)-toy.test" "$build/lit.log"; then
    lit_summary="$lit_summary (GPU lit tests did not run: lit saw no GPU)"
    status=1
  fi
else
  lit_summary="skipped: lit or FileCheck not found (set LIT and FILECHECK)"
fi

say "---- summary ----"
say "gtest, gpu label: $gpu_summary"
say "gtest, cpu:       $cpu_summary"
say "python:           $python_summary"
say "lit test/runtime: $lit_summary"
say "logs: $build/ctest-gpu.log $build/ctest-cpu.log $build/python.log $build/lit.log"
[ $status -eq 0 ] && say "run-gpu-tests: PASSED" || say "run-gpu-tests: FAILED"
exit $status
