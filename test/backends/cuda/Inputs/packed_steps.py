"""Runs one engine on the emulator three ways and compares the tokens.

    packed_steps.py --work DIR --model MODEL.onnx --name NAME -- SITSC_ARGS

Four prompts of 3 to 19 tokens: a plain run (one batched prefill, then
decode steps), and a staggered run (sequence b joins after 2b steps, its
prompt in chunks of 5 beside the others' decode tokens) with its mixed
steps packed and padded. Packed and padded run the same program (the
prefill, --gemm-prefill: padded steps are larger) and must give the same
tokens. The staggered run as the engine runs it (its steps of few rows on
prefill_few) and the padded one must give the plain run's tokens, but for
a near tie: a decode token that goes through a prefill's kernels in one
run and the decode's in the other may round differently, so where two
runs part, the plain run's logits there (sits-emulate score) must hold
both tokens within TIE of each other. Prints "NAME: 4 sequences, N mixed
steps: plain = packed = padded" (and the near ties), else the first
difference, and exits 1.
"""

import argparse
import subprocess
import sys

import numpy

PROMPTS = [
    [1, 5, 9, 200, 31, 7, 7, 64, 3, 90, 12, 400, 17, 18, 19, 20, 21, 22, 23],
    [9, 8, 7],
    [44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54],
    [300, 301, 302, 303, 304, 305, 306],
]
NEW_TOKENS = 12
TIE = 1e-3
STAGGER = 2
CHUNK = 5


def mixed_steps():
    """The staggered run's steps that hold a prompt chunk and a decode
    token (sits-emulate's schedule, counted the same way)."""
    fed = [0] * len(PROMPTS)
    made = [0] * len(PROMPTS)
    count = 0
    step = 0
    while True:
        chunks = decodes = 0
        for b, prompt in enumerate(PROMPTS):
            if step < b * STAGGER or made[b] >= NEW_TOKENS:
                continue
            if fed[b] < len(prompt):
                fed[b] += min(CHUNK, len(prompt) - fed[b])
                chunks += 1
                if fed[b] == len(prompt):
                    made[b] += 1
            else:
                decodes += 1
                made[b] += 1
        if chunks == 0 and decodes == 0:
            return count
        count += chunks > 0 and decodes > 0
        step += 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("sitsc_args", nargs="*")
    args = parser.parse_args()
    base = f"{args.work}/{args.name}"
    common = ["--max-seq-len=128", "--max-batch=4", "--max-prefill-tokens=8"]
    common += args.sitsc_args
    subprocess.run(["sitsc", args.model, "-o", base + ".sits",
                    "--no-tokenizer", "--force"] + common,
                   check=True, stdout=subprocess.DEVNULL)
    with open(base + ".cu", "w") as cuda:
        subprocess.run(["sitsc", args.model, "--emit=cuda"] + common,
                       check=True, stdout=cuda)
    tokens = ";".join(",".join(map(str, p)) for p in PROMPTS)
    run = ["sits-emulate", base + ".sits", "--cuda", base + ".cu", "--poison",
           "--count-programs", "generate", "--tokens", tokens,
           "--max-new-tokens", str(NEW_TOKENS)]
    staggered = run + ["--stagger", str(STAGGER), "--chunk", str(CHUNK)]
    outputs = {}
    programs = {}
    gemm = ["--gemm-prefill"]
    for label, command in (("plain", run), ("packed", staggered),
                           ("packed on the prefill", staggered + gemm),
                           ("padded", staggered + gemm + ["--padded"])):
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            print(f"{args.name}: {label} run failed: {result.stderr.strip()}")
            return 1
        # Only the token lines: a TVC engine's counters follow them.
        outputs[label] = [[int(t) for t in line.split(":")[1].split()]
                          for line in result.stdout.splitlines()
                          if line.startswith("tokens[")]
        counts = next(line.split()[1:] for line in result.stdout.splitlines()
                      if line.startswith("programs:"))
        programs[label] = dict(zip(counts[::2], map(int, counts[1::2])))
    # Every prefill step here has at most 32 rows: prefill_few runs them
    # all, unless --gemm-prefill.
    few = programs["packed"].get("prefill_few", 0)
    if few == 0 or "prefill" in programs["packed"] or any(
            "prefill_few" in programs[label]
            for label in ("packed on the prefill", "padded")):
        print(f"{args.name}: the prefill steps ran the wrong programs: "
              f"{programs}")
        return 1
    if outputs["padded"] != outputs["packed on the prefill"]:
        print(f"{args.name}: packed steps differ from the same steps padded:")
        print(outputs["packed on the prefill"], outputs["padded"], sep="\n")
        return 1
    plain = outputs["plain"]
    if len(plain) != len(PROMPTS) or any(len(t) != NEW_TOKENS for t in plain):
        print(f"{args.name}: unexpected output: {plain}")
        return 1
    ties = []
    for label in ("packed", "padded"):
        for b, (mine, theirs) in enumerate(zip(outputs[label], plain)):
            part = next((p for p, (x, y) in enumerate(zip(mine, theirs))
                         if x != y), None)
            if part is None:
                continue
            gap = logit_gap(run[:4], PROMPTS[b], theirs[:part], mine[part],
                            theirs[part], f"{base}.{label}.{b}.npy")
            if gap is None or gap > TIE:
                print(f"{args.name}: {label} differs from plain at sequence "
                      f"{b}, token {part} (logits {gap} apart):")
                print(outputs[label], plain, sep="\n")
                return 1
            ties.append(f"{label} sequence {b} token {part}: {gap:.1e}")
    print(f"{args.name}: {len(PROMPTS)} sequences, {mixed_steps()} mixed "
          f"steps ({few} on prefill_few): plain = packed = padded" +
          (f" (near ties: {'; '.join(ties)})" if ties else ""))
    return 0


def logit_gap(emulate, prompt, before, mine, theirs, out):
    """How far apart the logits of tokens `mine` and `theirs` are after
    `prompt` + `before` (a plain prefill and decode steps), or None."""
    result = subprocess.run(
        emulate + ["score", "--tokens", ",".join(map(str, prompt + before)),
                   "--prefill", str(len(prompt)), "--out", out],
        capture_output=True, text=True)
    if result.returncode != 0:
        return None
    row = numpy.load(out)[0, len(before)]
    return abs(float(row[mine]) - float(row[theirs]))


if __name__ == "__main__":
    sys.exit(main())
