"""Writes a tokenizer.json the size of Llama 3's: 128K-token byte-level BPE
vocabulary, 280K merges, 256 special tokens, Llama 3's configuration.

Usage: make_large_tokenizer.py TEXT.txt OUT.json [--vocab N] [--merges M]

Training a real 128K vocabulary needs far more text than the test suite
holds, so the vocabulary is grown from substrings of TEXT's byte-level
pre-tokens instead: a substring joins the vocabulary (with a merge of rank
next in line) when both halves of a split of it are already tokens, random
tokens one character longer than a token fill up the rest, and further
merges give existing tokens other splits (as tiktoken-converted vocabularies have, where several merges
make the same token). Deterministic for a given TEXT.
"""

import argparse
import json
import random

from tokenizers import Regex, Tokenizer, pre_tokenizers

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
                r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("text")
    parser.add_argument("out")
    parser.add_argument("--vocab", type=int, default=128000)
    parser.add_argument("--merges", type=int, default=280000)
    args = parser.parse_args()
    rng = random.Random(3)

    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    with open(args.text, encoding="utf-8") as f:
        words = [w for w, _ in pre.pre_tokenize_str(f.read())]

    vocab = {c: i for i, c in enumerate(pre_tokenizers.ByteLevel.alphabet())}
    merges, merge_set = [], set()
    tokens = list(vocab)

    def add_merge(left, right):
        merged = left + right
        if (left, right) in merge_set:
            return False
        merge_set.add((left, right))
        merges.append([left, right])
        if merged not in vocab:
            vocab[merged] = len(vocab)
            tokens.append(merged)
        return True

    # Substrings of the text, shortest first, as BPE training grows them.
    for length in range(2, 12):
        for word in words:
            for start in range(0, len(word) - length + 1):
                piece = word[start:start + length]
                if piece in vocab:
                    continue
                cut = rng.randrange(1, length)
                if piece[:cut] in vocab and piece[cut:] in vocab:
                    add_merge(piece[:cut], piece[cut:])
                if len(vocab) >= args.vocab:
                    break
            if len(vocab) >= args.vocab:
                break
    # Then tokens one character longer than a token (either side), with
    # characters as frequent as in the text, so tokens are as long as real
    # ones; of a few candidates the one with the most splits into two
    # tokens is taken (real vocabularies have several merges per token).
    chars = [c for word in words for c in word]

    def splits(token):
        return sum(1 for cut in range(1, len(token))
                   if token[:cut] in vocab and token[cut:] in vocab)

    while len(vocab) < args.vocab:
        best = None
        for _ in range(6):
            token, char = rng.choice(tokens), rng.choice(chars)
            pair = (token, char) if rng.random() < 0.5 else (char, token)
            merged = pair[0] + pair[1]
            if len(merged) > 14 or merged in vocab:
                continue
            score = splits(merged)
            if best is None or score > best[0]:
                best = (score, pair)
        if best:
            add_merge(*best[1])
    # Other splits of existing tokens, at later ranks.
    order = [t for t in tokens if len(t) >= 3]
    rng.shuffle(order)
    for token in order:
        for cut in range(1, len(token)):
            if len(merges) >= args.merges:
                break
            if token[:cut] in vocab and token[cut:] in vocab:
                add_merge(token[:cut], token[cut:])
        if len(merges) >= args.merges:
            break

    base = len(vocab)
    names = ["<|begin_of_text|>", "<|end_of_text|>",
             "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
             "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
             "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>",
             "<|eot_id|>", "<|python_tag|>"]
    names += ["<|reserved_special_token_%d|>" % i for i in range(3, 248)]
    config = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [
            {"id": base + i, "content": name, "single_word": False,
             "lstrip": False, "rstrip": False, "normalized": False,
             "special": True} for i, name in enumerate(names)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False,
             "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True,
             "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|begin_of_text|>",
                                          "type_id": 0}},
                        {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [],
             "special_tokens": {"<|begin_of_text|>": {
                 "id": "<|begin_of_text|>", "ids": [base],
                 "tokens": ["<|begin_of_text|>"]}}}]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True,
                    "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": merges},
    }
    # Merges as "a b" strings, compact: the layout of Llama 3's file (9 MB).
    config["model"]["merges"] = [" ".join(m) for m in merges]
    text = json.dumps(config, ensure_ascii=False)
    Tokenizer.from_str(text)  # a file the package loads
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print("vocab %d, merges %d, added %d" % (len(vocab), len(merges),
                                              len(names)))


if __name__ == "__main__":
    main()
