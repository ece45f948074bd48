#!/usr/bin/env python3
"""Writes a copy of an ONNX model whose float32 weights are stored as float16.

The bundled example (llama_bytes) is the trained byte-level model of the shared
test models; stored in float16 it is half the size. Every float32 initializer
becomes a float16 initializer followed by a Cast back to float32, the pattern
exporters emit for half-precision checkpoints, so the graph computes as before
on weights rounded to float16.

    make_fp16_copy.py IN.onnx OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper


def main(source, target):
    model = onnx.load(source)
    graph = model.graph
    casts = []
    for init in graph.initializer:
        if init.data_type != onnx.TensorProto.FLOAT or len(init.dims) < 1:
            continue
        values = numpy_helper.to_array(init).astype(np.float16)
        half_name = init.name + ".fp16"
        half = numpy_helper.from_array(values, half_name)
        init.CopyFrom(half)
        casts.append(helper.make_node("Cast", [half_name], [half_name[:-5]],
                                      name="cast_" + half_name[:-5],
                                      to=onnx.TensorProto.FLOAT))
    for node in reversed(casts):
        graph.node.insert(0, node)
    onnx.checker.check_model(model)
    onnx.save(model, target)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
