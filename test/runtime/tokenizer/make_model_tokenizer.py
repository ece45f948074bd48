"""Writes a Llama-3-shaped tokenizer.json with exactly N ids, to pair with a
test model whose vocabulary has N rows (the committed test models have 512),
so that every id the model can produce decodes to text.

Usage: make_model_tokenizer.py TRAIN.txt N OUT.json

Byte-level BPE with Llama 3's split regex and ignore_merges, trained with the
`tokenizers` package on TRAIN.txt to N - 5 tokens, then five special tokens
after the vocabulary as in Llama 3 (<|begin_of_text|>, <|end_of_text|>,
<|start_header_id|>, <|end_header_id|>, <|eot_id|>), and the post-processor
that adds <|begin_of_text|>. Inputs/llama3-512.json was made with
`make_model_tokenizer.py Inputs/train.txt 512 Inputs/llama3-512.json`.
"""

import json
import sys

from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

from make_tokenizers import LLAMA3_REGEX, finish, with_llama3_specials

SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
            "<|end_header_id|>", "<|eot_id|>"]


def main():
    train_path, size, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(train_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated",
                             invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                 use_regex=False)])
    trainer = trainers.BpeTrainer(
        vocab_size=size - len(SPECIALS), min_frequency=1, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines, trainer)
    config = json.loads(tok.to_str())
    config["model"]["ignore_merges"] = True
    base = len(config["model"]["vocab"])
    if base != size - len(SPECIALS):
        sys.exit(f"training gave {base} tokens, not {size - len(SPECIALS)}: "
                 "use a larger TRAIN.txt")
    finish(with_llama3_specials(config, SPECIALS)).save(out_path)


if __name__ == "__main__":
    main()
