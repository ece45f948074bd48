#!/usr/bin/env python3
"""Sums Nsight Compute's `--csv --page details` files by kernel name.

For each file: per kernel name, the launches, the total and mean duration,
and the means of the metrics that say what bound the kernel (memory and
DRAM throughput, cache hit rates, cycles per issued instruction,
registers, achieved occupancy). Used by bench/device/decode-kernels.sh and persistent.sh.
"""
import csv
import sys
from collections import defaultdict

KEPT = [
    ("Duration", "us"),
    ("DRAM Throughput", "dram%"),
    ("Memory Throughput", "mem%"),
    ("L1/TEX Hit Rate", "L1hit%"),
    ("L2 Hit Rate", "L2hit%"),
    ("Mem Busy", "busy%"),
    ("Max Bandwidth", "maxbw%"),
    ("Warp Cycles Per Issued Instruction", "cpi"),
    ("Registers Per Thread", "regs"),
    ("Grid Size", "grid"),
]


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def summarize(path):
    launches = defaultdict(set)
    values = defaultdict(lambda: defaultdict(list))
    units = {}
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    for row in csv.DictReader(lines):
        name = row.get("Kernel Name", "?")
        launches[name].add(row.get("ID"))
        metric = row.get("Metric Name", "")
        value = number(row.get("Metric Value", ""))
        if value is not None:
            values[name][metric].append(value)
            units[metric] = row.get("Metric Unit", "")
    print(f"== {path}")
    header = ["kernel", "n", "total_us"] + [short for _, short in KEPT]
    print("  ".join(header))
    for name in sorted(launches, key=lambda n: -sum(values[n]["Duration"])):
        durations = values[name]["Duration"]
        scale = 1e-3 if units.get("Duration") in ("nsecond", "ns") else 1.0
        if units.get("Duration") in ("msecond", "ms"):
            scale = 1e3
        cells = [name, str(len(launches[name])),
                 f"{sum(durations) * scale:.1f}"]
        for metric, _ in KEPT:
            seen = values[name].get(metric, [])
            mean = sum(seen) / len(seen) if seen else float("nan")
            if metric == "Duration":
                mean *= scale
            cells.append(f"{mean:.1f}")
        print("  ".join(cells))


for arg in sys.argv[1:]:
    try:
        summarize(arg)
    except Exception as error:  # a failed ncu run leaves a partial file
        print(f"== {arg}: {error}")
