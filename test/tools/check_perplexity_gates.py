"""Compares `sitsc --reference-perplexity` runs against a baseline.

    python3 check_perplexity_gates.py --baseline fp32.out \\
        --gate int8-weights int8w.out 0.5 --gate int4-kv int4kv.out 1.5

Each FILE is sitsc's output. A gate passes when the configuration's
perplexity is at most MAX_PERCENT above the baseline's, on the same number
of predicted tokens. Prints one line per gate (perplexities, the change in
percent, the limit) and exits 1 when a gate fails or an output is unusable.
"""

import argparse
import math
import re
import sys

LINE = re.compile(r"perplexity: (\d+) tokens predicted in windows of (\d+), "
                  r"mean NLL ([0-9.]+) nats/token")


def read(path):
    try:
        text = open(path).read()
    except OSError as error:
        sys.exit("check_perplexity_gates.py: cannot read %s: %s" % (path, error))
    match = LINE.search(text)
    if not match:
        sys.exit("check_perplexity_gates.py: %s holds no sitsc perplexity line"
                 % path)
    return int(match.group(1)), int(match.group(2)), float(match.group(3))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--gate", nargs=3, action="append", default=[],
                        metavar=("NAME", "FILE", "MAX_PERCENT"))
    args = parser.parse_args()
    tokens, window, base_nll = read(args.baseline)
    print("baseline: %d tokens in windows of %d, perplexity %.4f"
          % (tokens, window, math.exp(base_nll)))
    failed = False
    for name, path, limit in args.gate:
        count, gate_window, nll = read(path)
        if count != tokens or gate_window != window:
            print("%s: FAILED: %d tokens in windows of %d, the baseline has %d "
                  "in windows of %d" % (name, count, gate_window, tokens,
                                        window))
            failed = True
            continue
        change = 100.0 * (math.exp(nll - base_nll) - 1.0)
        passed = change <= float(limit)
        failed |= not passed
        print("%s: perplexity %.4f, %+.3f%% (limit +%s%%): %s"
              % (name, math.exp(nll), change, limit,
                 "PASSED" if passed else "FAILED"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
