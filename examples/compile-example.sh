#!/usr/bin/env bash
# The main job on the bundled example: compile llama_bytes (a small trained
# byte-level language model, weights stored in float16) through the whole
# pipeline into an engine, and generate text with it where a GPU exists.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=build/bin
model=examples/models/llama_bytes/model.onnx
out=build/examples
mkdir -p "$out"

echo "== sitsc $model --emit=optimized (audit summary)"
"$bin/sitsc" "$model" --emit=optimized --audit=- -o "$out/llama_bytes.optimized.mlir" \
  | tee "$out/llama_bytes.audit.txt"
echo
echo "== the decode step, first layer ($out/llama_bytes.optimized.mlir)"
sed -n '/func.func @decode/,/sits.add/p' "$out/llama_bytes.optimized.mlir"
echo
echo "== checked on the CPU reference executor: greedy continuation of \" the fea\""
"$bin/sitsc" "$model" --verify-greedy=examples/models/llama_bytes/greedy.json
echo
echo "== sitsc $model -o $out/llama_bytes.sits"
"$bin/sitsc" "$model" -o "$out/llama_bytes.sits" --force
"$bin/sits-run" --check "$out/llama_bytes.sits"
echo
if [ -x "$bin/sits-run" ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "== sits-run: continue \"def main(\" on the GPU"
  "$bin/sits-run" "$out/llama_bytes.sits" --prompt-bytes "def main(" --max-new-tokens 96
else
  echo "== no GPU here: the engine is written and validated; run it where one is with"
  echo "   $bin/sits-run $out/llama_bytes.sits --prompt-bytes \"def main(\" --max-new-tokens 96"
fi
