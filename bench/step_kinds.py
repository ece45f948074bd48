#!/usr/bin/env python3
"""What a serving level's backend steps were: sits-serve's per-kind step
metrics (decode, prefill, bulk) in one /metrics text, less those in an
earlier one (none: since the server started). Prints one line:

  steps: decode N x MEAN ms (SECONDS s), prompt P, sampled S; prefill ...

  step_kinds.py METRICS_AFTER [METRICS_BEFORE]
"""

import re
import sys


def read(path):
    values = {}
    if path:
        with open(path) as text:
            for line in text:
                match = re.match(r'(sits_step_\w+)\{kind="(\w+)"\} (\S+)', line)
                if match:
                    values[(match[1], match[2])] = float(match[3])
    return values


def main():
    if not 2 <= len(sys.argv) <= 3:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    now = read(sys.argv[1])
    before = read(sys.argv[2] if len(sys.argv) == 3 else "")
    parts = []
    for kind in ("decode", "prefill", "bulk"):
        def change(name):
            return now.get((name, kind), 0) - before.get((name, kind), 0)
        count = change("sits_step_duration_seconds_count")
        if count:
            seconds = change("sits_step_duration_seconds_sum")
            parts.append("%s %d x %.2f ms (%.1f s), prompt %d, sampled %d" % (
                kind, count, 1e3 * seconds / count, seconds,
                change("sits_step_prompt_tokens_total"),
                change("sits_step_sampled_rows_total")))
    print("  steps: " + ("; ".join(parts) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
