#!/usr/bin/env bash
# One device call for the whole runtime on the GPU, the server included:
# test/runtime/run-gpu-tests.sh (every gtest labelled gpu and serve-gpu
# through the openai client, the CPU ctest, the Python package's tests with
# SITS_REQUIRE_GPU=1, lit test/runtime).
#
# Here, before the call: as for bench/device/serve-gpu-tests.sh (carry
# [".device-pack", ".device-serve"]). $OUT gets the logs.
set -uo pipefail
NAME=runtime-gpu
. bench/device/serve-env.sh
python3 -m pip install -q --no-index --no-deps --target "$W/py" "$data"/wheels/*.whl \
  >"$FINAL/pip.log" 2>&1 || say "openai wheels did not install"
export PYTHONPATH=$W/py
# lit and FileCheck for test/runtime's lit tests, from .device/wheels (the
# machine has no LLVM).
litpy=$W/litpy tools=$W/littools
python3 -m pip install -q --upgrade --no-index --no-deps --target "$litpy" .device/wheels/*.whl
mkdir -p "$tools"
printf '#!/bin/sh\nPYTHONPATH=%s exec python3 %s/bin/lit "$@"\n' "$litpy" "$litpy" >"$tools/lit"
printf '#!/bin/sh\nPYTHONPATH=%s exec python3 -m filecheck "$@"\n' "$litpy" >"$tools/FileCheck"
printf '#!/bin/sh\n"$@"\n[ $? -ne 0 ]\n' >"$tools/not"
chmod +x "$tools"/*
export LIT=$tools/lit FILECHECK=$tools/FileCheck
say "$(nvidia-smi -L | head -1)"
test/runtime/run-gpu-tests.sh "$W/build" 2>&1 | tee -a "$FINAL/$NAME.log"
status=${PIPESTATUS[0]}
for f in gpu-tests.log ctest-gpu.log ctest-cpu.log python.log lit.log; do
  [ -f "$W/build/$f" ] && cp "$W/build/$f" "$FINAL/"
done
say "done: exit $status"
exit "$status"
