#!/usr/bin/env python3
"""Checks that raising keeps a model's meaning: runs the model with
onnxruntime and the raised program (sitsc --emit=imported, then
sits-opt --sits-raise-onnx) with the CPU reference executor on the same
random inputs, and compares every output.

  check_raised.py MODEL.onnx --tools DIR --workdir DIR [--seed N]
                  [--atol A] [--rtol R]

Dynamic dims get fixed sizes (batch 2, seq 5, others 3); float inputs are
random normal, integer inputs are token ids (or positions when the name
says so), boolean inputs are causal masks (every row sees a key, so that
the graph's and sits' rule for rows without a visible key never differ).
Prints the largest error per output and exits 1 on a mismatch.
"""

import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime

SIZES = {"batch": 2, "seq": 5}


def dims_of(value_info):
    dims = []
    for dim in value_info.type.tensor_type.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(dim.dim_value)
        else:
            dims.append(SIZES.get(dim.dim_param, 3))
    return dims


def make_input(info, rng):
    dims = dims_of(info)
    elem = info.type.tensor_type.elem_type
    if elem == onnx.TensorProto.FLOAT:
        return np.asarray(rng.standard_normal(dims) * 0.5, dtype=np.float32)
    if elem == onnx.TensorProto.FLOAT16:
        return np.asarray(rng.standard_normal(dims) * 0.5, dtype=np.float16)
    if elem == onnx.TensorProto.BOOL:
        seq_q, seq_k = dims[-2], dims[-1]
        causal = np.tril(np.ones((seq_q, seq_k), dtype=bool), seq_k - seq_q)
        return np.broadcast_to(causal, dims).copy()
    if elem in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
        dtype = np.int64 if elem == onnx.TensorProto.INT64 else np.int32
        if "position" in info.name:
            return np.ascontiguousarray(
                np.broadcast_to(np.arange(dims[-1]), dims).astype(dtype))
        return rng.integers(0, 6, size=dims).astype(dtype)
    raise SystemExit("%s: unsupported input type %d" % (info.name, elem))


def run(command, output=None):
    with open(output, "w") if output else open(os.devnull, "w") as out:
        result = subprocess.run(command, stdout=out, stderr=subprocess.PIPE,
                                text=True)
    if result.returncode != 0:
        sys.stderr.write("command failed: %s\n%s" % (" ".join(command),
                                                    result.stderr))
        raise SystemExit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--tools", required=True,
                        help="folder with sitsc, sits-opt and sits-exec")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=2,
                        help="size of the `batch` dims")
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--rtol", type=float, default=1e-4)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    SIZES["batch"] = args.batch
    tool = lambda name: os.path.join(args.tools, name)  # noqa: E731

    imported = os.path.join(args.workdir, "imported.mlir")
    raised = os.path.join(args.workdir, "raised.mlir")
    run([tool("sitsc"), args.model, "--emit=imported", "--print-weights",
         "-o", imported])
    run([tool("sits-opt"), imported,
         "--sits-raise-onnx=report-unraised=false", "-o", raised])

    model = onnx.load(args.model)
    initializers = {t.name for t in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    rng = np.random.default_rng(args.seed)
    feeds = {info.name: make_input(info, rng) for info in graph_inputs}
    session = onnxruntime.InferenceSession(
        args.model, providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)

    input_files = []
    for i, info in enumerate(graph_inputs):
        path = os.path.join(args.workdir, "input_%d.npy" % i)
        np.save(path, np.require(feeds[info.name], requirements="C"))
        input_files += ["--input", path]
    out_dir = os.path.join(args.workdir, "out")
    run([tool("sits-exec"), raised, "--output-dir", out_dir] + input_files)

    failed = False
    for i, (info, want) in enumerate(zip(model.graph.output, expected)):
        got = np.load(os.path.join(out_dir, "result_%d.npy" % i))
        if got.shape != want.shape:
            print("%s: shape %s, onnxruntime %s" % (info.name, got.shape,
                                                    want.shape))
            failed = True
            continue
        error = np.abs(got.astype(np.float64) - want.astype(np.float64))
        atol, rtol = args.atol, args.rtol
        if want.dtype == np.float16:
            # A half-precision graph rounds intermediates (the cos/sin tables
            # of RoPE) to f16 where the raised program keeps f32: allow a few
            # f16 units in the last place (2^-10 relative).
            atol, rtol = max(atol, 2.0 ** -8), max(rtol, 2.0 ** -9)
        limit = atol + rtol * np.abs(want.astype(np.float64))
        print("%s: max abs error %.3g" % (info.name, error.max()
                                          if error.size else 0.0))
        if (error > limit).any():
            print("%s: MISMATCH" % info.name)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
