#!/usr/bin/env bash
# One device call for text in and out: the runtime's GPU tests with the
# Python package (test/runtime/run-gpu-tests.sh: gtest, pytest with GPU
# skips counted as failures, lit test/runtime including text-generation.test
# against the CPU reference executor), then `pip install .` of the package
# into the machine's Python, and examples/python/chat.py and
# sits-example-generate on an engine compiled with the Llama-3-shaped test
# tokenizer, with sits-run --prompt --stats for the numbers.
#
# Here, before the call: bench/device/prepare.sh (sitsc, sits-exec and the
# text libraries' headers and archives in .device/); then call with carry
# [".device"]. $OUT gets text-io.log and the test logs.
set -uo pipefail
FINAL=${OUT:-$(pwd)/bench/out}
W=/tmp/text-io
mkdir -p "$FINAL" "$W"
export PATH="$(pwd)/.device:$PATH"
say() { printf '[%s] %s\n' "$(date +%T)" "$*" | tee -a "$FINAL/text-io.log"; }
status=0

say "$(nvidia-smi -L | head -1)"
# lit and FileCheck for test/runtime's lit tests, from the wheels that
# bench/device/prepare.sh put in .device/wheels (the machine has no LLVM).
if ! command -v FileCheck >/dev/null && ls .device/wheels/*.whl >/dev/null 2>&1; then
  py=$W/litpy tools=$W/littools
  python3 -m pip install -q --upgrade --no-index --no-deps --target "$py" .device/wheels/*.whl
  mkdir -p "$tools"
  printf '#!/bin/sh\nPYTHONPATH=%s exec python3 %s/bin/lit "$@"\n' "$py" "$py" >"$tools/lit"
  printf '#!/bin/sh\nPYTHONPATH=%s exec python3 -m filecheck "$@"\n' "$py" >"$tools/FileCheck"
  printf '#!/bin/sh\n"$@"\n[ $? -ne 0 ]\n' >"$tools/not"
  chmod +x "$tools"/*
  export LIT=$tools/lit FILECHECK=$tools/FileCheck
  say "lit and FileCheck: $(PYTHONPATH=$py python3 -c 'import lit; print("lit", lit.__version__)'), Python filecheck"
fi
test/runtime/run-gpu-tests.sh "$W/build" 2>&1 | tee -a "$FINAL/text-io.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
for f in gpu-tests.log ctest-gpu.log ctest-cpu.log python.log lit.log; do
  [ -f "$W/build/$f" ] && cp "$W/build/$f" "$FINAL/"
done

say "pip install . (scikit-build-core, no build isolation: no internet here)"
if CMAKE_PREFIX_PATH="$(pwd)/.device/deps" CMAKE_BUILD_PARALLEL_LEVEL=16 \
   python3 -m pip install --no-build-isolation --no-deps . >"$FINAL/pip.log" 2>&1; then
  say "installed: $(cd /tmp && python3 -c 'import sits; print(sits.__file__)')"
else
  status=1
  tail -20 "$FINAL/pip.log" | tee -a "$FINAL/text-io.log"
fi

tok=$W/tok
mkdir -p "$tok"
cp test/runtime/tokenizer/Inputs/llama3-512.json "$tok/tokenizer.json"
python3 -c "import json, sys; json.dump({'bos_token': '<|begin_of_text|>', 'eos_token': '<|eot_id|>', 'chat_template': open(sys.argv[1]).read()}, open(sys.argv[2], 'w'))" \
  test/runtime/chat/Inputs/templates/llama3.jinja "$tok/tokenizer_config.json"
sitsc test/models/llama_gqa/model.onnx --tokenizer="$tok" -o "$W/gqa.sits" --force \
  --max-seq-len=256 --max-batch=8 | tee -a "$FINAL/text-io.log"
say "examples/python/chat.py on the installed package"
(cd /tmp && python3 "$OLDPWD/examples/python/chat.py" "$W/gqa.sits" "Hello there!") \
  >>"$FINAL/text-io.log" 2>&1 || status=1
say "sits-example-generate"
"$W/build/bin/sits-example-generate" "$W/gqa.sits" "The quick brown fox" 32 \
  >>"$FINAL/text-io.log" 2>&1 || status=1
for batch in 1 8; do
  say "sits-run --prompt --stats, batch $batch, 200 tokens"
  "$W/build/bin/sits-run" "$W/gqa.sits" --prompt "The quick brown fox" \
    --max-new-tokens 200 --ignore-eos --batch $batch --stats \
    2>&1 >/dev/null | tee -a "$FINAL/text-io.log"
done
[ $status -eq 0 ] && say "text-io: PASSED" || say "text-io: FAILED"
exit $status
