"""Runs one engine on the emulator three ways and compares the tokens.

    packed_steps.py --work DIR --model MODEL.onnx --name NAME -- SITSC_ARGS

Four prompts of 3 to 19 tokens: a plain run (one batched prefill, then
decode steps), and a staggered run (sequence b joins after 2b steps, its
prompt in chunks of 5 beside the others' decode tokens) with its mixed
steps packed and padded. Prints "NAME: 4 sequences, N mixed steps: plain =
packed = padded" when all three give the same tokens, else the first
difference, and exits 1.
"""

import argparse
import subprocess
import sys

PROMPTS = [
    [1, 5, 9, 200, 31, 7, 7, 64, 3, 90, 12, 400, 17, 18, 19, 20, 21, 22, 23],
    [9, 8, 7],
    [44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54],
    [300, 301, 302, 303, 304, 305, 306],
]
NEW_TOKENS = 12
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
           "generate", "--tokens", tokens, "--max-new-tokens", str(NEW_TOKENS)]
    staggered = run + ["--stagger", str(STAGGER), "--chunk", str(CHUNK)]
    outputs = {}
    for label, command in (("plain", run), ("packed", staggered),
                           ("padded", staggered + ["--padded"])):
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            print(f"{args.name}: {label} run failed: {result.stderr.strip()}")
            return 1
        # Only the token lines: a TVC engine's counters follow them.
        outputs[label] = [line for line in result.stdout.splitlines()
                          if line.startswith("tokens[")]
    for label in ("packed", "padded"):
        if outputs[label] != outputs["plain"]:
            print(f"{args.name}: {label} differs from plain:")
            print("\n".join(outputs[label]))
            print("plain:\n" + "\n".join(outputs["plain"]))
            return 1
    lines = outputs["plain"]
    if len(lines) != len(PROMPTS) or any(
            len(line.split(":")[1].split()) != NEW_TOKENS for line in lines):
        print(f"{args.name}: unexpected output:\n" + "\n".join(lines))
        return 1
    print(f"{args.name}: {len(PROMPTS)} sequences, {mixed_steps()} mixed "
          "steps: plain = packed = padded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
