#!/usr/bin/env python3
"""Picks a prompt whose onnxruntime greedy stream has a healthy margin.

  pick_prompt.py MODEL.onnx [--steps 48] [--min-margin 0.05] [--length 12]
                 [--seed 0] [--tries 400] [--accuracy-level L]

The greedy margin of a step is the top logit minus the second. A reference
stream with a step whose margin is within an engine's rounding error of zero
is no reference: an engine computing in f16 may rightly take the other
token there, and every token after differs. The default bound, 0.05, is
three f16 units of a logit of 16..32 (these tiny models' logits reach about
30). This tries prompts of `length` ids drawn by numpy's
default_rng(seed) from 3..vocab-1 (0..2 are the tiny models' special ids),
in order, and prints the first whose stream over `steps` tokens has every
margin >= min_margin and at least steps / 2 distinct tokens (not a short
cycle), as JSON: prompt, smallest margin, its step, the try it was.
"""

import argparse
import json
import tempfile

import numpy as np

from ort_greedy import greedy_margins, open_session


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--min-margin", type=float, default=0.05)
    parser.add_argument("--length", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tries", type=int, default=400)
    parser.add_argument("--accuracy-level", type=int)
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory()
    session = open_session(args.model, args.accuracy_level, tmp.name)
    vocab = None
    for info in session.get_outputs():
        if info.name == "logits":
            vocab = info.shape[-1]
    rng = np.random.default_rng(args.seed)
    for attempt in range(args.tries):
        prompt = [int(t) for t in rng.integers(3, vocab, args.length)]
        tokens, margins = greedy_margins(session, args.model, prompt,
                                         args.steps)
        smallest = int(np.argmin(margins))
        if margins[smallest] >= args.min_margin and \
                len(set(tokens)) >= args.steps // 2:
            print(json.dumps({"prompt": prompt,
                              "smallest_margin": round(margins[smallest], 4),
                              "smallest_margin_step": smallest,
                              "try": attempt}))
            return 0
    raise SystemExit("no prompt in %d tries has every margin >= %g" % (
        args.tries, args.min_margin))


if __name__ == "__main__":
    main()
