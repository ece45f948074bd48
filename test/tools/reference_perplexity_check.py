#!/usr/bin/env python3
"""Checks sits-exec --perplexity on a byte-level model against onnxruntime.

  reference_perplexity_check.py --sits-exec sits-exec \
      --model llama_bytes/model.onnx --text some.py --window 64 \
      --max-tokens 320 --stage imported --stage optimized --workdir DIR

The token ids are the text's bytes (llama_bytes: token = byte). onnxruntime
runs the same consecutive windows; the mean NLL must agree within --tolerance
nats at every stage. Fails loudly with both numbers.
"""

import argparse
import os
import re
import subprocess
import sys

import numpy as np
import onnxruntime


def onnxruntime_nll(model, ids, window):
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    total, count = 0.0, 0
    for start in range(0, len(ids) - 1, window):
        chunk = ids[start:start + window]
        if len(chunk) < 2:
            break
        logits = session.run(None, {name: chunk[None, :]})[0][0].astype(np.float64)
        top = logits.max(axis=-1, keepdims=True)
        log_sum = np.log(np.exp(logits - top).sum(axis=-1)) + top[:, 0]
        total += float((log_sum[:-1] - logits[np.arange(len(chunk) - 1), chunk[1:]]).sum())
        count += len(chunk) - 1
    return total / count, count


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sits-exec", default="sits-exec")
    parser.add_argument("--model", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=320)
    parser.add_argument("--stage", action="append", default=[])
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    with open(args.text, "rb") as f:
        ids = np.frombuffer(f.read(), dtype=np.uint8)[:args.max_tokens].astype(np.int64)
    ids_path = os.path.join(args.workdir, "ids.npy")
    np.save(ids_path, ids)
    expected, count = onnxruntime_nll(args.model, ids, args.window)
    print("onnxruntime: %d predicted tokens, mean NLL %.6f" % (count, expected))

    failed = False
    for stage in args.stage or ["imported"]:
        process = subprocess.run(
            [args.sits_exec, args.model, "--stage", stage, "--perplexity", ids_path,
             "--window", str(args.window), "--max-seq-len", str(args.window)],
            capture_output=True, text=True, timeout=600)
        if process.returncode != 0:
            print("FAIL stage %s: sits-exec exited %d:\n%s" % (
                stage, process.returncode, process.stderr.strip()))
            failed = True
            continue
        tokens = int(re.search(r"predicted tokens: (\d+)", process.stdout).group(1))
        nll = float(re.search(r"mean NLL: ([-0-9.e]+)", process.stdout).group(1))
        ok = tokens == count and abs(nll - expected) <= args.tolerance
        print("%s stage %s: %d predicted tokens, mean NLL %.6f (onnxruntime %.6f, "
              "difference %.2e)" % ("ok  " if ok else "FAIL", stage, tokens, nll,
                                     expected, abs(nll - expected)))
        failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
