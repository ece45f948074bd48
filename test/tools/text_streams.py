"""Greedy text streams of an engine against the CPU reference executor.

  text_streams.py record --model MODEL.onnx --lines FILE --count N
                         --new-tokens K --out STREAMS.json [sitsc options]
      runs `sits-exec MODEL --prompt LINE` (the CPU reference executor at
      the optimized stage) for the first N non-empty lines of FILE and
      writes the prompts, their ids, the K greedy ids and the text.
  text_streams.py check --engine ENGINE.sits --streams STREAMS.json
      runs `sits-run ENGINE --prompt LINE --print-ids` for each recorded
      prompt and compares prompt ids, generated ids and printed text.

The two halves can run on different machines: record where the ONNX file
and sits-exec are, check where the GPU is. Prints one line per prompt and
PASSED or FAILED; exits non-zero on any difference.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys


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


def record(args, sitsc_options):
    with open(args.lines, encoding="utf-8") as f:
        lines = [l for l in f.read().splitlines() if l.strip()][:args.count]
    streams = []
    for line in lines:
        text, stderr = run([tool("sits-exec"), args.model, "--stage=optimized",
                            "--prompt=" + line,
                            f"--max-new-tokens={args.new_tokens}",
                            *sitsc_options])
        streams.append({"prompt": line,
                        "prompt_ids": parse_ids(stderr, "prompt ids"),
                        "ids": parse_ids(stderr, "tokens[0]"),
                        "text": text})
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
        if ids != stream["ids"]:
            first = next((i for i, (a, b) in enumerate(zip(ids, stream["ids"]))
                          if a != b), min(len(ids), len(stream["ids"])))
            problems.append(f"ids differ from token {first}: {ids[first:first + 4]}"
                            f" vs the reference's {stream['ids'][first:first + 4]}")
        elif text != stream["text"]:
            problems.append(f"text differs: {text!r} vs {stream['text']!r}")
        failures += bool(problems)
        print(f"prompt {number}: {len(ids)} tokens: "
              + ("; ".join(problems) if problems else "identical"))
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
    args, rest = parser.parse_known_args()
    if args.mode == "record":
        return record(args, rest)
    if rest:
        parser.error("unknown arguments: " + " ".join(rest))
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
