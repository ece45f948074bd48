#!/usr/bin/env bash
# The main job on the bundled example: compile llama_bytes (a small trained
# byte-level language model, weights stored in float16) through the whole
# pipeline and print what each stage made of it.
set -euo pipefail
cd "$(dirname "$0")/.."

sitsc=build/bin/sitsc
model=examples/models/llama_bytes/model.onnx
out=build/examples
mkdir -p "$out"

echo "== sitsc $model --emit=optimized (audit summary first)"
"$sitsc" "$model" --emit=optimized --audit=- -o "$out/llama_bytes.optimized.mlir" \
  | tee "$out/llama_bytes.audit.txt"
echo
echo "== the decode step (first lines of $out/llama_bytes.optimized.mlir)"
sed -n '/func.func @decode/,/sits.add/p' "$out/llama_bytes.optimized.mlir"
echo
echo "== checked on the CPU reference executor: greedy continuation of \" the fea\""
"$sitsc" "$model" --verify-greedy=examples/models/llama_bytes/greedy.json
