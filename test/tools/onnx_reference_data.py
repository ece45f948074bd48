#!/usr/bin/env python3
"""Writes a data set for `sitsc --verify` whose outputs ONNX's own reference
implementation (onnx.reference.ReferenceEvaluator) computes:

  onnx_reference_data.py MODEL.onnx OUT_DIR [--seed N]

Every graph input must have static dims: floats are random normal, bools
random with most elements true, integers random in [0, 8). OUT_DIR gets
input_N.pb and output_N.pb, named after the graph's inputs and outputs.
"""

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator


def random_input(rng, value_info):
    tensor_type = value_info.type.tensor_type
    dims = [d.dim_value for d in tensor_type.shape.dim]
    if any(d.HasField("dim_param") for d in tensor_type.shape.dim):
        sys.exit("onnx_reference_data.py: input '%s' has a dynamic dim"
                 % value_info.name)
    dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
    if dtype == np.bool_:
        return rng.random(dims) < 0.8
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 8, dims).astype(dtype)
    return rng.standard_normal(dims).astype(dtype)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model = onnx.load(args.model)
    rng = np.random.default_rng(args.seed)
    feeds = {i.name: random_input(rng, i) for i in model.graph.input}
    results = ReferenceEvaluator(model).run(None, feeds)
    os.makedirs(args.out, exist_ok=True)
    for prefix, names, values in (
            ("input", list(feeds), list(feeds.values())),
            ("output", [o.name for o in model.graph.output], results)):
        for i, (name, value) in enumerate(zip(names, values)):
            with open(os.path.join(args.out, f"{prefix}_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(value), name)
                        .SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
