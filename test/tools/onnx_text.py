#!/usr/bin/env python3
"""Converts a model in the ONNX textual syntax to a binary .onnx file.

  onnx_text.py IN.onnxtxt OUT.onnx [--no-check]

Lines starting with `#` are comments (lit RUN and CHECK lines live there).
Nodes can be named with `[name] y = Op(x)`; unnamed nodes import as
`<op_type>_<index>`. The result is checked with onnx.checker unless
--no-check (for tests of models the checker itself refuses).
"""

import argparse
import sys

import onnx
from onnx import checker, parser


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("input")
    args.add_argument("output")
    args.add_argument("--no-check", action="store_true")
    options = args.parse_args()
    with open(options.input) as f:
        text = f.read()
    try:
        model = parser.parse_model(text)
    except Exception as error:  # The parser raises its own exception types.
        sys.stderr.write("%s: cannot parse the ONNX text: %s\n"
                         % (options.input, error))
        return 1
    if not options.no_check:
        checker.check_model(model)
    onnx.save(model, options.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
