"""Builds small tokenizer.json files of the shapes decoder LLMs ship.

Usage: make_tokenizers.py TRAIN.txt OUTDIR

Each shape is trained with the `tokenizers` package (BpeTrainer) on TRAIN.txt
with the family's real configuration: normalizer, pre-tokenizer (with the
family's split regex, set before training as in the final file), BPE flags,
post-processor, decoder and added tokens with their real flags. Besides the
families, a few "component" shapes exercise the other supported normalizers,
pre-tokenizers, split behaviors and added-token options. Writes
OUTDIR/<shape>.json for every shape and prints the names.
"""

import json
import os
import sys

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models,
                        normalizers, pre_tokenizers, processors, trainers)

GPT2_REGEX = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"
              r"|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
                r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def special(content):
    return AddedToken(content, special=True, normalized=False, lstrip=False,
                      rstrip=False, single_word=False)


def train(tok, lines, vocab_size, specials=(), **trainer_args):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1,
                                  show_progress=False,
                                  special_tokens=list(specials),
                                  **trainer_args)
    tok.train_from_iterator(lines, trainer)
    return json.loads(tok.to_str())


def finish(config):
    """Round-trips through the package so the file is one it loads."""
    return Tokenizer.from_str(json.dumps(config))


def with_byte_fallback_vocab(config, specials):
    """Rebuilds the vocabulary SentencePiece-style: the special tokens, then
    the 256 byte tokens <0x00>..<0xFF>, then the trained tokens."""
    model = config["model"]
    trained = sorted(model["vocab"].items(), key=lambda item: item[1])
    vocab = {}
    for name in specials:
        vocab[name] = len(vocab)
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for token, _ in trained:
        if token not in vocab:
            vocab[token] = len(vocab)
    model["vocab"] = vocab
    for added in config["added_tokens"]:
        added["id"] = vocab[added["content"]]
    return config


def template(bos, bos_id):
    return processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
        special_tokens=[(bos, bos_id)])


def gpt2(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                 use_regex=True)
    config = train(tok, lines, 1500, ["<|endoftext|>"],
                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    config["decoder"] = {"type": "ByteLevel", "add_prefix_space": True,
                         "trim_offsets": True, "use_regex": True}
    config["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True,
                                "trim_offsets": False, "use_regex": True}
    return finish(config)


def llama3(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated",
                             invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                 use_regex=False)])
    names = ["<|begin_of_text|>", "<|end_of_text|>",
             "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
             "<|start_header_id|>", "<|end_header_id|>",
             "<|reserved_special_token_2|>", "<|eot_id|>"]
    config = train(tok, lines, 2000,
                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    model = config["model"]
    model["ignore_merges"] = True
    # Whole words no merge sequence reaches: with ignore_merges a pre-token
    # equal to one is taken whole (tiktoken-converted vocabularies have such
    # entries).
    for word in ["ĠPneumonoultramicroscopicsilicovolcanoconiosis",
                 "Ġsupercalifragilisticexpialidocious", "Ġtokenizer",
                 "Ġhello", "ĠLorem"]:
        model["vocab"].setdefault(word, len(model["vocab"]))
    return finish(with_llama3_specials(config, names))


def with_llama3_specials(config, names):
    """Llama 3's ending: the special tokens `names` after the vocabulary,
    the first of them (<|begin_of_text|>) added by the post-processor, and
    the byte-level decoder."""
    base = len(config["model"]["vocab"])
    config["added_tokens"] = [
        {"id": base + i, "content": name, "single_word": False,
         "lstrip": False, "rstrip": False, "normalized": False,
         "special": True} for i, name in enumerate(names)]
    config["post_processor"] = {
        "type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True,
             "trim_offsets": False, "use_regex": True},
            json.loads(template(names[0], base).__getstate__())]}
    config["decoder"] = {"type": "ByteLevel", "add_prefix_space": True,
                         "trim_offsets": True, "use_regex": True}
    return config


def qwen2(lines):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated",
                             invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                 use_regex=False)])
    config = train(tok, lines, 2000,
                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    base = len(config["model"]["vocab"])
    # Qwen2.5's added tokens: special control tokens, and tool-call tags that
    # are not special (skip_special_tokens keeps them).
    added = [("<|endoftext|>", True), ("<|im_start|>", True),
             ("<|im_end|>", True), ("<tool_call>", False),
             ("</tool_call>", False)]
    config["added_tokens"] = [
        {"id": base + i, "content": name, "single_word": False,
         "lstrip": False, "rstrip": False, "normalized": False,
         "special": is_special} for i, (name, is_special) in enumerate(added)]
    config["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False,
                                "trim_offsets": False, "use_regex": False}
    config["decoder"] = {"type": "ByteLevel", "add_prefix_space": False,
                         "trim_offsets": False, "use_regex": False}
    return finish(config)


def sentencepiece_vocab(lines, specials, vocab_size, limit_alphabet):
    """A SentencePiece-like BPE: trained on "▁"-prefixed words."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True,
                               byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁",
                                                 prepend_scheme="always",
                                                 split=True)
    config = train(tok, lines, vocab_size, specials,
                   limit_alphabet=limit_alphabet)
    return with_byte_fallback_vocab(config, specials)


def sentencepiece_decoder(strip):
    steps = [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
             {"type": "ByteFallback"}, {"type": "Fuse"}]
    if strip:
        steps.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    return {"type": "Sequence", "decoders": steps}


def llama2(lines):
    # Llama 2 / TinyLlama / Mistral v0.1 (legacy conversion).
    config = sentencepiece_vocab(lines, ["<unk>", "<s>", "</s>"], 1800, 120)
    config["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    config["pre_tokenizer"] = None
    config["decoder"] = sentencepiece_decoder(strip=True)
    config["post_processor"] = json.loads(template("<s>", 1).__getstate__())
    return finish(config)


def mistral_v03(lines):
    # Mistral v0.3 (non-legacy conversion): Metaspace, prepend "first".
    names = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]
    config = sentencepiece_vocab(lines, names, 1800, 120)
    config["normalizer"] = None
    config["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁",
                               "prepend_scheme": "first", "split": False}
    config["decoder"] = sentencepiece_decoder(strip=True)
    config["post_processor"] = json.loads(template("<s>", 1).__getstate__())
    return finish(config)


def gemma(lines):
    # Gemma: spaces replaced by "▁" in the normalizer, no prefix.
    names = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>",
             "<end_of_turn>"]
    config = sentencepiece_vocab(lines, names, 1800, 120)
    config["model"]["unk_token"] = "<unk>"
    config["normalizer"] = {"type": "Replace", "pattern": {"String": " "},
                            "content": "▁"}
    config["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "},
                               "behavior": "MergedWithPrevious",
                               "invert": False}
    config["decoder"] = sentencepiece_decoder(strip=False)
    config["post_processor"] = json.loads(template("<bos>", 2).__getstate__())
    return finish(config)


def words_with_options(lines):
    # Normalizers NFKC + Lowercase + Strip + regex Replace; the Whitespace
    # pre-tokenizer; no decoder (ids join with spaces); added tokens matched
    # after normalization with lstrip / rstrip / single_word.
    tok = Tokenizer(models.BPE(unk_token="[UNK]", fuse_unk=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.NFKC(), normalizers.Lowercase(), normalizers.Strip(),
        normalizers.Replace(Regex(r"\d{4,}"), "#")])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    config = train(tok, lines, 600, ["[UNK]"], limit_alphabet=100)
    base = len(config["model"]["vocab"])
    added = [
        {"content": "<mask>", "lstrip": True, "rstrip": True,
         "single_word": True, "normalized": True, "special": False},
        {"content": "HELLO_WORLD_TOOL", "lstrip": False, "rstrip": False,
         "single_word": False, "normalized": True, "special": False},
        {"content": "the", "lstrip": False, "rstrip": False,
         "single_word": True, "normalized": True, "special": False},
        {"content": "[SEP]", "lstrip": True, "rstrip": False,
         "single_word": False, "normalized": False, "special": True},
        {"content": "<s>", "lstrip": False, "rstrip": True,
         "single_word": False, "normalized": False, "special": True},
    ]
    config["added_tokens"] = [config["added_tokens"][0]] + [
        dict(token, id=base + i) for i, token in enumerate(added)]
    return finish(config)


def split_behaviors(lines):
    # Every split behavior (each where no later step undoes it), inverted
    # patterns, Digits, WhitespaceSplit; NFD + left Strip; Metaspace with
    # prepend "always" and its decoder.
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(),
                                           normalizers.Strip(left=True,
                                                             right=False)])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split(Regex(r"[^\"']+"), behavior="removed",
                             invert=True),
        pre_tokenizers.Split(Regex(r"[,.;:!?]+"),
                             behavior="merged_with_previous"),
        pre_tokenizers.Split("-", behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"[^aeiouy]+"), behavior="contiguous",
                             invert=True),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always",
                                 split=True)])
    config = train(tok, lines, 700, ["<unk>"], limit_alphabet=150)
    config["decoder"] = {"type": "Metaspace", "replacement": "▁",
                         "prepend_scheme": "always", "split": True}
    return finish(config)


def bytelevel_prefix(lines):
    # ByteLevel with add_prefix_space (every piece gets the space) after
    # Punctuation and Digits; a continuing subword prefix and an end-of-word
    # suffix; added tokens with spaces (the ByteLevel decoder writes their
    # bytes as they are), among them runs of spaces as Phi-2 has, where
    # the longest match must win.
    tok = Tokenizer(models.BPE(continuing_subword_prefix="##",
                               end_of_word_suffix="</w>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Punctuation(behavior="merged_with_next"),
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    config = train(tok, lines, 900,
                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                   continuing_subword_prefix="##", end_of_word_suffix="</w>")
    # Every single byte character with the prefix and the suffix, so that
    # no character is unknown.
    vocab = config["model"]["vocab"]
    for ch in pre_tokenizers.ByteLevel.alphabet():
        for form in (ch, "##" + ch, ch + "</w>", "##" + ch + "</w>"):
            vocab.setdefault(form, len(vocab))
    base = len(vocab)
    added = [("my token", False), (" spaced special ", True),
             ("<|endoftext|>", True), ("  ", False), ("    ", False),
             ("   ", False), ("\t\t", False)]
    config["added_tokens"] = [
        {"id": base + i, "content": name, "single_word": False,
         "lstrip": False, "rstrip": False, "normalized": False,
         "special": is_special} for i, (name, is_special) in enumerate(added)]
    # Where spaces are kept, lstrip / rstrip / single_word show.
    options = [("<|l|>", True, False, False), ("<|r|>", False, True, False),
               ("<|lr|>", True, True, True), ("word", False, False, True)]
    config["added_tokens"] += [
        {"id": base + len(added) + i, "content": name, "single_word": word,
         "lstrip": lstrip, "rstrip": rstrip, "normalized": False,
         "special": True}
        for i, (name, lstrip, rstrip, word) in enumerate(options)]
    config["decoder"] = {"type": "ByteLevel", "add_prefix_space": True,
                         "trim_offsets": True, "use_regex": True}
    return finish(config)


SHAPES = {
    "gpt2": gpt2,
    "llama3": llama3,
    "qwen2": qwen2,
    "llama2": llama2,
    "mistral_v03": mistral_v03,
    "gemma": gemma,
    "words_with_options": words_with_options,
    "split_behaviors": split_behaviors,
    "bytelevel_prefix": bytelevel_prefix,
}


def main():
    train_path, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    with open(train_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for name, build in SHAPES.items():
        build(lines).save(os.path.join(out_dir, name + ".json"))
        print(name)


if __name__ == "__main__":
    main()
