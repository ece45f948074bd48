#!/usr/bin/env python3
"""Writes a small graph and data sets for `sitsc --verify` of graphs that are
not language models:

  verify_data.py OUT

OUT/model.onnx: `Y = RMSNormalization(X, W) + B`, `Z = Softmax(X)`, with
inputs X f32[2, 3, 8], B f32[8] and W an initializer. Data sets (outputs
computed with numpy):
  good/         the inputs and both outputs, named as the graph names them
  unnamed/      the same, tensors without names (bound by position)
  reordered/    inputs written in another order than the graph's
  wrong/        Z with one element changed by 1e-2 (index [1, 2, 5])
  close/        Y changed by 5e-4 relative everywhere (within rtol 1e-3)
  missing/      without B
  extra/        with an input the graph does not take
  wrong-type/   X as float16
  uint64/       X as uint64, which the reference executor does not run
  no-outputs/   the inputs alone
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def rms(x, w, eps=1e-5):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def write(folder, inputs, outputs):
    os.makedirs(folder)
    for prefix, tensors in (("input", inputs), ("output", outputs)):
        for i, (name, value) in enumerate(tensors):
            proto = numpy_helper.from_array(value, name)
            with open(os.path.join(folder, f"{prefix}_{i}.pb"), "wb") as f:
                f.write(proto.SerializeToString())


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    w = rng.standard_normal(8).astype(np.float32)
    nodes = [
        helper.make_node("RMSNormalization", ["X", "W"], ["N"], axis=-1),
        helper.make_node("Add", ["N", "B"], ["Y"]),
        helper.make_node("Softmax", ["X"], ["Z"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "verify_graph",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3, 8]),
         helper.make_tensor_value_info("B", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3, 8]),
         helper.make_tensor_value_info("Z", TensorProto.FLOAT, [2, 3, 8])],
        initializer=[numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 23)])
    onnx.save(model, os.path.join(out, "model.onnx"))

    y = (rms(x, w) + b).astype(np.float32)
    z = softmax(x).astype(np.float32)
    good_in = [("X", x), ("B", b)]
    good_out = [("Y", y), ("Z", z)]
    write(os.path.join(out, "good"), good_in, good_out)
    write(os.path.join(out, "unnamed"), [("", x), ("", b)],
          [("", y), ("", z)])
    write(os.path.join(out, "reordered"), [("B", b), ("X", x)],
          [("Z", z), ("Y", y)])
    wrong = z.copy()
    wrong[1, 2, 5] += 1e-2
    write(os.path.join(out, "wrong"), good_in, [("Y", y), ("Z", wrong)])
    write(os.path.join(out, "close"), good_in,
          [("Y", (y * (1 + 5e-4)).astype(np.float32)), ("Z", z)])
    write(os.path.join(out, "missing"), [("X", x)], good_out)
    write(os.path.join(out, "extra"), good_in + [("C", b)], good_out)
    write(os.path.join(out, "wrong-type"), [("X", x.astype(np.float16)),
                                            ("B", b)], good_out)
    write(os.path.join(out, "uint64"), [("X", x.astype(np.uint64)),
                                        ("B", b)], good_out)
    write(os.path.join(out, "no-outputs"), good_in, [])


if __name__ == "__main__":
    main()
