#!/usr/bin/env python3
"""Writes one-layer models in the ONNX Runtime GenAI builder's form (a
GroupQueryAttention owning its cache, the lengths computed from
attention_mask), with one option of the attention or of its position
inputs per case, for the raising tests of the ONNX frontend.

  onnx_genai_models.py CASE OUT.onnx

`list` prints the cases. Tiny random weights: vocab 16, hidden 32, 4 query
and 2 kv heads of 16.
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64
MS = "com.microsoft"
HEADS, KV, HEAD, HIDDEN, VOCAB, POSITIONS = 4, 2, 16, 32, 16, 64


def build(path, attrs=None, positions=None, bias=None, sink=False,
          output_qk=False, rotary="gqa", absolute_positions=False,
          mask_reader=False):
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, outputs, name, domain="", **kw):
        nodes.append(helper.make_node(op, inputs, outputs, name=name,
                                      domain=domain, **kw))
        return outputs[0]

    inputs = [helper.make_tensor_value_info("input_ids", I64,
                                            ["batch", "seq"]),
              helper.make_tensor_value_info("attention_mask", I64,
                                            ["batch", "total"])]
    for kind in ("key", "value"):
        inputs.append(helper.make_tensor_value_info(
            "past_key_values.0." + kind, F, ["batch", KV, "past", HEAD]))
    if positions == "input":
        inputs.append(helper.make_tensor_value_info("position_ids", I64,
                                                    ["batch", "seq"]))
    weight = lambda *shape: (rng.standard_normal(shape) * 0.2).astype(
        np.float32)
    x = node("Gather", [const("embed", weight(VOCAB, HIDDEN)), "input_ids"],
             ["x"], "/model/embed_tokens/Gather")
    if absolute_positions:
        # A learned position table read with the positions (GPT-2 style).
        wpe = node("Gather", [const("wpe", weight(POSITIONS, HIDDEN)),
                              "position_ids"], ["wpe_rows"], "/model/wpe")
        x = node("Add", [x, wpe], ["x_pos"], "/model/add_wpe")
    if mask_reader:
        # The mask scales the hidden states (not a padding mask of the
        # attention).
        m = node("Cast", ["attention_mask"], ["mask_f"], "/model/mask_cast",
                 to=F)
        m = node("ReduceMean", [m, const("axes1", np.array([1], np.int64))],
                 ["mask_mean"], "/model/mask_mean", keepdims=1)
        m = node("Unsqueeze", [m, const("axes2", np.array([2], np.int64))],
                 ["mask_3d"], "/model/mask_unsqueeze")
        x = node("Mul", [x, m], ["x_masked"], "/model/mask_mul")
    width = (HEADS + 2 * KV) * HEAD
    qkv = node("MatMul", [x, const("qkv_w", weight(HIDDEN, width))], ["qkv"],
               "/model/layers.0/attn/qkv_proj/MatMul")
    # seqlens_k = sum(mask) - 1, total = mask's length: the builder's form.
    total = node("ReduceSum", ["attention_mask",
                               const("one", np.array([1], np.int64))],
                 ["mask_sum"], "/model/attn_mask/ReduceSum", keepdims=0)
    total = node("Sub", [total, const("one_s", np.array(1, np.int64))],
                 ["seqlens64"], "/model/attn_mask/Sub")
    seqlens = node("Cast", [total], ["seqlens_k"], "/model/attn_mask/Cast",
                   to=TensorProto.INT32)
    shape = node("Shape", ["attention_mask"], ["mask_shape"],
                 "/model/attn_mask/Shape")
    length = node("Gather", [shape, const("idx1", np.array(1, np.int64))],
                  ["total64"], "/model/attn_mask/Gather")
    length = node("Cast", [length], ["total_len"], "/model/attn_mask/Cast2",
                  to=TensorProto.INT32)
    angle = np.arange(POSITIONS)[:, None] * (
        10000.0 ** (-np.arange(HEAD // 2) / (HEAD // 2)))[None, :]
    cos = const("cos_cache", np.cos(angle).astype(np.float32))
    sin = const("sin_cache", np.sin(angle).astype(np.float32))
    position_ids = ""
    if positions == "input":
        position_ids = "position_ids"
    elif positions == "computed":
        # cumsum(mask) - 1, the last seq of them: positions from the mask.
        c = node("CumSum", ["attention_mask",
                            const("axis1", np.array(1, np.int64))],
                 ["mask_cumsum"], "/model/pos/CumSum")
        position_ids = node("Sub", [c, const("one_p", np.array(1, np.int64))],
                            ["position_ids_c"], "/model/pos/Sub")
    q_in, k_in, v_in = qkv, "", ""
    if rotary == "standalone":
        # Separate q, k, v and RotaryEmbedding ops (the builder's DirectML
        # form), attention without rotary.
        split = node("Split", [qkv, const("sizes", np.array(
            [HEADS * HEAD, KV * HEAD, KV * HEAD], np.int64))],
            ["q", "k", "v"], "/model/layers.0/attn/Split", axis=-1)
        q_in = node("RotaryEmbedding", ["q", position_ids, cos, sin],
                    ["q_rot"], "/model/layers.0/attn/q_rotary", domain=MS)
        k_in = node("RotaryEmbedding", ["k", position_ids, cos, sin],
                    ["k_rot"], "/model/layers.0/attn/k_rotary", domain=MS)
        v_in = "v"
    gqa_inputs = [q_in, k_in, v_in, "past_key_values.0.key",
                  "past_key_values.0.value", seqlens, length]
    gqa_inputs += [cos, sin] if rotary == "gqa" else ["", ""]
    gqa_inputs += [position_ids if rotary == "gqa" else ""]
    if bias is not None:
        # A float [1, 1, seq, total] bias, every element `bias`.
        bshape = node("Concat", [const("ones2", np.array([1, 1], np.int64)),
                                 node("Shape", ["input_ids"], ["ids_seq"],
                                      "/model/bias/Shape", start=1, end=2),
                                 node("Shape", ["attention_mask"],
                                      ["mask_len"], "/model/bias/Shape2",
                                      start=1, end=2)],
                      ["bias_shape"], "/model/bias/Concat", axis=0)
        gqa_inputs.append(node(
            "ConstantOfShape", [bshape], ["attention_bias"],
            "/model/bias/ConstantOfShape",
            value=numpy_helper.from_array(np.full(1, bias, np.float32))))
    elif sink:
        gqa_inputs.append("")
    if sink:
        gqa_inputs.append(const("head_sink", weight(HEADS)))
    while not gqa_inputs[-1]:
        gqa_inputs.pop()
    gqa_outputs = ["attn", "present.0.key", "present.0.value"]
    if output_qk:
        gqa_outputs.append("qk")
    gqa_attrs = dict(num_heads=HEADS, kv_num_heads=KV,
                     do_rotary=int(rotary == "gqa"))
    gqa_attrs.update(attrs or {})
    node("GroupQueryAttention", gqa_inputs, gqa_outputs,
         "/model/layers.0/attn/GroupQueryAttention", domain=MS, **gqa_attrs)
    y = node("MatMul", ["attn", const("o_w", weight(HEADS * HEAD, HIDDEN))],
             ["o"], "/model/layers.0/attn/o_proj/MatMul")
    node("MatMul", [y, const("lm_w", weight(HIDDEN, VOCAB))], ["logits"],
         "/lm_head/MatMul")
    outputs = [helper.make_tensor_value_info("logits", F,
                                             ["batch", "seq", VOCAB])]
    for kind in ("key", "value"):
        outputs.append(helper.make_tensor_value_info(
            "present.0." + kind, F, ["batch", KV, "total", HEAD]))
    if output_qk:
        outputs.append(helper.make_tensor_value_info("qk", F, None))
    graph = helper.make_graph(nodes, "genai", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    onnx.save(model, path)


CASES = {
    "gqa": lambda p: build(p),
    "gqa-window": lambda p: build(p, attrs=dict(local_window_size=3)),
    "gqa-position-ids": lambda p: build(p, positions="input"),
    "gqa-position-ids-computed": lambda p: build(p, positions="computed"),
    "gqa-attention-bias-zero": lambda p: build(p, bias=0.0),
    "gqa-attention-bias": lambda p: build(p, bias=0.5),
    "gqa-head-sink": lambda p: build(p, sink=True),
    "gqa-smooth-softmax": lambda p: build(p, attrs=dict(smooth_softmax=1)),
    "gqa-output-qk": lambda p: build(p, output_qk=True,
                                     attrs=dict(qk_output=1)),
    "rotary-standalone": lambda p: build(p, positions="input",
                                         rotary="standalone"),
    "positions-absolute": lambda p: build(p, positions="input",
                                          absolute_positions=True),
    "mask-read": lambda p: build(p, mask_reader=True),
}


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "list":
        print("\n".join(CASES))
        return
    if len(sys.argv) != 3 or sys.argv[1] not in CASES:
        raise SystemExit("usage: onnx_genai_models.py CASE|list OUT.onnx")
    CASES[sys.argv[1]](sys.argv[2])


if __name__ == "__main__":
    main()
