#!/usr/bin/env python3
"""Writes small ONNX models holding one exporter idiom (or a near-miss of
one), for the raising tests of the ONNX frontend.

  onnx_pattern_models.py CASE OUT.onnx

`list` prints the cases. Nodes are named after their role (`q_scale`,
`softmax`, ...) so that tests can check locations and warnings. The graphs
follow what torch.onnx.export (dynamo) emits for Hugging Face decoders,
with the variations other exporters and architectures use.
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64


class Graph:
    """Collects nodes and initializers; `op` returns the output name."""

    def __init__(self):
        self.nodes = []
        self.inits = []
        self.count = 0

    def const(self, name, value, dtype=np.float32):
        array = np.array(value, dtype=dtype)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op_type, inputs, name=None, outputs=1, **attrs):
        self.count += 1
        name = name or "%s_%d" % (op_type.lower(), self.count)
        outs = [name] if outputs == 1 else \
            ["%s_%d" % (name, i) for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name,
                                           **attrs))
        return outs[0] if outputs == 1 else outs

    def save(self, path, inputs, outputs, opset=20):
        graph = helper.make_graph(self.nodes, "pattern", inputs, outputs,
                                  self.inits)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", opset)])
        onnx.save(model, path)


def tensor(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


# --- RoPE ------------------------------------------------------------------


def angle(g, ids, half, name="angle"):
    """The HF/dynamo angle: Transpose(MatMul(inv_freq [1, F, 1],
    float(arange(seq))[None, None, :]))."""
    g.const("zero", 0, np.int64)
    g.const("one_i", 1, np.int64)
    g.const("axis0", [0], np.int64)
    g.const("axis1", [1], np.int64)
    seq = g.op("Shape", [ids], "seq_shape", start=1, end=2)
    seq_scalar = g.op("Squeeze", [seq], "seq_scalar")
    arange = g.op("Range", ["zero", seq_scalar, "one_i"], "arange")
    pos = g.op("Unsqueeze", [arange, "axis0"], "positions")
    pos3 = g.op("Unsqueeze", [pos, "axis1"], "positions_row")
    posf = g.op("Cast", [pos3], "positions_float", to=F)
    inv = 1.0 / (10000 ** (np.arange(half, dtype=np.float32) * 2 / (2 * half)))
    g.const("inv_freq", inv.reshape(1, half, 1))
    prod = g.op("MatMul", ["inv_freq", posf], "freqs")
    return g.op("Transpose", [prod], name, perm=[0, 2, 1])


def cos_sin_full(g, t):
    """cos/sin of cat(t, t) with a head axis: [1, 1, S, 2F]."""
    emb = g.op("Concat", [t, t], "emb", axis=-1)
    cos = g.op("Cos", [emb], "cos")
    sin = g.op("Sin", [emb], "sin")
    g.const("head_axis", [1], np.int64)
    return (g.op("Unsqueeze", [cos, "head_axis"], "cos_heads"),
            g.op("Unsqueeze", [sin, "head_axis"], "sin_heads"))


def rotate_half(g, x, width, prefix, order="neg_first", split=None):
    half = split if split is not None else width // 2
    g.const(prefix + "_h", [half], np.int64)
    g.const(prefix + "_zero", [0], np.int64)
    g.const(prefix + "_end", [2**63 - 1], np.int64)
    g.const(prefix + "_last", [-1], np.int64)
    low = g.op("Slice", [x, prefix + "_zero", prefix + "_h", prefix + "_last"],
               prefix + "_low")
    high = g.op("Slice", [x, prefix + "_h", prefix + "_end", prefix + "_last"],
                prefix + "_high")
    if order == "neg_first":
        neg = g.op("Neg", [high], prefix + "_neg")
        return g.op("Concat", [neg, low], prefix + "_rotated", axis=-1)
    neg = g.op("Neg", [high], prefix + "_neg")
    return g.op("Concat", [low, neg], prefix + "_rotated", axis=-1)


def rope_block(g, x, cos, sin, width, prefix, **kwargs):
    a = g.op("Mul", [x, cos], prefix + "_cos_term")
    r = rotate_half(g, x, width, prefix, **kwargs)
    b = g.op("Mul", [r, sin], prefix + "_sin_term")
    return g.op("Add", [a, b], prefix + "_rope")


def case_rope(path, order="neg_first", split=None, doubled=True):
    g = Graph()
    t = angle(g, "ids", 4)
    if doubled:
        cos, sin = cos_sin_full(g, t)
    else:
        g.const("t2_scale", 2.0)
        t2 = g.op("Mul", [t, "t2_scale"], "angle_twice")
        emb = g.op("Concat", [t, t2], "emb", axis=-1)
        g.const("head_axis", [1], np.int64)
        cos = g.op("Unsqueeze", [g.op("Cos", [emb], "cos"), "head_axis"],
                   "cos_heads")
        sin = g.op("Unsqueeze", [g.op("Sin", [emb], "sin"), "head_axis"],
                   "sin_heads")
    q = rope_block(g, "q", cos, sin, 8, "q", order=order, split=split)
    k = rope_block(g, "k", cos, sin, 8, "k", order=order, split=split)
    g.nodes.append(helper.make_node("Identity", [q], ["q_out"], name="q_out"))
    g.nodes.append(helper.make_node("Identity", [k], ["k_out"], name="k_out"))
    g.save(path, [tensor("ids", ["batch", "seq"], I64),
                  tensor("q", ["batch", 4, "seq", 8]),
                  tensor("k", ["batch", 2, "seq", 8])],
           [tensor("q_out", None), tensor("k_out", None)])


def case_rope_f16(path):
    """An f16 graph: cos/sin computed in f32 and cast to f16 before the head
    axis is inserted; q and k are f16."""
    g = Graph()
    t = angle(g, "ids", 4)
    emb = g.op("Concat", [t, t], "emb", axis=-1)
    g.const("head_axis", [1], np.int64)
    tables = []
    for trig in ("Cos", "Sin"):
        name = trig.lower()
        value = g.op(trig, [emb], name)
        half = g.op("Cast", [value], name + "_f16", to=TensorProto.FLOAT16)
        tables.append(g.op("Unsqueeze", [half, "head_axis"], name + "_heads"))
    q = rope_block(g, "q", tables[0], tables[1], 8, "q")
    k = rope_block(g, "k", tables[0], tables[1], 8, "k")
    g.nodes.append(helper.make_node("Identity", [q], ["q_out"], name="q_out"))
    g.nodes.append(helper.make_node("Identity", [k], ["k_out"], name="k_out"))
    H = TensorProto.FLOAT16
    g.save(path, [tensor("ids", ["batch", "seq"], I64),
                  tensor("q", ["batch", 4, "seq", 8], H),
                  tensor("k", ["batch", 2, "seq", 8], H)],
           [tensor("q_out", None, H), tensor("k_out", None, H)])


def case_rope_wrong_sign(path):
    case_rope(path, order="neg_second")


def case_rope_wrong_split(path):
    case_rope(path, split=2)


def case_rope_table_not_doubled(path):
    case_rope(path, doubled=False)


def case_rope_partial(path):
    """Rotary dim 4 of a head of 8: rope on x[..., :4], x[..., 4:] appended."""
    g = Graph()
    t = angle(g, "ids", 2)
    cos, sin = cos_sin_full(g, t)
    g.const("r0", [0], np.int64)
    g.const("r4", [4], np.int64)
    g.const("rend", [2**63 - 1], np.int64)
    g.const("rlast", [-1], np.int64)
    rot = g.op("Slice", ["q", "r0", "r4", "rlast"], "q_rot")
    rest = g.op("Slice", ["q", "r4", "rend", "rlast"], "q_pass")
    roped = rope_block(g, rot, cos, sin, 4, "q")
    g.op("Concat", [roped, rest], "q_out", axis=-1)
    g.save(path, [tensor("ids", ["batch", "seq"], I64),
                  tensor("q", ["batch", 4, "seq", 8])],
           [tensor("q_out", None)])


def case_rope_position_input(path):
    """Positions given as an input (not provably arange)."""
    g = Graph()
    g.const("axis1", [1], np.int64)
    row = g.op("Unsqueeze", ["position_ids", "axis1"], "positions_row")
    posf = g.op("Cast", [row], "positions_float", to=F)
    inv = 1.0 / (10000 ** (np.arange(4, dtype=np.float32) / 4))
    g.const("inv_freq", inv.reshape(1, 4, 1))
    prod = g.op("MatMul", ["inv_freq", posf], "freqs")
    t = g.op("Transpose", [prod], "angle", perm=[0, 2, 1])
    cos, sin = cos_sin_full(g, t)
    q = rope_block(g, "q", cos, sin, 8, "q")
    g.nodes.append(helper.make_node("Identity", [q], ["q_out"], name="q_out"))
    g.save(path, [tensor("position_ids", ["batch", "seq"], I64),
                  tensor("q", ["batch", 4, "seq", 8])],
           [tensor("q_out", None)])


def rotary23(path, layout="4d", interleaved=0, with_positions=False):
    g = Graph()
    if with_positions:
        table = np.arange(64 * 4, dtype=np.float32).reshape(64, 4) / 256
        g.const("cos_cache", np.cos(table))
        g.const("sin_cache", np.sin(table))
        inputs = ["x", "cos_cache", "sin_cache", "position_ids"]
    else:
        t = angle(g, "ids", 4)
        inputs = ["x", g.op("Cos", [t], "cos"), g.op("Sin", [t], "sin")]
    attrs = {"interleaved": interleaved}
    if layout == "3d":
        attrs["num_heads"] = 4
    g.op("RotaryEmbedding", inputs, "rope", **attrs)
    g.nodes.append(helper.make_node("Identity", ["rope"], ["y"], name="y"))
    x = tensor("x", ["batch", 4, "seq", 8] if layout == "4d"
               else ["batch", "seq", 32])
    ins = [tensor("ids", ["batch", "seq"], I64), x]
    if with_positions:
        ins = [x, tensor("position_ids", ["batch", "seq"], I64)]
    g.save(path, ins, [tensor("y", None)], opset=23)


def case_rotary23(path):
    rotary23(path)


def case_rotary23_3d(path):
    rotary23(path, layout="3d")


def case_rotary23_interleaved(path):
    rotary23(path, interleaved=1)


def case_rotary23_positions(path):
    rotary23(path, with_positions=True)


# --- attention ---------------------------------------------------------------


def shape_of(g, x, start, end, name):
    return g.op("Shape", [x], name, start=start, end=end)


def repeat_kv(g, x, kv, rep, prefix, outer=False):
    """GQA repetition as dynamo exports it: Unsqueeze at 2, Expand to
    [b, kv, rep, s, d], Reshape to [b, kv*rep, s, d]. `outer` repeats at
    axis 1 instead (kv head h % kv: not what sits.attention reads)."""
    axis = 1 if outer else 2
    g.const(prefix + "_axis", [axis], np.int64)
    u = g.op("Unsqueeze", [x, prefix + "_axis"], prefix + "_unsqueeze")
    b = shape_of(g, x, 0, 1, prefix + "_batch")
    s = shape_of(g, x, 2, 3, prefix + "_seq")
    d = shape_of(g, x, 3, 4, prefix + "_dim")
    g.const(prefix + "_kv", [kv], np.int64)
    g.const(prefix + "_rep", [rep], np.int64)
    g.const(prefix + "_heads", [kv * rep], np.int64)
    dims = [b, prefix + "_rep", prefix + "_kv"] if outer else \
        [b, prefix + "_kv", prefix + "_rep"]
    target = g.op("Concat", dims + [s, d], prefix + "_expand_shape", axis=0)
    e = g.op("Expand", [u, target], prefix + "_expand")
    shape = g.op("Concat", [b, prefix + "_heads", s, d], prefix + "_shape",
                 axis=0)
    return g.op("Reshape", [e, shape], prefix + "_repeat")


def transpose_k_by_reshapes(g, k, prefix="kt"):
    """K^T the way dynamo spells it: Reshape to [-1, s, d], Transpose
    (0, 2, 1), Reshape back to [b, h, d, s], from Shape slices."""
    shape = g.op("Shape", [k], prefix + "_shape")
    g.const(prefix + "_m1", [-1], np.int64)
    g.const(prefix + "_m2", [-2], np.int64)
    g.const(prefix + "_big", [2**63 - 1], np.int64)
    g.const(prefix + "_small", [-(2**63)], np.int64)
    last = g.op("Slice", [shape, prefix + "_m1", prefix + "_big"],
                prefix + "_last")
    second = g.op("Slice", [shape, prefix + "_m2", prefix + "_m1"],
                  prefix + "_second")
    lead = g.op("Slice", [shape, prefix + "_small", prefix + "_m2"],
                prefix + "_lead")
    flat_shape = g.op("Concat", [prefix + "_m1", second, last],
                      prefix + "_flat_shape", axis=0)
    flat = g.op("Reshape", [k, flat_shape], prefix + "_flat")
    t = g.op("Transpose", [flat], prefix + "_transpose", perm=[0, 2, 1])
    back = g.op("Concat", [lead, last, second], prefix + "_back_shape",
                axis=0)
    return g.op("Reshape", [t, back], prefix + "_kt")


def attention(path, kv=2, heads=4, ktrans="reshapes", scale="split",
              mask="where_add", nan_guard=True, softmax_axis=-1,
              gqa="inner", mask_shape=None, softcap=None):
    g = Graph()
    k, v = "k", "v"
    if kv != heads:
        k = repeat_kv(g, "k", kv, heads // kv, "k_rep", outer=gqa == "outer")
        v = repeat_kv(g, "v", kv, heads // kv, "v_rep", outer=gqa == "outer")
    q = "q"
    if scale == "split":
        g.const("qk_scale", 8 ** -0.25)
        q = g.op("Mul", [q, "qk_scale"], "q_scale")
    if ktrans == "reshapes":
        kt = transpose_k_by_reshapes(g, k)
    else:
        kt = g.op("Transpose", [k], "kt", perm=[0, 1, 3, 2])
    if scale == "split":
        kt = g.op("Mul", [kt, "qk_scale"], "k_scale")
    scores = g.op("MatMul", [q, kt], "scores")
    if scale == "after":
        g.const("sqrt_d", np.sqrt(8.0))
        scores = g.op("Div", [scores, "sqrt_d"], "scores_scaled")
    if scale == "tensor":
        scores = g.op("Mul", [scores, "temperature"], "scores_scaled")
    if softcap:
        g.const("cap", softcap)
        divided = g.op("Div", [scores, "cap"], "scores_over_cap")
        tanh = g.op("Tanh", [divided], "scores_tanh")
        scores = g.op("Mul", [tanh, "cap"], "scores_capped")
    inputs = [tensor("q", ["batch", heads, "seq", 8]),
              tensor("k", ["batch", kv, "seq", 8]),
              tensor("v", ["batch", kv, "seq", 8])]
    if mask == "where_add":
        g.const("zero_f", 0.0)
        g.const("min_f", np.finfo(np.float32).min)
        additive = g.op("Where", ["mask", "zero_f", "min_f"], "mask_additive")
        scores = g.op("Add", [scores, additive], "masked")
        inputs.append(tensor("mask", mask_shape or ["batch", 1, "seq", "seq"],
                             TensorProto.BOOL))
    elif mask == "float":
        scores = g.op("Add", ["bias", scores], "masked")
        inputs.append(tensor("bias", [1, 1, "seq", "seq"]))
    elif mask == "select":
        g.const("minus_inf", -np.inf)
        scores = g.op("Where", ["mask", scores, "minus_inf"], "masked")
        inputs.append(tensor("mask", ["batch", 1, "seq", "seq"],
                             TensorProto.BOOL))
    if scale == "tensor":
        inputs.append(tensor("temperature", []))
    p = g.op("Softmax", [scores], "softmax", axis=softmax_axis)
    if nan_guard:
        nan = g.op("IsNaN", [p], "is_nan")
        g.const("zero_p", 0.0)
        p = g.op("Where", [nan, "zero_p", p], "nan_to_zero")
    g.op("MatMul", [p, v], "attention")
    g.save(path, inputs, [tensor("attention", None)])


def case_attention_gqa(path):
    attention(path)


def case_attention_direct(path):
    attention(path, ktrans="direct", scale="after", mask="float",
              nan_guard=False)


def case_attention_select(path):
    attention(path, kv=4, ktrans="direct", scale="after", mask="select",
              nan_guard=True)


def case_attention_mqa(path):
    attention(path, kv=1, ktrans="direct", mask="none", nan_guard=False)


def case_attention_softcap(path):
    """Gemma-2: scores = cap * tanh(scores / cap) before the mask."""
    attention(path, softcap=50.0)


def case_attention_softmax_axis(path):
    attention(path, softmax_axis=2)


def case_attention_tensor_scale(path):
    attention(path, scale="tensor", mask="none")


def case_attention_gqa_outer(path):
    attention(path, gqa="outer")


def case_attention_bad_mask(path):
    attention(path, mask_shape=["batch", 1, "seq", 7])


def attention23(path, is_causal=0, softcap=0.0, layout="4d", past=False,
                kv_seq="seq"):
    g = Graph()
    heads, kv = 4, 2
    if layout == "4d":
        k = repeat_kv(g, "k", kv, heads // kv, "k_rep")
        v = repeat_kv(g, "v", kv, heads // kv, "v_rep")
        inputs = [tensor("q", ["batch", heads, "seq", 8]),
                  tensor("k", ["batch", kv, kv_seq, 8]),
                  tensor("v", ["batch", kv, kv_seq, 8])]
    else:
        k, v = "k", "v"
        inputs = [tensor("q", ["batch", "seq", heads * 8]),
                  tensor("k", ["batch", kv_seq, kv * 8]),
                  tensor("v", ["batch", kv_seq, kv * 8])]
    attrs = {"is_causal": is_causal}
    if softcap:
        attrs["softcap"] = softcap
    if layout == "3d":
        attrs.update(q_num_heads=heads, kv_num_heads=kv)
    ins = ["q", k, v, "mask"]
    inputs.append(tensor("mask", ["batch", 1, "seq", kv_seq],
                         TensorProto.BOOL))
    outputs = 1
    if past:
        ins += ["past_k", "past_v"]
        inputs += [tensor("past_k", ["batch", heads, "past", 8]),
                   tensor("past_v", ["batch", heads, "past", 8])]
    g.op("Attention", ins, "attention", **attrs)
    g.save(path, inputs, [tensor("attention", None)], opset=23)


def case_attention23_causal(path):
    attention23(path, is_causal=1, softcap=30.0)


def case_attention23_causal_cross(path):
    # Fewer queries than keys: without a past, query i sees keys j <= i.
    attention23(path, is_causal=1, kv_seq="kv_seq")


def case_attention23_3d(path):
    attention23(path, layout="3d")


def case_attention23_past(path):
    attention23(path, past=True)


CASES = {name[len("case_"):].replace("_", "-"): fn
         for name, fn in sorted(globals().items()) if name.startswith("case_")}


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "list":
        print("\n".join(CASES))
        return 0
    if len(sys.argv) != 3 or sys.argv[1] not in CASES:
        sys.stderr.write("usage: onnx_pattern_models.py CASE OUT.onnx "
                         "(cases: %s)\n" % ", ".join(CASES))
        return 2
    CASES[sys.argv[1]](sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
