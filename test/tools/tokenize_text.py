"""Token ids of a text, for sitsc --reference-perplexity on a model with a
real vocabulary (until the runtime has its own tokenizer).

    python3 tokenize_text.py tokenizer.json TEXT [--max-tokens N] > ids.txt

Writes the ids separated by spaces, encoded with the Hugging Face
`tokenizers` package exactly as the model's tokenizer.json says (no special
tokens added). Exits non-zero with a message when the package, the
tokenizer or the text is unusable.
"""

import argparse
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tokenizer")
    parser.add_argument("text")
    parser.add_argument("--max-tokens", type=int, default=0)
    args = parser.parse_args()
    try:
        from tokenizers import Tokenizer
    except ImportError:
        sys.exit("tokenize_text.py: the 'tokenizers' package is not installed")
    try:
        tokenizer = Tokenizer.from_file(args.tokenizer)
    except Exception as error:  # tokenizers raises a plain Exception
        sys.exit("tokenize_text.py: cannot load '%s': %s" % (args.tokenizer,
                                                             error))
    try:
        with open(args.text, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as error:
        sys.exit("tokenize_text.py: cannot read '%s': %s" % (args.text, error))
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    if args.max_tokens > 0:
        ids = ids[:args.max_tokens]
    if len(ids) < 2:
        sys.exit("tokenize_text.py: '%s' gives fewer than 2 tokens" % args.text)
    print(" ".join(str(i) for i in ids))


if __name__ == "__main__":
    main()
