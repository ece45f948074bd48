#!/usr/bin/env python3
"""Checks the CPU reference executor (sits-exec) op by op against independent
evaluations: numpy in float64 for the sits ops, onnxruntime on one-node ONNX
models for the onnx ops.

  reference_check.py --sits-exec sits-exec --family attention --family rope \
      --dtype f32 --draws 12 --seed 1 --workdir /tmp/work

Each draw picks random shapes (batch > 1, GQA head ratios, partial rotary
dims, masks of several ranks, sliding windows, past lengths, dynamic dims)
and random data. On a mismatch it prints the case (op, shapes, parameters),
the max error and the first bad element, and exits 1 after all draws.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from reference_common import run_case  # noqa: E402
import reference_sits_cases  # noqa: E402


def families():
    table = {"sits." + name: case for name, case in
             reference_sits_cases.FAMILIES.items()}
    try:
        import reference_onnx_cases  # needs onnx and onnxruntime
    except ImportError as error:
        print("note: onnx families unavailable: %s" % error)
        return table
    table.update({"onnx." + name: case for name, case in
                  reference_onnx_cases.FAMILIES.items()})
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sits-exec", default="sits-exec")
    parser.add_argument("--family", action="append", default=[],
                        help="sits.NAME or onnx.NAME; a prefix ending in '.' "
                             "takes every family of that dialect")
    parser.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    parser.add_argument("--draws", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()

    table = families()
    if args.list:
        print("\n".join(sorted(table)))
        return 0
    chosen = []
    for name in args.family:
        matches = [f for f in sorted(table) if f == name or
                   (name.endswith(".") and f.startswith(name))]
        if not matches:
            print("unknown family '%s'; known: %s" % (name, ", ".join(sorted(table))))
            return 2
        chosen += matches
    if not chosen:
        print("no --family given")
        return 2

    sits_exec = shutil.which(args.sits_exec) or args.sits_exec
    workdir = args.workdir or tempfile.mkdtemp(prefix="reference_check_")
    if os.path.isdir(workdir):
        shutil.rmtree(workdir)
    os.makedirs(workdir)

    failures, count, start = 0, 0, time.time()
    for family in chosen:
        # Seeded per family, so that adding a family changes no other draws.
        seed = (args.seed * 1000003 + zlib.crc32(
            ("%s/%s" % (family, args.dtype)).encode())) % 2 ** 32
        rng = np.random.default_rng(seed)
        for draw in range(args.draws):
            try:
                case = table[family](rng, args.dtype)
            except Exception as error:  # the oracle itself failed
                failures += 1
                count += 1
                print("FAIL %s [%s] draw %d: drawing the case failed: %s" % (
                    family, args.dtype, draw, error))
                continue
            problems = run_case(case, sits_exec, workdir, count)
            count += 1
            if problems:
                failures += 1
                print("FAIL %s [%s] draw %d: %s" % (family, args.dtype, draw, case.name))
                for problem in problems:
                    print("  " + problem.replace("\n", "\n  "))
            else:
                print("ok   %s [%s] draw %d: %s" % (family, args.dtype, draw, case.name))
    print("%d of %d cases failed (%.1f s)" % (failures, count, time.time() - start))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
