#!/usr/bin/env python3
"""Checks bench/onnx_graft.py: that the export it grows from a two-layer
twin computes what the deep model computes.

    check_onnx_graft.py --twin MODEL.onnx   # onnx + onnxruntime + numpy
    check_onnx_graft.py --torch             # also torch + transformers

--twin takes a dynamo export of a two-layer Llama (test/models/llama_gqa)
as the twin and grows it with chosen weights, compared under onnxruntime:
  * a third and fourth layer whose o_proj and down_proj are zero add nothing
    to the residual stream, so the logits must equal the twin's (the copies
    are wired into the stream: had they read another layer's stream, or the
    final norm layer 1's, the logits would differ or the next check fail);
  * a third layer with layer 1's weights must change the logits;
  * a larger vocabulary (extra embedding and LM-head rows) keeps the logits
    of the twin's tokens.
--torch does what bench/llama_bench.py does on a small random Llama with 4
layers (export of its 2-layer twin, graft, weights of the 4-layer model) and
compares onnxruntime's logits with the torch model's.

Prints one line per check and exits non-zero on the first failure.
"""

import argparse
import os
import re
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import onnx_graft  # noqa: E402


def run(path, ids):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {"input_ids": ids})[0]


def linear_count(path):
    """MatMuls by a weight initializer: 7 per layer and the LM head."""
    graph = onnx.load(path, load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    return sum(n.op_type == "MatMul" and n.input[1] in inits
               for n in graph.node)


def check(ok, what):
    print("%s: %s" % ("ok" if ok else "FAILED", what), flush=True)
    if not ok:
        sys.exit(1)


def twin_parameters(model):
    """Parameter name -> array (torch layout) of the twin's weights, named
    from the exporter's metadata: the linears' folded transposes by the
    aten.linear argument, the embedding by its initializer name."""
    inits = {i.name: i for i in model.graph.initializer}
    params = {}
    for node in model.graph.node:
        fx = next((p.value for p in node.metadata_props
                   if p.key == "pkg.torch.onnx.fx_node"), "")
        match = re.search(r"aten\.linear\.default\]\(args = \(%\w+, %p_(\w+)\)",
                          fx)
        if node.op_type == "MatMul" and match and node.input[1] in inits:
            name = re.sub(r"_layers_(\d+)_", r".layers.\1.", match.group(1))
            name = re.sub(r"_weight$", ".weight", name)
            params[name] = numpy_helper.to_array(inits[node.input[1]]).T
    params["m.model.embed_tokens.weight"] = numpy_helper.to_array(
        inits["m.model.embed_tokens.weight"])
    return params


def grow(twin_path, layers, vocab, fetch, folder):
    twin = onnx.load(twin_path)
    params = twin_parameters(twin)
    twin_vocab = params["m.model.embed_tokens.weight"].shape[0]
    model, sources = onnx_graft.graft(twin, params, layers, twin_vocab, vocab)
    onnx_graft.save(model, sources, onnx_graft.from_arrays(fetch), folder)
    return os.path.join(folder, "model.onnx")


def check_twin(twin_path, keep=None):
    params = twin_parameters(onnx.load(twin_path))
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 512, (2, 7)).astype(np.int64)
    expected = run(twin_path, ids)

    def silent_layers(name):
        layer = re.search(r"\.layers\.(\d+)\.", name)
        if layer and int(layer.group(1)) >= 2:
            source = params[re.sub(r"\.layers\.\d+\.", ".layers.1.", name)]
            if re.search(r"o_proj|down_proj", name):
                return np.zeros_like(source)
            return source
        return params[name]

    with tempfile.TemporaryDirectory() as work:
        path = grow(twin_path, 4, 512, silent_layers,
                    keep or os.path.join(work, "a"))
        got = run(path, ids)
        check(linear_count(path) == 4 * 7 + 1,
              "4 layers of 7 linears and the LM head")
        check(np.array_equal(got, expected),
              "two silent layers keep the twin's logits (max diff %g)"
              % np.abs(got - expected).max())

        def copied_layer(name):
            return params[re.sub(r"\.layers\.2\.", ".layers.1.", name)]

        path = grow(twin_path, 3, 512, copied_layer, os.path.join(work, "b"))
        diff = np.abs(run(path, ids) - expected).max()
        check(diff > 1e-3, "a third layer changes the logits (max diff %g)"
              % diff)

        extra = rng.standard_normal((88, params[
            "m.model.embed_tokens.weight"].shape[1])).astype(np.float32)

        def larger_vocab(name):
            array = silent_layers(name)
            if name.endswith("embed_tokens.weight"):
                return np.concatenate([array, extra])
            if name.endswith("lm_head.weight"):
                return np.concatenate([array, extra])
            return array

        path = grow(twin_path, 3, 600, larger_vocab, os.path.join(work, "c"))
        got = run(path, ids)
        check(got.shape == (2, 7, 600) and
              np.array_equal(got[..., :512], expected),
              "vocabulary 512 -> 600 keeps the twin's logits")

        broken = onnx.load(twin_path)
        try:
            onnx_graft.graft(broken, params, 1, 512, 512)
            check(False, "a graft to 1 layer is refused")
        except onnx_graft.GraftError as error:
            check("2 or more" in str(error), "refused: %s" % error)
        same = dict(params)
        same["copy"] = params[next(n for n in sorted(params) if ".layers.0." in n)]
        try:
            onnx_graft.graft(onnx.load(twin_path), same, 3, 512, 512)
            check(False, "equal twin parameters are refused")
        except onnx_graft.GraftError as error:
            check("same values" in str(error), "refused: %s" % error)


def check_torch():
    import torch
    import llama_bench
    torch.manual_seed(0)
    dims = dict(vocab_size=300, hidden_size=64, intermediate_size=160,
                num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, rope_theta=10000.0)
    model = llama_bench.make_llama(dims, device="cpu", dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.05)
    ids = np.random.default_rng(1).integers(0, 300, (2, 9)).astype(np.int64)
    with torch.no_grad():
        expected = model(input_ids=torch.from_numpy(ids),
                         use_cache=False).logits.float().numpy()
    with tempfile.TemporaryDirectory() as work:
        path = llama_bench.export_by_layers(model, work, "fp32")
        check(linear_count(path) == 4 * 7 + 1,
              "4 layers of 7 linears and the LM head")
        got = run(path, ids)
    diff = np.abs(got - expected).max()
    check(diff < 1e-4, "onnxruntime on the graft = the torch model (max "
          "diff %g)" % diff)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--twin")
    parser.add_argument("--torch", action="store_true")
    parser.add_argument("--keep", help="--twin: write the 4-layer model "
                        "with two silent layers (the twin's logits) here")
    args = parser.parse_args()
    if args.twin:
        check_twin(args.twin, args.keep)
    if args.torch:
        check_torch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
