"""Greedy text streams of an engine against the CPU reference executor.

  text_streams.py record --model MODEL.onnx --lines FILE --count N
                         --new-tokens K --out STREAMS.json [sitsc options]
      runs `sits-exec MODEL --prompt LINE` (the CPU reference executor at
      the optimized stage) for the first N non-empty lines of FILE and
      writes the prompts, their ids, the K greedy ids, the text, and the
      first position whose top two logits are a near tie (less than 2e-2
      apart, the logit error the fp16 engines are held to: where a 16-bit
      engine may rightly take the other token).
  text_streams.py check --engine ENGINE.sits --streams STREAMS.json [--exact]
      runs `sits-run ENGINE --prompt LINE --print-ids` for each recorded
      prompt and compares prompt ids, generated ids and printed text: the
      ids must be the reference's up to its first near tie, and all of them
      with --exact (fp32 engines); the text must be the reference's when
      the ids are.

The two halves can run on different machines: record where the ONNX file
and sits-exec are, check where the GPU is. Prints one line per prompt and
PASSED or FAILED; exits non-zero on any difference.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The logit error the fp16 engines are held to (test/gpu/check_models.py).
NEAR_TIE = 2e-2


def tool(name):
    path = shutil.which(name)
    if path is None:
        sys.exit(f"text_streams.py: {name} is not on PATH")
    return path


def parse_ids(stderr, label):
    line = re.search(r"^" + re.escape(label) + r": ?(.*)$", stderr, re.M)
    if line is None:
        raise ValueError(f"no '{label}:' line in:\n{stderr}")
    return [int(x) for x in line.group(1).split()]


def run(command):
    out = subprocess.run(command, capture_output=True)
    stderr = out.stderr.decode("utf-8", "replace")
    if out.returncode != 0:
        sys.exit(f"text_streams.py: {command[0]} failed:\n{stderr}")
    return out.stdout.decode("utf-8"), stderr


def first_near_tie(model, prompt_ids, ids, sitsc_options):
    """The first position of `ids` where the reference's top two logits are
    less than NEAR_TIE apart (len(ids) when none is)."""
    with tempfile.TemporaryDirectory() as folder:
        greedy = os.path.join(folder, "greedy.json")
        dump = os.path.join(folder, "dump.json")
        with open(greedy, "w") as f:
            json.dump({"prompt": prompt_ids, "greedy": ids}, f)
        run([tool("sits-exec"), model, "--stage=optimized",
             "--greedy=" + greedy, "--greedy-dump=" + dump, *sitsc_options])
        with open(dump) as f:
            logits = json.load(f)["logits"]
    for position, row in enumerate(logits[:len(ids)]):
        low, high = sorted(row)[-2:]
        if high - low < NEAR_TIE:
            return position
    return len(ids)


def record(args, sitsc_options):
    with open(args.lines, encoding="utf-8") as f:
        lines = [l for l in f.read().splitlines() if l.strip()][:args.count]
    streams = []
    for line in lines:
        text, stderr = run([tool("sits-exec"), args.model, "--stage=optimized",
                            "--prompt=" + line,
                            f"--max-new-tokens={args.new_tokens}",
                            *sitsc_options])
        prompt_ids = parse_ids(stderr, "prompt ids")
        ids = parse_ids(stderr, "tokens[0]")
        streams.append({"prompt": line, "prompt_ids": prompt_ids, "ids": ids,
                        "text": text,
                        "first_near_tie": first_near_tie(
                            args.model, prompt_ids, ids, sitsc_options)})
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"new_tokens": args.new_tokens, "streams": streams}, f,
                  ensure_ascii=False)
    print(f"recorded {len(streams)} streams of {args.new_tokens} tokens")
    return 0


def check(args):
    with open(args.streams, encoding="utf-8") as f:
        recorded = json.load(f)
    failures = 0
    for number, stream in enumerate(recorded["streams"]):
        text, stderr = run([tool("sits-run"), args.engine, "--prompt",
                            stream["prompt"], "--max-new-tokens",
                            str(recorded["new_tokens"]), "--print-ids"])
        problems = []
        if parse_ids(stderr, "prompt ids") != stream["prompt_ids"]:
            problems.append("prompt ids differ")
        ids = parse_ids(stderr, "tokens[0]")
        note = "identical"
        if ids != stream["ids"]:
            want = stream["ids"]
            first = next((i for i, (a, b) in enumerate(zip(ids, want))
                          if a != b), min(len(ids), len(want)))
            tie = len(want) if args.exact else stream["first_near_tie"]
            if first < tie or len(ids) != len(want):
                problems.append(
                    f"ids differ from token {first}: {ids[first:first + 4]}"
                    f" vs the reference's {want[first:first + 4]}")
            else:
                note = (f"the reference's up to token {first}, after its "
                        f"near tie at token {tie}")
        elif text != stream["text"]:
            problems.append(f"text differs: {text!r} vs {stream['text']!r}")
        failures += bool(problems)
        print(f"prompt {number}: {len(ids)} tokens: "
              + ("; ".join(problems) if problems else note))
    print("PASSED" if failures == 0 else f"FAILED ({failures} prompts)")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--model", required=True)
    rec.add_argument("--lines", required=True)
    rec.add_argument("--count", type=int, default=3)
    rec.add_argument("--new-tokens", type=int, default=48)
    rec.add_argument("--out", required=True)
    chk = sub.add_parser("check")
    chk.add_argument("--engine", required=True)
    chk.add_argument("--streams", required=True)
    chk.add_argument("--exact", action="store_true",
                     help="every id must be the reference's (fp32 engines)")
    args, rest = parser.parse_known_args()
    if args.mode == "record":
        return record(args, rest)
    if rest:
        parser.error("unknown arguments: " + " ".join(rest))
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
