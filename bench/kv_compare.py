#!/usr/bin/env python3
"""Compares two sits-bench --json files of one model, an fp16 KV cache and a
quantized one, at the contexts and batches both measured:

  kv_compare.py sits-<shape>.json kv-<shape>-int4.json

Prints per (batch, context) the decode ms per token of each, the speedup,
and the bytes per step each read (sits-bench counts the bytes the cache
really holds: cold rows and scales outside the hot window), then the
quantization statistics of the quantized run (sits-bench's kv_calibration).
The issue's target: attention at 8192 context with int4 KV >= 2.5x faster
than fp16 KV (the whole step is printed; attention is most of it at long
contexts and large batches).
"""

import json
import sys


def results(path):
    with open(path) as f:
        data = json.load(f)
    return {(r["batch"], r["context"]): r for r in data.get("results", [])}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    base, quant = results(sys.argv[1]), results(sys.argv[2])
    print("%6s %8s %12s %12s %8s %14s %14s" % (
        "batch", "context", "fp16 KV ms", "quant KV ms", "speedup",
        "fp16 B/step", "quant B/step"))
    for key in sorted(set(base) & set(quant)):
        b, q = base[key], quant[key]
        print("%6d %8d %12.4f %12.4f %7.2fx %14.3e %14.3e" % (
            key[0], key[1], b["decode_ms_per_token"],
            q["decode_ms_per_token"],
            b["decode_ms_per_token"] / q["decode_ms_per_token"],
            b["bytes_per_step"], q["bytes_per_step"]))
    for key in sorted(quant):
        total = quant[key].get("kv_calibration", {}).get("total")
        if total:
            print("calibration (batch %d, context %d): keys %s; values %s" % (
                key[0], key[1], total["keys"], total["values"]))
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
