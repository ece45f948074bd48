#!/usr/bin/env python3
"""Checks engines with a quantized KV cache against the CPU reference executor
running the same quantized program (sits-exec --stage=optimized with the same
--kv-* options), on a GPU (sits-score) or on the CPU (sits-emulate):

  check_kv_quant.py --sitsc S --exec sits-exec --runner R [--emulate]
                    --work DIR [--configs int8:per-token,int4:per-channel]
                    [--dtypes fp32,fp16] [--hot-window 4]
                    [--channel-block 8] [--sitsc-arg=OPTION ...] MODEL_DIR

For each cache config and dtype: the greedy tokens of greedy.json's prompt
(every one for fp32; for 16-bit engines the stream up to the first step
where the reference's top two logits are closer than the tolerance), the
teacher-forced logits at every generated position through decode only
(prefill 1) and through chunked prefill past the hot window, and the
calibration log of the greedy run: every layer and kv head quantized the
tokens that left the window (per-channel keys: whole blocks), with finite
scales. Prints one line per run; exits non-zero on a failure.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

TOLERANCE = {"fp32": 1e-3, "fp16": 3e-2, "bf16": 1e-1}


class Failure(Exception):
    pass


def run(command, allow_fail=False):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 and not allow_fail:
        raise Failure("`%s` failed (exit %d): %s" % (
            " ".join(command), result.returncode,
            (result.stderr or result.stdout).strip()[-2000:]))
    return result


def parse_tokens(output):
    for line in output.splitlines():
        if line.startswith("tokens[0]:"):
            return [int(t) for t in line.split(":", 1)[1].split()]
    raise Failure("the runner printed no tokens:\n" + output[-1000:])


def check(args, model, bits, keys, dtype):
    name = "%s-%s-%s-%s" % (os.path.basename(model.rstrip("/")), bits, keys,
                            dtype)
    work = args.work
    options = ["--kv-cache=" + bits, "--kv-keys=" + keys,
               "--kv-hot-window=%d" % args.hot_window,
               "--kv-channel-block=%d" % args.channel_block,
               "--max-seq-len=%d" % args.max_seq_len]
    onnx = os.path.join(model, "model.onnx")
    greedy_file = os.path.join(model, "greedy.json")
    with open(greedy_file) as f:
        greedy = json.load(f)
    prompt, count = greedy["prompt"], args.tokens

    # The reference: the quantized program on the CPU.
    dump = os.path.join(work, name + ".reference.json")
    run([args.exec_, onnx, "--stage=optimized", "--greedy=" + greedy_file,
         "--greedy-dump=" + dump] + options, allow_fail=True)
    if not os.path.exists(dump):
        raise Failure("sits-exec wrote no reference for " + name)
    with open(dump) as f:
        reference = json.load(f)
    want = reference["tokens"][:count]
    ref_logits = np.array(reference["logits"][:count], dtype=np.float64)

    engine = os.path.join(work, name + ".sits")
    compile_cmd = [args.sitsc, onnx, "--dtype=" + dtype,
                   "--target=" + args.target,
                   "--max-prefill-tokens=%d" % args.prefill_chunk] + \
        options + args.sitsc_arg
    run(compile_cmd + ["-o", engine, "--force"])
    runner = [args.runner, engine]
    if args.emulate:
        cuda = os.path.join(work, name + ".cu")
        with open(cuda, "w") as out:
            out.write(run(compile_cmd + ["--emit=cuda"]).stdout)
        runner += ["--cuda", cuda, "--poison"]
        if args.reverse_schedule:
            runner.append("--reverse-schedule")

    problems = []
    log = os.path.join(work, name + ".calibration.json")
    if os.path.exists(log):
        os.remove(log)
    got = parse_tokens(run(runner + [
        "generate", "--tokens", ",".join(map(str, prompt)),
        "--max-new-tokens", str(count), "--calibration-log", log]).stdout)
    matched = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                   len(want))
    # A 16-bit engine may take the other branch of a near tie.
    top2 = np.sort(ref_logits, axis=1)[:, -2:]
    near_tie = next((i for i, (lo, hi) in enumerate(top2)
                     if hi - lo < TOLERANCE[dtype] * max(1.0, abs(hi))),
                    len(want))
    required = len(want) if dtype == "fp32" else min(len(want), near_tie)
    if matched < required:
        problems.append("greedy token %d is %d, reference %d" % (
            matched, got[matched], want[matched]))

    # A batch of two prompts of different lengths gives each its own tokens
    # (padding rows in prefill and in the decode bucket quantize nothing).
    short = list(prompt[:3])
    alone = parse_tokens(run(runner + [
        "generate", "--tokens", ",".join(map(str, short)),
        "--max-new-tokens", str(count)]).stdout)
    batched = run(runner + [
        "generate", "--tokens", ",".join(map(str, prompt)) + ";" +
        ",".join(map(str, short)), "--max-new-tokens", str(count)]).stdout
    second = [int(t) for line in batched.splitlines()
              if line.startswith("tokens[1]:")
              for t in line.split(":", 1)[1].split()]
    if parse_tokens(batched) != got or second != alone:
        problems.append("a batch of two prompts gives other tokens than each "
                        "prompt alone")

    # Teacher-forced logits at the generated positions.
    sequence = list(prompt) + want[:-1]
    start = len(prompt) - 1
    scale = max(1.0, float(np.abs(ref_logits).max()))
    worst = 0.0
    for prefill in sorted({1, min(len(sequence), len(prompt) + 3 *
                                  args.prefill_chunk)}):
        out = os.path.join(work, "%s-p%d.npy" % (name, prefill))
        run(runner + ["score", "--tokens", ",".join(map(str, sequence)),
                      "--prefill", str(prefill), "--out", out])
        logits = np.load(out)[0].astype(np.float64)  # positions prefill-1..
        first = max(start, prefill - 1)
        rows = logits[first - (prefill - 1):]
        expected = ref_logits[first - start:first - start + len(rows)]
        error = np.abs(rows - expected).max(axis=1) / (
            1.0 if dtype == "fp32" else scale)
        if not np.all(np.isfinite(error)):
            problems.append("non-finite logits (prefill %d)" % prefill)
            continue
        worst = max(worst, float(error.max()))
        bad = np.nonzero(error >= TOLERANCE[dtype])[0]
        if len(bad):
            problems.append("position %d (prefill %d): error %.3g" % (
                first + bad[0], prefill, error[bad[0]]))

    # The calibration log of the greedy run.
    with open(log) as f:
        calibration = json.load(f)
    positions = len(prompt) + count - 1  # query positions of the run
    left = max(0, positions - args.hot_window)
    key_tokens = left
    if keys == "per-channel":
        key_tokens = left // args.channel_block * args.channel_block
    for layer in calibration["layers"]:
        for head in layer["heads"]:
            for part, expect in (("keys", key_tokens), ("values", left)):
                stats = head[part]
                if stats["tokens"] != expect:
                    problems.append("calibration: layer %d head %d %s: %d "
                                    "tokens quantized, expected %d" % (
                                        layer["layer"], head["head"], part,
                                        stats["tokens"], expect))
                if expect and not (0 < stats["scale_min"] <=
                                   stats["scale_mean"] <= stats["scale_max"]
                                   and stats["mean_squared_error"] > 0):
                    problems.append("calibration: layer %d head %d %s: "
                                    "implausible %s" % (
                                        layer["layer"], head["head"], part,
                                        stats))
    print("%-28s greedy %d/%d  logits %.2e  calibration %d tokens  %s" % (
        name, matched, len(want), worst, left,
        "pass" if not problems else "FAIL: " + "; ".join(problems)))
    return not problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--sitsc", required=True)
    parser.add_argument("--exec", dest="exec_", required=True)
    parser.add_argument("--runner", required=True)
    parser.add_argument("--emulate", action="store_true")
    parser.add_argument("--work", required=True)
    parser.add_argument("--configs", default="int8:per-token,int4:per-channel")
    parser.add_argument("--dtypes", default="fp32,fp16")
    parser.add_argument("--hot-window", type=int, default=4)
    parser.add_argument("--channel-block", type=int, default=8)
    parser.add_argument("--prefill-chunk", type=int, default=8)
    parser.add_argument("--max-seq-len", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--target", default="sm_90a")
    parser.add_argument("--sitsc-arg", action="append", default=[],
                        help="another sitsc option for the engines (not the "
                        "reference), e.g. --sitsc-arg=--decode-split-keys=64")
    parser.add_argument("--reverse-schedule", action="store_true",
                        help="sits-emulate runs a block's threads last to "
                        "first (a missing barrier gives other numbers)")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    ok = True
    for config in args.configs.split(","):
        bits, keys = config.split(":")
        for dtype in args.dtypes.split(","):
            try:
                ok &= check(args, args.model, bits, keys, dtype)
            except Failure as failure:
                print("%s %s %s: FAIL: %s" % (bits, keys, dtype, failure))
                ok = False
    print("all passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
