#!/usr/bin/env python3
"""Writes a large Llama-shaped ONNX model from a small dynamo export, for
measuring how sitsc scales with the size of the weights (docs/performance.md,
"Compile time").

The graph is test/models/llama_gqa_extdata's (a real torch.onnx.export
dynamo graph, head_dim 32, 2 layers) with its dims scaled: hidden
128 -> 128*S, kv width 64 -> 64*S (heads 4*S, kv heads 2*S), intermediate
344 -> I, vocab 512 -> V. The repeat_kv and merge-heads shape constants are
rewritten to the new head counts. Weights are random (|x| < 1), written to
one external data file with each tensor at a 4096-byte boundary.

--graph fp16 turns it into a half-precision graph as torch exports an fp16
model: f16 weights, activations and logits, the RoPE tables computed in f32
and cast to f16, the attention mask's fill -65504.

--values normal draws the weights from normal distributions of a trained
model's scale instead (matrices N(0, 1 / inputs), norm weights near 1), so
that every layer's output matters to the logits, for numerical checks. --test-data adds
test_data_set_0/input_0.pb (random ids [2, 12]) and greedy.json (row 0's
first 8 ids as the prompt, no reference stream), which is what
test/gpu/check_models.py needs to check quantized engines against the CPU
reference executor (there is no PyTorch reference here).

    enlarge_llama.py OUT_DIR [--scale 32] [--intermediate 14336]
        [--vocab 128256] [--graph fp16|fp32] [--source MODEL.onnx]
        [--values bits|normal] [--test-data]

With the defaults this is the Llama-3-8B shape with 2 layers and head_dim 32:
about 3.0 GB of f16 weights.
"""

import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "models", "llama_gqa_extdata", "model.onnx")


def random_values(rng, shape, dtype):
    """Random floats with |x| < 1 and no inf/NaN, made from random bits
    (fast for gigabytes)."""
    count = int(np.prod(shape)) if shape else 1
    if dtype == np.float16:
        bits = rng.integers(0, 1 << 16, count, dtype=np.uint16) & 0xBBFF
        return bits.view(np.float16).reshape(shape)
    bits = rng.integers(0, 1 << 32, count, dtype=np.uint32) & 0xBF7FFFFF
    return bits.view(np.float32).reshape(shape)


def normal_values(rng, shape, dtype):
    """Weights of a realistic size: matrices N(0, 1 / rows) (rows: the
    inputs of a MatMul's [in, out] weight), norm weights 1 + N(0, 0.1^2)."""
    values = rng.standard_normal(shape, dtype=np.float32)
    if len(shape) == 1:
        return (1.0 + 0.1 * values).astype(dtype)
    return (values / np.sqrt(shape[0])).astype(dtype)


def write_test_data(out_dir, vocab, rng):
    """Inputs for check_models.py: ids [2, 12] and the prompt (row 0's
    first 8 ids); no reference logits or stream."""
    ids = rng.integers(0, vocab, (2, 12), dtype=np.int64)
    data = os.path.join(out_dir, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save_tensor(numpy_helper.from_array(ids, "input_ids"),
                     os.path.join(data, "input_0.pb"))
    with open(os.path.join(out_dir, "greedy.json"), "w") as f:
        json.dump({"prompt": ids[0, :8].tolist(), "greedy": []}, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--source", default=SOURCE)
    parser.add_argument("--scale", type=int, default=32)
    parser.add_argument("--intermediate", type=int, default=14336)
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--graph", choices=["fp16", "fp32"], default="fp16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--values", choices=["bits", "normal"],
                        default="bits")
    parser.add_argument("--test-data", action="store_true")
    args = parser.parse_args()
    draw = normal_values if args.values == "normal" else random_values

    model = onnx.load(args.source, load_external_data=False)
    graph = model.graph
    s = args.scale
    dim_map = {128: 128 * s, 64: 64 * s, 344: args.intermediate,
               512: args.vocab}
    half = args.graph == "fp16"
    weight_type = np.float16 if half else np.float32

    # Constants for the new head counts.
    kv_const, heads_const = "enlarge_kv_heads", "enlarge_heads"
    graph.initializer.append(
        numpy_helper.from_array(np.array([2 * s], np.int64), kv_const))
    graph.initializer.append(
        numpy_helper.from_array(np.array([4 * s], np.int64), heads_const))
    producers = {o: n for n in graph.node for o in n.output}
    users = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    for node in graph.node:
        if node.op_type != "Concat":
            continue
        targets = [u.op_type for u in users.get(node.output[0], [])]
        inputs = list(node.input)
        # repeat_kv: Expand to [b, kv_heads, n_rep, s, d].
        if "Expand" in targets and len(inputs) == 5 and \
                inputs[1] == inputs[2] == "val_52":
            node.input[1] = kv_const
        # [b, heads, s, d] after repeat_kv.
        if "Reshape" in targets and len(inputs) == 4 and \
                inputs[1] == "val_165":
            node.input[1] = heads_const
    used = {name for node in graph.node for name in node.input}
    for init in [i for i in graph.initializer if i.name not in used]:
        graph.initializer.remove(init)

    os.makedirs(args.out_dir, exist_ok=True)
    data_name = "model.onnx.data"
    rng = np.random.default_rng(args.seed)
    total = 0
    with open(os.path.join(args.out_dir, data_name), "wb") as data:
        for init in graph.initializer:
            if init.data_type != TensorProto.FLOAT:
                continue
            dims = list(init.dims)
            if init.name == "expand_2":  # RoPE inv_freq: stays f32
                continue
            if dims and all(d in dim_map for d in dims):
                shape = [dim_map[d] for d in dims]
                values = draw(rng, shape, weight_type)
                offset = (data.tell() + 4095) // 4096 * 4096
                data.seek(offset)
                raw = values.tobytes()
                data.write(raw)
                total += len(raw)
                init.ClearField("raw_data")
                init.ClearField("float_data")
                del init.dims[:]
                init.dims.extend(shape)
                init.data_type = (TensorProto.FLOAT16 if half
                                  else TensorProto.FLOAT)
                init.data_location = TensorProto.EXTERNAL
                del init.external_data[:]
                for key, value in (("location", data_name),
                                   ("offset", str(offset)),
                                   ("length", str(len(raw)))):
                    entry = init.external_data.add()
                    entry.key, entry.value = key, value
            elif half:
                # Scalars and small float constants of the computation.
                value = numpy_helper.to_array(init)
                if init.name == "val_202":
                    value = np.array(-65504.0, np.float32)
                init.CopyFrom(numpy_helper.from_array(
                    value.astype(np.float16), init.name))

    if half:
        # RoPE tables in f32, cast to f16 where they are used.
        for op in ("Cos", "Sin"):
            node = next(n for n in graph.node if n.op_type == op)
            out = node.output[0]
            node.output[0] = out + "_f32"
            cast = helper.make_node("Cast", [out + "_f32"], [out],
                                    name=node.name + "_to_f16",
                                    to=TensorProto.FLOAT16)
            graph.node.insert(list(graph.node).index(node) + 1, cast)
        for output in graph.output:
            if output.type.tensor_type.elem_type == TensorProto.FLOAT:
                output.type.tensor_type.elem_type = TensorProto.FLOAT16
    # Shapes changed: let sits infer them.
    del graph.value_info[:]
    for output in graph.output:
        for dim in output.type.tensor_type.shape.dim:
            if dim.HasField("dim_value") and dim.dim_value == 512:
                dim.dim_value = args.vocab
    onnx.save(model, os.path.join(args.out_dir, "model.onnx"))
    if args.test_data:
        write_test_data(args.out_dir, args.vocab, rng)
    print("%s: %d bytes (%.2f GB) of %s weights (hidden %d, heads %d/%d, "
          "intermediate %d, vocab %d)" % (
              args.out_dir, total, total / 1e9, "f16" if half else "f32",
              128 * s,
              4 * s, 2 * s, args.intermediate, args.vocab))


if __name__ == "__main__":
    sys.exit(main())
