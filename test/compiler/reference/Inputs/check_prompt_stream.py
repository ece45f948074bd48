"""Checks `--prompt` output (sits-exec, sits-run) against a greedy.json.

    check_prompt_stream.py GREEDY.json TOKENIZER.json STDOUT STDERR

STDOUT holds the continuation text, STDERR the "prompt ids:" and
"tokens[0]:" lines. The prompt ids must equal greedy.json's "prompt", the
tokens its "greedy", and the text what the `tokenizers` package decodes the
tokens to, so that prompt text + continuation is greedy.json's
"greedy_text".
"""
import json
import sys

from tokenizers import Tokenizer


def ids_after(lines, prefix):
    for line in lines:
        if line.startswith(prefix):
            return [int(x) for x in line[len(prefix):].split()]
    sys.exit("check_prompt_stream: no line starting with %r" % prefix)


def main():
    reference = json.load(open(sys.argv[1]))
    tokenizer = Tokenizer.from_file(sys.argv[2])
    text = open(sys.argv[3], encoding="utf-8").read()
    lines = open(sys.argv[4], encoding="utf-8").read().splitlines()
    prompt = ids_after(lines, "prompt ids: ")
    tokens = ids_after(lines, "tokens[0]: ")
    if prompt != reference["prompt"]:
        sys.exit("prompt ids %s, expected %s" % (prompt, reference["prompt"]))
    if tokens != reference["greedy"]:
        sys.exit("tokens %s, expected %s" % (tokens, reference["greedy"]))
    expected = tokenizer.decode(tokens) + "\n"
    if text != expected:
        sys.exit("text %r, expected %r" % (text, expected))
    if "greedy_text" in reference:
        whole = tokenizer.decode(prompt) + text[:-1]
        if whole != reference["greedy_text"]:
            sys.exit("prompt + text %r, expected %r" %
                     (whole, reference["greedy_text"]))
    print("prompt, %d tokens and text match" % len(tokens))


main()
