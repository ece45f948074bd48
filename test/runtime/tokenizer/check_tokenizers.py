"""Compares sits-tokenize with the `tokenizers` package, id for id.

Usage: check_tokenizers.py --heldout HELDOUT.txt [--extra-text FILE]
                           [--random N] [--seed S] [--tool sits-tokenize]
                           TOKENIZER.json...

For every tokenizer.json: encodes held-out text (every line, the whole file,
random slices, edge cases such as "", " ", "\\r\\n" and the special tokens'
strings) with and without special tokens; decodes the ids and random id
sequences (byte-fallback ids that form invalid UTF-8 included) with and
without skip_special_tokens; streams them through TokenStreamDecoder and
checks that the pieces add up to decode() and never run ahead of
`tokenizers`' DecodeStream; and checks that invalid UTF-8 is refused with the
offset Python's own UTF-8 decoder reports. Held-out lines may write
characters as \\uXXXX. Prints the first mismatch of each kind with its
context and exits 1 if there was any.
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

INVALID_UTF8 = [
    b"\xc0\xaf",                 # overlong "/"
    b"ab\xe0\x80\xafcd",         # overlong 3-byte
    b"\xf0\x80\x80\xaf",         # overlong 4-byte
    b"x\xed\xa0\x80y",           # surrogate U+D800
    b"\xed\xbf\xbf",             # surrogate U+DFFF
    b"\xf4\x90\x80\x80",         # above U+10FFFF
    b"hello \xe4\xbd",           # truncated at the end
    b"\xe4\xbdx",                # truncated in the middle
    b"\x80abc",                  # lone continuation byte
    b"abc\xbf",                  # lone continuation byte at the end
    b"\xff",                     # never valid
    b"\xfe\xfe",
    b"ok \xf0\x9f\x98",          # emoji cut short
    b"\xc2",                     # lone lead byte
]


def unescape(line):
    return re.sub(r"\\u([0-9a-fA-F]{4})",
                  lambda m: chr(int(m.group(1), 16)), line)


def extra_cases(text):
    """Lines, 2 KB chunks and the whole of another text file."""
    cases = [("extra line %d" % (i + 1), line)
             for i, line in enumerate(text.split("\n")) if line]
    cases += [("extra chunk %d" % k, text[k:k + 2048])
              for k in range(0, len(text), 2048)]
    cases.append(("extra whole file", text))
    return cases


def text_cases(heldout, specials, rng):
    lines = [unescape(line) for line in heldout.split("\n")]
    whole = "\n".join(lines)
    cases = [("edge", t) for t in [
        "", " ", "  ", "   ", "\n", "\n\n", "\r\n", "\t", " \t\n ", "a", "A",
        " a", "a ", "  leading", "trailing  ", "x  y", "'s", "'S", " 's",
        "12345", " 1", "\u00a0", "\u3000", "\u2581", "\u2581\u2581x", "é",
        "e\u0301", "🙂", "👨\u200d👩\u200d👧", "\U0010ffff", "\x00",
        "\ufeffBOM", "\ufffd", "<0x41>", "▁▁▁"]]
    cases += [("line %d" % (i + 1), line) for i, line in enumerate(lines)]
    cases.append(("whole file", whole))
    cases += [("lines %d-%d" % (i + 1, i + 2), lines[i] + "\n" + lines[i + 1])
              for i in range(0, len(lines) - 1, 3)]
    for s in specials:
        cases += [("special " + s, t) for t in [
            s, s + s, " " + s + " ", "a" + s + "b", s + "hello",
            "hello" + s, s + " hello", "hello " + s + "\n", s[:-1],
            s + s[:-1], "\n" + s + "\n\n"]]
    for k in range(150):
        start = rng.randrange(len(whole))
        cases.append(("slice %d" % k,
                      whole[start:start + rng.choice([1, 2, 5, 20, 80, 300])]))
    return cases


def random_id_sequences(tok, rng, count):
    size = tok.get_vocab_size(with_added_tokens=True)
    vocab = tok.get_vocab(with_added_tokens=True)
    # Sorted: the package's maps come in a different order every run.
    byte_ids = sorted(i for t, i in vocab.items()
                      if len(t) == 6 and t.startswith("<0x") and t.endswith(">"))
    special_ids = sorted(tok.get_added_tokens_decoder().keys())
    sequences = []
    for _ in range(count):
        length = rng.randint(1, 40)
        seq = []
        for _ in range(length):
            r = rng.random()
            if byte_ids and r < 0.35:
                seq.append(rng.choice(byte_ids))
            elif special_ids and r < 0.45:
                seq.append(rng.choice(special_ids))
            else:
                seq.append(rng.randrange(size))
        sequences.append(seq)
    # Valid multi-byte characters spelled with byte tokens, and cut short.
    if byte_ids:
        by_value = {int(t[3:5], 16): i for t, i in vocab.items()
                    if len(t) == 6 and t.startswith("<0x") and t.endswith(">")}
        for text in ["é", "你好", "🙂x", "a\u20acb"]:
            ids = [by_value[b] for b in text.encode("utf-8") if b in by_value]
            sequences += [ids, ids[:-1], ids[1:], ids + ids[:1]]
    return [s for s in sequences if s]


def run_tool(tool, tokenizer_path, requests):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False,
                                     encoding="utf-8") as f:
        for request in requests:
            f.write(json.dumps(request, ensure_ascii=False) + "\n")
        path = f.name
    try:
        out = subprocess.run([tool, tokenizer_path, "--batch", path],
                             capture_output=True, timeout=600)
    finally:
        os.unlink(path)
    if out.returncode != 0:
        sys.exit("%s --batch failed (exit %d): %s" % (
            tool, out.returncode, out.stderr.decode("utf-8", "replace")))
    # Not splitlines(): the answers hold U+2028 and U+0085 unescaped.
    answers = [json.loads(line) for line in
               out.stdout.decode("utf-8").split("\n") if line]
    if len(answers) != len(requests):
        sys.exit("%s --batch answered %d of %d requests" % (
            tool, len(answers), len(requests)))
    return answers


class Report:
    def __init__(self):
        self.failures = 0
        self.shown = set()
        self.counts = {}

    def count(self, kind):
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def fail(self, kind, message):
        self.failures += 1
        if kind in self.shown:
            return
        self.shown.add(kind)
        print("MISMATCH [%s]\n%s\n" % (kind, message))


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def describe_ids(tok, ids, at):
    lo = max(0, at - 3)
    return "%s ... tokens %r" % (
        ids[lo:at + 4], [tok.id_to_token(i) for i in ids[lo:at + 4]])


def check_tokenizer(path, tool, heldout, extra, rng, random_count, report):
    name = os.path.basename(path)
    tok = Tokenizer.from_file(path)
    specials = [t.content for _, t in
                sorted(tok.get_added_tokens_decoder().items())]
    cases = text_cases(heldout, specials, rng)
    if extra:
        cases += extra_cases(extra)

    requests, expected = [], []
    for label, text in cases:
        for add_special in (True, False):
            requests.append({"encode": text, "special": add_special})
            expected.append(("encode", label, text, add_special,
                             tok.encode(text, add_special_tokens=add_special)
                             .ids))
    encoded = [e[4] for e in expected if e[3]]
    id_sequences = [("ids of " + label, ids) for (label, _), ids in
                    zip(cases, encoded)]
    id_sequences += [("random ids %d" % i, ids) for i, ids in
                     enumerate(random_id_sequences(tok, rng, random_count))]
    for label, ids in id_sequences:
        for skip in (True, False):
            requests.append({"decode": ids, "skip_special": skip})
            expected.append(("decode", label, ids, skip,
                             tok.decode(ids, skip_special_tokens=skip)))
            requests.append({"stream": ids, "skip_special": skip})
            expected.append(("stream", label, ids, skip, None))
    for k, data in enumerate(INVALID_UTF8 + corrupted_texts(heldout, rng)):
        requests.append({"encode_hex": data.hex(), "special": True})
        expected.append(("invalid", "invalid utf-8 %d" % k, data, True, None))

    answers = run_tool(tool, path, requests)
    for (kind, label, subject, flag, want), got in zip(expected, answers):
        report.count(kind)
        where = "%s, %s (%s=%s)" % (name, label,
                                    "special" if kind == "encode" else "skip",
                                    flag)
        if kind == "encode":
            if got.get("ids") != want:
                ids = got.get("ids", [])
                at = first_difference(want, ids) if "ids" in got else 0
                report.fail(kind + " " + name, (
                    "%s\n  text: %r\n  tokenizers: %s\n  sits:       %s\n"
                    "  first difference at index %d: tokenizers %s, sits %s"
                    % (where, subject, want, got.get("ids", got), at,
                       describe_ids(tok, want, at),
                       describe_ids(tok, ids, at))))
        elif kind == "decode":
            if got.get("text") != want:
                report.fail(kind + " " + name, (
                    "%s\n  ids: %s\n  tokens: %r\n  tokenizers: %r\n"
                    "  sits:       %r" % (where, subject,
                                          [tok.id_to_token(i) for i in subject],
                                          want, got.get("text", got))))
        elif kind == "stream":
            check_stream(tok, name, where, subject, flag, got, report)
        else:
            try:
                subject.decode("utf-8")
                report.fail("invalid", "%s: %r is valid?" % (where, subject))
                continue
            except UnicodeDecodeError as error:
                offset = error.start
            message = got.get("message", "")
            if (got.get("error") != "invalid text" or
                    "byte offset %d" % offset not in message):
                report.fail("invalid " + name, (
                    "%s\n  bytes: %r\n  expected: invalid text at byte "
                    "offset %d\n  sits: %s" % (where, subject, offset, got)))


def corrupted_texts(heldout, rng):
    """Held-out slices with one byte changed so that they are invalid."""
    data = unescape(heldout).encode("utf-8")
    out = []
    while len(out) < 20:
        start = rng.randrange(len(data) - 40)
        piece = bytearray(data[start:start + 40])
        piece[rng.randrange(len(piece))] = rng.choice(
            [0x80, 0xbf, 0xc0, 0xc1, 0xe0, 0xed, 0xf0, 0xf4, 0xf5, 0xff])
        try:
            bytes(piece).decode("utf-8")
        except UnicodeDecodeError:
            out.append(bytes(piece))
    return out


def check_stream(tok, name, where, ids, skip, got, report):
    pieces = got.get("pieces")
    want = tok.decode(ids, skip_special_tokens=skip)
    if pieces is None or "".join(pieces) != want:
        report.fail("stream " + name, (
            "%s\n  ids: %s\n  decode(): %r\n  pieces:   %r" %
            (where, ids, want, pieces if pieces is not None else got)))
        return
    # Against DecodeStream, as long as its output stays a prefix of decode()
    # (its window can lose a leading space that Strip or Metaspace removed):
    # never emit text it has not emitted yet, and with no byte-fallback
    # token in the ids, emit exactly what it emits.
    stream = DecodeStream(skip_special_tokens=skip)
    theirs, ours = "", ""
    has_byte_tokens = any(
        (t or "").startswith("<0x") and len(t or "") == 6 for t in
        (tok.id_to_token(i) for i in ids))
    for step, (token_id, piece) in enumerate(zip(ids, pieces)):
        try:
            chunk = stream.step(tok, token_id)
        except Exception:  # DecodeStream gave up (its prefix check)
            return
        theirs += chunk or ""
        ours += piece
        if not want.startswith(theirs):
            report.count("DecodeStream diverged from decode()")
            return
        if not theirs.startswith(ours) or (not has_byte_tokens and
                                           ours != theirs):
            report.fail("stream vs DecodeStream " + name, (
                "%s\n  ids: %s\n  after token %d: DecodeStream %r\n"
                "  sits: %r" % (where, ids, step, theirs, ours)))
            return


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--heldout", required=True)
    parser.add_argument("--extra-text",
                        help="a text file whose lines are encoded too")
    parser.add_argument("--tool", default="sits-tokenize")
    parser.add_argument("--random", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("tokenizers", nargs="+")
    args = parser.parse_args()
    with open(args.heldout, encoding="utf-8") as f:
        heldout = f.read()
    extra = None
    if args.extra_text:
        with open(args.extra_text, encoding="utf-8") as f:
            extra = f.read()
    report = Report()
    for path in args.tokenizers:
        rng = random.Random(args.seed)
        before = dict(report.counts)
        failures = report.failures
        check_tokenizer(path, args.tool, heldout, extra, rng, args.random,
                        report)
        done = {k: report.counts[k] - before.get(k, 0) for k in report.counts}
        print("%s: %d encodes, %d decodes, %d streams (DecodeStream "
              "diverged from decode() in %d), %d invalid texts: %s" %
              (os.path.basename(path), done.get("encode", 0),
               done.get("decode", 0), done.get("stream", 0),
               done.get("DecodeStream diverged from decode()", 0),
               done.get("invalid", 0),
               "all match" if report.failures == failures else
               "%d mismatches" % (report.failures - failures)))
    if report.failures:
        print("FAILED: %d mismatches" % report.failures)
        return 1
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
