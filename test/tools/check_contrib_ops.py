#!/usr/bin/env python3
"""Checks the reference executor's ONNX Runtime contrib ops against
onnxruntime: builds a model for CASE (one op, or a real GenAI builder model
with the inputs of a first prompt or of a decode step), runs it with
onnxruntime and, imported by sitsc, with sits-exec, and compares every
output.

  check_contrib_ops.py CASE --tools DIR --workdir DIR [--model M.onnx]
                       [--atol A] [--rtol R]

Prints the largest error per output; exits 1 on a mismatch.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
F = TensorProto.FLOAT


def model_of(nodes, inputs, outputs, inits=(), opset=21):
    graph = helper.make_graph(nodes, "contrib", inputs, outputs,
                              initializer=list(inits))
    return helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])


def vi(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def pack(values, bits):
    """Packs rows of ints of `bits` bits little-endian into bytes."""
    per = 8 // bits
    values = values.reshape(values.shape[0], -1)
    pad = (-values.shape[1]) % per
    values = np.pad(values, ((0, 0), (0, pad)))
    out = np.zeros((values.shape[0], values.shape[1] // per), np.uint8)
    for i in range(per):
        out |= (values[:, i::per].astype(np.uint8) << (i * bits))
    return out


def case_simplified_norm(rng):
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "g"],
                            ["y", "inv"], epsilon=1e-5, axis=-1)
    model = model_of([node], [vi("x", F, [2, 3, 8])],
                     [vi("y", F, None), vi("inv", F, None)],
                     [numpy_helper.from_array(
                         rng.standard_normal(8).astype(np.float32), "g")])
    return model, {"x": rng.standard_normal((2, 3, 8)).astype(np.float32)}


def case_skip_norm(rng):
    node = helper.make_node("SkipSimplifiedLayerNormalization",
                            ["x", "s", "g", "b"], ["y", "", "", "sum"],
                            domain=MS, epsilon=1e-6)
    inits = [numpy_helper.from_array(
        rng.standard_normal(8).astype(np.float32), n) for n in "gb"]
    model = model_of([node], [vi("x", F, [2, 3, 8]), vi("s", F, [2, 3, 8])],
                     [vi("y", F, None), vi("sum", F, None)], inits)
    return model, {n: rng.standard_normal((2, 3, 8)).astype(np.float32)
                   for n in "xs"}


def matmul_nbits(rng, bits, k, zp, block=16, accuracy=0):
    n = 6
    blocks = (k + block - 1) // block
    q = rng.integers(0, 2 ** bits, size=(n, blocks * block))
    b = pack(q, bits).reshape(n, blocks, block * bits // 8)
    scales = (rng.random((n, blocks)) * 0.1 + 0.01).astype(np.float32)
    inits = [numpy_helper.from_array(b, "B"),
             numpy_helper.from_array(scales.reshape(-1), "scales")]
    inputs = ["a", "B", "scales"]
    if zp == "packed":
        z = rng.integers(0, 2 ** bits, size=(n, blocks))
        inits.append(numpy_helper.from_array(pack(z, bits).reshape(-1), "zp"))
        inputs.append("zp")
    elif zp == "float":
        z = rng.random((n, blocks)).astype(np.float32) * 2 ** bits
        inits.append(numpy_helper.from_array(z.reshape(-1), "zp"))
        inputs.append("zp")
    node = helper.make_node("MatMulNBits", inputs, ["y"], domain=MS, K=k,
                            N=n, bits=bits, block_size=block,
                            accuracy_level=accuracy)
    model = model_of([node], [vi("a", F, [2, 3, k])], [vi("y", F, None)],
                     inits)
    return model, {"a": rng.standard_normal((2, 3, k)).astype(np.float32)}


def rotary_tables(rng, positions, half):
    angle = np.arange(positions)[:, None] * (
        10000.0 ** (-np.arange(half) / half))[None, :]
    return (np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32))


def case_rotary(rng, interleaved, offset):
    cos, sin = rotary_tables(rng, 32, 4)
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"],
                            ["y"], domain=MS, interleaved=interleaved,
                            num_heads=2)
    pos = (np.array([5], np.int64) if offset
           else rng.integers(0, 32, size=(2, 3)).astype(np.int64))
    model = model_of([node], [vi("x", F, [2, 3, 16]),
                              vi("pos", TensorProto.INT64, list(pos.shape))],
                     [vi("y", F, None)],
                     [numpy_helper.from_array(cos, "cos"),
                      numpy_helper.from_array(sin, "sin")])
    return model, {"x": rng.standard_normal((2, 3, 16)).astype(np.float32),
                   "pos": pos}


def case_gather_block_quantized(rng, bits, zp):
    rows, k, block = 6, 64, 32
    blocks = k // block
    q = rng.integers(0, 2 ** bits, size=(rows, k))
    inits = [numpy_helper.from_array(pack(q, bits), "data"),
             numpy_helper.from_array(
                 (rng.random((rows, blocks)) * 0.1 + 0.01).astype(np.float32),
                 "scales")]
    inputs = ["data", "ids", "scales"]
    if zp:
        z = rng.integers(0, 2 ** bits, size=(rows, blocks))
        inits.append(numpy_helper.from_array(pack(z, bits), "zp"))
        inputs.append("zp")
    node = helper.make_node("GatherBlockQuantized", inputs, ["y"], domain=MS,
                            bits=bits, block_size=block, gather_axis=0,
                            quantize_axis=1)
    model = model_of([node], [vi("ids", TensorProto.INT64, [2, 3])],
                     [vi("y", F, None)], inits)
    return model, {"ids": rng.integers(0, rows, size=(2, 3))}


def case_gqa(rng, past, seq, packed=True, rotary=True, window=-1,
             softcap=0.0, interleaved=0, batch=2, positions=None,
             bias=False, sink=False, smooth=0):
    heads, kv, d = 4, 2, 16
    total = past + seq
    inputs = [vi("q", F, [batch, seq, (heads + 2 * kv) * d if packed
                          else heads * d])]
    feeds = {"q": rng.standard_normal(
        (batch, seq, (heads + 2 * kv) * d if packed else heads * d))
        .astype(np.float32)}
    names = ["q", "", ""]
    if not packed:
        for n in "kv":
            inputs.append(vi(n, F, [batch, seq, kv * d]))
            feeds[n] = rng.standard_normal((batch, seq, kv * d)).astype(
                np.float32)
        names = ["q", "k", "v"]
    for n in ["pk", "pv"]:
        inputs.append(vi(n, F, [batch, kv, past, d]))
        feeds[n] = rng.standard_normal((batch, kv, past, d)).astype(
            np.float32)
    inputs += [vi("seqlens", TensorProto.INT32, [batch]),
               vi("total", TensorProto.INT32, [])]
    feeds["seqlens"] = np.full((batch,), total - 1, np.int32)
    feeds["total"] = np.array(total, np.int32)
    names += ["pk", "pv", "seqlens", "total"]
    inits = []
    if rotary:
        cos, sin = rotary_tables(rng, 64, d // 2)
        inits = [numpy_helper.from_array(cos, "cos"),
                 numpy_helper.from_array(sin, "sin")]
        names += ["cos", "sin"]
    if not rotary:
        names += ["", ""]
    # Optional inputs 9 to 11: position_ids, attention_bias, head_sink.
    extras = [
        ("pos", TensorProto.INT64, positions is not None,
         lambda: np.tile(np.arange(seq, dtype=np.int64) + (
             past if positions is None else positions), (batch, 1))),
        ("bias", F, bias, lambda: rng.standard_normal(
            (batch, heads, seq, total)).astype(np.float32)),
        ("sink", F, sink, lambda: rng.standard_normal(heads).astype(
            np.float32)),
    ]
    for name, elem, present, make in extras:
        names.append(name if present else "")
        if present:
            feeds[name] = make()
            inputs.append(vi(name, elem, list(feeds[name].shape)))
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(
        "GroupQueryAttention", names, ["out", "present_k", "present_v"],
        domain=MS, num_heads=heads, kv_num_heads=kv,
        do_rotary=int(rotary), rotary_interleaved=interleaved,
        local_window_size=window, softcap=softcap,
        **({"smooth_softmax": smooth} if smooth else {}))
    model = model_of([node], inputs, [vi("out", F, None),
                                      vi("present_k", F, None),
                                      vi("present_v", F, None)], inits)
    return model, feeds


CASES = {
    "simplified-norm": case_simplified_norm,
    "skip-simplified-norm": case_skip_norm,
    "matmulnbits-4bit": lambda r: matmul_nbits(r, 4, 40, None),
    "matmulnbits-4bit-packed-zp": lambda r: matmul_nbits(r, 4, 48, "packed"),
    "matmulnbits-4bit-float-zp": lambda r: matmul_nbits(r, 4, 32, "float"),
    "matmulnbits-8bit-packed-zp": lambda r: matmul_nbits(r, 8, 40, "packed",
                                                         block=32),
    "matmulnbits-2bit": lambda r: matmul_nbits(r, 2, 32, "packed"),
    "rotary": lambda r: case_rotary(r, 0, False),
    "rotary-interleaved-offset": lambda r: case_rotary(r, 1, True),
    "gqa-prompt": lambda r: case_gqa(r, 0, 5),
    "gqa-decode": lambda r: case_gqa(r, 6, 1),
    "gqa-chunk": lambda r: case_gqa(r, 4, 3, packed=False, batch=1),
    "gqa-interleaved": lambda r: case_gqa(r, 2, 1, interleaved=1),
    "gqa-window-softcap": lambda r: case_gqa(r, 0, 7, rotary=False,
                                             window=2, softcap=3.0),
    # position_ids rotate a decode step (here not past + i); at a first
    # prompt 0..seq-1 (onnxruntime rotates the attention's q and k there
    # whatever position_ids say, and the present keys at position_ids: the
    # case gives 0..seq-1, where both agree). The bias is added after the
    # softcap.
    "gqa-position-ids": lambda r: case_gqa(r, 6, 1, batch=1, positions=9),
    "gqa-position-ids-prompt": lambda r: case_gqa(r, 0, 5, positions=0),
    "gqa-attention-bias": lambda r: case_gqa(r, 0, 5, bias=True,
                                             softcap=2.0),
    "gqa-head-sink": lambda r: case_gqa(r, 3, 1, batch=1, sink=True),
    "gqa-smooth-softmax": lambda r: case_gqa(r, 0, 5, smooth=1),
    "gather-block-quantized-4bit": lambda r: case_gather_block_quantized(
        r, 4, False),
    "gather-block-quantized-8bit-zp": lambda r: case_gather_block_quantized(
        r, 8, True),
}


def genai_feeds(path, model, past, seq, rng):
    """Inputs of a GenAI builder model: ids, a mask of ones, positions, a
    past (its head size and vocabulary from the genai_config.json beside
    it)."""
    config = json.load(open(os.path.join(os.path.dirname(path),
                                         "genai_config.json")))["model"]
    feeds = {}
    for info in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in info.type.tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
        if info.name == "input_ids":
            feeds[info.name] = rng.integers(
                0, config["vocab_size"], size=(2, seq)).astype(np.int64)
        elif info.name == "attention_mask":
            feeds[info.name] = np.ones((2, past + seq), np.int64)
        elif info.name == "position_ids":
            feeds[info.name] = np.tile(np.arange(past, past + seq), (2, 1))
        else:
            shape = [2, dims[1], past, config["decoder"]["head_size"]]
            feeds[info.name] = (rng.standard_normal(shape) * 0.5).astype(dtype)
    return feeds


def run(command):
    result = subprocess.run(command, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit("%s failed (exit %d)" % (command[0],
                                                  result.returncode))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case")
    parser.add_argument("--tools", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--model")
    parser.add_argument("--past", type=int, default=0)
    parser.add_argument("--seq", type=int, default=5)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--ort-accuracy-level", type=int,
                        help="run onnxruntime's MatMulNBits at this "
                             "accuracy_level (0: f32 products, as sits; the "
                             "builder's 4 quantizes A to int8)")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rng = np.random.default_rng(0)
    if args.case == "genai":
        path = args.model
        model = onnx.load(path)
        feeds = genai_feeds(path, model, args.past, args.seq, rng)
        if args.ort_accuracy_level is not None:
            for node in model.graph.node:
                for attr in node.attribute:
                    if (node.op_type == "MatMulNBits" and
                            attr.name == "accuracy_level"):
                        attr.i = args.ort_accuracy_level
            path = os.path.join(args.workdir, "ort_model.onnx")
            onnx.save(model, path, save_as_external_data=True,
                      location="ort_model.onnx.data")
    else:
        model, feeds = CASES[args.case](rng)
        path = os.path.join(args.workdir, "model.onnx")
        onnx.save(model, path)
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = (
        onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL)
    session = onnxruntime.InferenceSession(
        path, options, providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)

    imported = os.path.join(args.workdir, "imported.mlir")
    run([os.path.join(args.tools, "sitsc"), path, "--emit=imported",
         "--print-weights", "-o", imported])
    inputs = []
    for i, info in enumerate(model.graph.input):
        npy = os.path.join(args.workdir, "input_%d.npy" % i)
        np.save(npy, np.require(feeds[info.name], requirements="C"))
        inputs += ["--input", npy]
    out = os.path.join(args.workdir, "out")
    run([os.path.join(args.tools, "sits-exec"), imported, "--output-dir",
         out] + inputs)
    failed = False
    for i, (info, want) in enumerate(zip(model.graph.output, expected)):
        got = np.load(os.path.join(out, "result_%d.npy" % i))
        if got.shape != want.shape:
            print("%s: shape %s, onnxruntime %s" % (info.name, got.shape,
                                                    want.shape))
            failed = True
            continue
        error = np.abs(got.astype(np.float64) - want.astype(np.float64))
        limit = args.atol + args.rtol * np.abs(want.astype(np.float64))
        print("%s: max abs error %.3g" % (info.name,
                                          error.max() if error.size else 0))
        if (error > limit).any():
            print("%s: MISMATCH" % info.name)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
