#!/usr/bin/env python3
"""Compiles a generated test program (make_program.py) into engines and runs
their kernels on the CPU with sits-emulate; the teacher-forced logits at every
position must match the reference executor's on the program's @forward.

  check_program.py --preset gemma --dtypes fp32,fp16 --work DIR

Positions are covered three ways: prefill 1 token then decode the rest,
prefill half then decode, prefill everything (in chunks of
--max-prefill-tokens). Prints one line per run; exits non-zero on a mismatch.
"""

import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# Absolute for fp32; relative to the largest reference logit for the 16-bit
# types, whose rounding error grows with the weights' scale.
TOLERANCE = {"fp32": 1e-3, "fp16": 2e-3, "bf16": 1e-2}


def run(*command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("`%s` failed:\n%s" % (" ".join(command),
                                      result.stderr or result.stdout))
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", required=True)
    parser.add_argument("--dtypes", default="fp32,fp16")
    parser.add_argument("--work", required=True)
    parser.add_argument("--seq", type=int, default=10)
    parser.add_argument("--max-prefill-tokens", type=int, default=4)
    parser.add_argument("--reverse-schedule", action="store_true",
                        help="run the threads of a block last to first")
    parser.add_argument("--sitsc-arg", action="append", default=[],
                        help="one more sitsc option (repeatable), e.g. "
                        "--sitsc-arg=--kv-layout=paged")
    parser.add_argument("--emulate-arg", action="append", default=[],
                        help="one more sits-emulate option (repeatable)")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    program = os.path.join(args.work, args.preset + ".mlir")
    run(sys.executable, os.path.join(HERE, "make_program.py"), "--preset",
        args.preset, "--seed", "7", "-o", program)

    with open(program) as f:
        signature = f.read().split("@forward")[1].split("{")[0]
    vocab = int(signature.split("-> tensor<?x?x")[1].split("x")[0])
    rng = np.random.default_rng(11)
    ids = rng.integers(0, vocab, size=(2, args.seq)).astype(np.int64)
    np.save(os.path.join(args.work, "ids.npy"), ids)
    reference_dir = os.path.join(args.work, "reference")
    os.makedirs(reference_dir, exist_ok=True)
    run("sits-exec", program, "--function", "forward", "--input",
        os.path.join(args.work, "ids.npy"), "--output-dir", reference_dir)
    reference = np.load(os.path.join(reference_dir, "result_0.npy"))
    tokens = ";".join(",".join(str(t) for t in row) for row in ids)

    failed = False
    for dtype in args.dtypes.split(","):
        options = ["--dtype=" + dtype, "--max-seq-len=32", "--max-batch=2",
                   "--max-prefill-tokens=%d" % args.max_prefill_tokens
                   ] + args.sitsc_arg
        engine = os.path.join(args.work, "%s-%s.sits" % (args.preset, dtype))
        cuda = engine[:-len(".sits")] + ".cu"
        run("sitsc", program, "-o", engine, "--force", *options)
        with open(cuda, "w") as out:
            out.write(run("sitsc", program, "--emit=cuda", *options))
        worst = 0.0
        for prefill in sorted({1, args.seq // 2, args.seq}):
            out = engine[:-len(".sits")] + "-p%d.npy" % prefill
            extra = (["--reverse-schedule"] if args.reverse_schedule
                     else []) + args.emulate_arg
            run("sits-emulate", engine, "--cuda", cuda, "--poison", *extra,
                "score", "--tokens", tokens, "--prefill", str(prefill),
                "--out", out)
            got = np.load(out)
            error = np.abs(got - reference[:, prefill - 1:, :])
            worst = max(worst, float(np.max(error)))
        scale = 1.0 if dtype == "fp32" else float(np.max(np.abs(reference)))
        ok = worst < TOLERANCE[dtype] * scale
        failed |= not ok
        print("%s %s: max logit error %.2e (limit %.1e) %s" % (
            args.preset, dtype, worst, TOLERANCE[dtype] * scale,
            "ok" if ok else "FAIL"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
