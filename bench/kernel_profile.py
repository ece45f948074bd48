#!/usr/bin/env python3
"""Per-kernel time of one decode step, from Nsight Compute on the GPU machine.

    bench/kernel_profile.py ENGINE --sits-bench PATH [--batch 1] [--context 32]
                            [--ncu ncu] [--json FILE] [--bench-arg ARG ...]

Runs sits-bench without CUDA graphs under `ncu` (clocks left alone, only
gpu__time_duration), skips the prefill and warm-up launches, and prints the
kernels of decode steps grouped by kernel family (the generated name less its
`sits_` prefix and `_N` suffix): launches per step, microseconds per step and
share of the step. ncu runs each kernel alone, so the sum is the time of the
kernels themselves, without launch gaps or overlap: the difference to
sits-bench's ms/token is what launching costs.
"""
import argparse
import collections
import csv
import glob
import io
import json
import re
import shutil
import subprocess
import sys


def family(name):
    name = re.sub(r"^sits_", "", name)
    return re.sub(r"_\d+$", "", name)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("engine")
    p.add_argument("--sits-bench", required=True)
    p.add_argument("--ncu", help="default: ncu on PATH, in CUDA or in "
                   "/opt/nvidia/nsight-compute")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--context", type=int, default=32)
    p.add_argument("--steps", type=int, default=4, help="decode steps profiled")
    p.add_argument("--json")
    p.add_argument("--bench-arg", action="append", default=[],
                   help="another sits-bench argument (e.g. "
                   "--bench-arg=--tvc-no-fallback)")
    a = p.parse_args()
    if not a.ncu:
        found = ([shutil.which("ncu")] +
                 sorted(glob.glob("/usr/local/cuda*/bin/ncu")) +
                 sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu")))
        found = [f for f in found if f]
        if not found:
            sys.exit("kernel_profile: no ncu found (give --ncu)")
        a.ncu = found[0]

    # sits-bench runs one warm-up request and the timed one; each is a
    # prefill and new-tokens - 1 decode steps. Profile everything (a few
    # steps) and keep the kernels of the last request's decode steps.
    cmd = [a.ncu, "--clock-control", "none", "--metrics",
           "gpu__time_duration.sum", "--csv", "--print-units", "base",
           a.sits_bench, a.engine, "--batch", str(a.batch), "--context",
           str(a.context), "--new-tokens", str(a.steps + 1), "--repeats", "1",
           "--no-cuda-graph"] + a.bench_arg
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-3000:] + out.stderr[-3000:])
        sys.exit("kernel_profile: ncu failed")
    lines = [l for l in out.stdout.splitlines() if l.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    # ncu prints numbers with thousands separators ("4,960").
    kernels = [(r["Kernel Name"], float(r["Metric Value"].replace(",", "")))
               for r in rows if r.get("Metric Name") == "gpu__time_duration.sum"]
    if not kernels:
        sys.exit("kernel_profile: ncu reported no kernels")
    # A decode step ends with the runtime's advance kernel; the prefill's
    # launches precede the first decode step of each request.
    ends = [i for i, (n, _) in enumerate(kernels) if "advance" in n.lower()]
    if len(ends) < a.steps + 1:
        sys.exit("kernel_profile: found %d step ends, expected more" % len(ends))
    steps = [kernels[ends[i - 1] + 1:ends[i] + 1]
             for i in range(len(ends) - a.steps, len(ends))]
    per = collections.OrderedDict()
    for step in steps:
        for name, ns in step:
            f = family(name.split("(")[0])
            entry = per.setdefault(f, [0, 0.0])
            entry[0] += 1
            entry[1] += ns
    total = sum(v[1] for v in per.values()) / len(steps)
    print("batch %d, context %d: %d decode steps, kernels alone %.1f us/step"
          % (a.batch, a.context, len(steps), total / 1e3))
    print("%-28s %8s %10s %7s" % ("kernel", "per step", "us/step", "share"))
    result = []
    for f, (count, ns) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        us = ns / len(steps) / 1e3
        print("%-28s %8.1f %10.1f %6.1f%%"
              % (f, count / len(steps), us, 100 * ns / len(steps) / total))
        result.append({"kernel": f, "launches_per_step": count / len(steps),
                       "us_per_step": us})
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"engine": a.engine, "batch": a.batch,
                       "context": a.context, "kernels_us_per_step": total / 1e3,
                       "kernels": result}, fh, indent=1)


if __name__ == "__main__":
    main()
