#!/usr/bin/env python3
"""Writes a small decoder in the sits dialect (the `sits` stage, as raising
produces it) with random weights, for the codegen tests.

  make_program.py --preset llama|neox|gemma [--seed N] [--splat] -o FILE.mlir

Presets cover what codegen must handle:
  llama  GQA (4 heads / 2 KV heads), RMSNorm, full rotary (rotate_half),
         SwiGLU MLP, untied LM head
  neox   LayerNorm with bias, biases on every linear, partial rotary (8 of 16,
         interleaved), GELU MLP (not gated), tied LM head with a bias
  gemma  embedding scale, RMSNorm with weight_offset, per-head RMSNorm of q
         and k, MQA (1 KV head), GeGLU (gelu_tanh), attention softcap and a
         sliding window, widths that are not multiples of 8 (scalar loads)

--splat stores every weight as one repeated value, a different one per
weight (small files for FileCheck tests); otherwise weights are random (for
numerical tests).
"""

import argparse
import struct

import numpy as np

PRESETS = {
    "llama": dict(vocab=96, hidden=64, heads=4, kv_heads=2, head_dim=16,
                  rotary=16, interleaved=False, layers=2, intermediate=88,
                  norm="rms", linear_bias=False, mlp="swiglu", tied=False,
                  lm_bias=False, embed_scale=None, weight_offset=0.0,
                  qk_norm=False, softcap=None, window=None),
    "neox": dict(vocab=80, hidden=64, heads=4, kv_heads=4, head_dim=16,
                 rotary=8, interleaved=True, layers=2, intermediate=96,
                 norm="layer", linear_bias=True, mlp="gelu", tied=True,
                 lm_bias=True, embed_scale=None, weight_offset=0.0,
                 qk_norm=False, softcap=None, window=None),
    "gemma": dict(vocab=72, hidden=20, heads=4, kv_heads=1, head_dim=10,
                  rotary=6, interleaved=False, layers=2, intermediate=36,
                  norm="rms", linear_bias=False, mlp="geglu", tied=True,
                  lm_bias=False, embed_scale=4.47213595, weight_offset=1.0,
                  qk_norm=True, softcap=8.0, window=5),
}


class Writer:
    def __init__(self, rng, splat):
        self.rng = rng
        self.splat = splat
        self.lines = []
        self.count = 0
        self.weights = 0

    def value(self):
        self.count += 1
        return "%%v%d" % self.count

    def emit(self, text):
        self.lines.append("  " + text)

    def weight(self, name, shape, scale=None, offset=0.0):
        type_ = "tensor<%sxf32>" % "x".join(str(d) for d in shape)
        result = "%" + name.replace(".", "_")
        self.weights += 1
        if self.splat:
            # A different value per weight, so that CSE merges none of them.
            value = offset + 0.001 * self.weights
            data = "dense<%s>" % repr(float(np.float32(value)))
        else:
            size = int(np.prod(shape))
            scale = scale if scale is not None else 1.0 / np.sqrt(shape[-1])
            values = (offset + self.rng.standard_normal(size) * scale).astype(
                "<f4")
            data = 'dense<"0x%s">' % values.tobytes().hex().upper()
        self.emit('%s = sits.weight "%s" %s : %s' % (result, name, data, type_))
        return result, type_


def act_type(hidden):
    return "tensor<?x?x%dxf32>" % hidden


def heads_type(heads, head_dim):
    return "tensor<?x%dx?x%dxf32>" % (heads, head_dim)


def build(p, rng, splat):
    w = Writer(rng, splat)
    H, V, D = p["hidden"], p["vocab"], p["head_dim"]
    nh, nkv, R = p["heads"], p["kv_heads"], p["rotary"]
    x_t = act_type(H)
    header = ("func.func @forward(%%ids: tensor<?x?xi64>) -> tensor<?x?x%dxf32> {"
              % V)
    embed, embed_t = w.weight("embed", [V, H], scale=1.0)
    x = w.value()
    scale = (' {scale = %s : f32}' % p["embed_scale"]) if p["embed_scale"] else ""
    w.emit("%s = sits.embedding %s[%%ids]%s : %s, tensor<?x?xi64> -> %s"
           % (x, embed, scale, embed_t, x_t))
    pos = w.value()
    w.emit("%s = sits.position_ids %%ids : tensor<?x?xi64> -> tensor<?x?xi64>"
           % pos)
    inv = 1.0 / (10000.0 ** (np.arange(0, R, 2, dtype=np.float64) / R))
    inv_text = ", ".join(repr(float(np.float32(v))) for v in inv)
    cos, sin = w.value(), w.value()
    half_t = "tensor<?x?x%dxf32>" % (R // 2)
    w.emit("%s, %s = sits.rope_cos_sin %s {inv_freq = dense<[%s]> : "
           "tensor<%dxf32>} : tensor<?x?xi64> -> %s, %s"
           % (cos, sin, pos, inv_text, R // 2, half_t, half_t))

    def norm(inp, width, name, type_=None):
        type_ = type_ or act_type(width)
        out = w.value()
        if p["norm"] == "layer":
            g, g_t = w.weight(name + ".weight", [width], scale=0.2, offset=1.0)
            b, b_t = w.weight(name + ".bias", [width], scale=0.1)
            w.emit("%s = sits.layer_norm %s, %s bias(%s : %s) {epsilon = "
                   "1.0e-05 : f32} : %s, %s -> %s"
                   % (out, inp, g, b, b_t, type_, g_t, type_))
        else:
            offset = p["weight_offset"]
            g, g_t = w.weight(name + ".weight", [width], scale=0.2,
                              offset=1.0 - offset)
            extra = (", weight_offset = %s : f32" % offset) if offset else ""
            w.emit("%s = sits.rms_norm %s, %s {epsilon = 1.0e-06 : f32%s} : "
                   "%s, %s -> %s" % (out, inp, g, extra, type_, g_t, type_))
        return out

    def linear(inp, k, n, name, bias=None):
        bias = p["linear_bias"] if bias is None else bias
        wt, wt_t = w.weight(name + ".weight", [n, k])
        out = w.value()
        text = "%s = sits.linear %s, %s" % (out, inp, wt)
        if bias:
            b, b_t = w.weight(name + ".bias", [n], scale=0.1)
            text += " bias(%s : %s)" % (b, b_t)
        w.emit(text + " : %s, %s -> %s" % (act_type(k), wt_t, act_type(n)))
        return out

    for layer in range(p["layers"]):
        pre = "layers.%d." % layer
        h = norm(x, H, pre + "attn_norm")
        q = linear(h, H, nh * D, pre + "q_proj")
        k = linear(h, H, nkv * D, pre + "k_proj")
        v = linear(h, H, nkv * D, pre + "v_proj")
        heads = []
        for value, count, tag in ((q, nh, "q"), (k, nkv, "k"), (v, nkv, "v")):
            split = w.value()
            w.emit("%s = sits.split_heads %s {num_heads = %d} : %s -> %s"
                   % (split, value, count, act_type(count * D),
                      heads_type(count, D)))
            if p["qk_norm"] and tag != "v":
                split = norm(split, D, pre + tag + "_norm",
                             heads_type(count, D))
            heads.append(split)
        qh, kh, vh = heads
        style = "interleaved" if p["interleaved"] else "rotate_half"
        roped = []
        for value, count in ((qh, nh), (kh, nkv)):
            r = w.value()
            w.emit("%s = sits.rope %s, %s, %s {style = #sits.rope_style<%s>, "
                   "rotary_dim = %d} : %s, %s, %s -> %s"
                   % (r, value, cos, sin, style, R, heads_type(count, D),
                      half_t, half_t, heads_type(count, D)))
            roped.append(r)
        attrs = ["num_heads = %d" % nh, "num_kv_heads = %d" % nkv,
                 "scale = %s : f32" % repr(float(np.float32(D ** -0.5))),
                 "causal = #sits.causal<bottom_right>"]
        if p["window"]:
            attrs.append("window = %d" % p["window"])
        if p["softcap"]:
            attrs.append("softcap = %s : f32" % p["softcap"])
        attn = w.value()
        w.emit("%s = sits.attention %s, %s, %s {%s} : %s, %s, %s -> %s"
               % (attn, roped[0], roped[1], vh, ", ".join(attrs),
                  heads_type(nh, D), heads_type(nkv, D), heads_type(nkv, D),
                  heads_type(nh, D)))
        merged = w.value()
        w.emit("%s = sits.merge_heads %s : %s -> %s"
               % (merged, attn, heads_type(nh, D), act_type(nh * D)))
        o = linear(merged, nh * D, H, pre + "o_proj")
        x1 = w.value()
        w.emit("%s = sits.add %s, %s : %s" % (x1, x, o, x_t))
        h2 = norm(x1, H, pre + "mlp_norm")
        I = p["intermediate"]
        if p["mlp"] in ("swiglu", "geglu"):
            gate = linear(h2, H, I, pre + "gate_proj")
            up = linear(h2, H, I, pre + "up_proj")
            act = w.value()
            kind = "silu" if p["mlp"] == "swiglu" else "gelu_tanh"
            w.emit("%s = sits.glu <%s> %s, %s : %s"
                   % (act, kind, gate, up, act_type(I)))
        else:
            fc = linear(h2, H, I, pre + "fc_in")
            act = w.value()
            w.emit("%s = sits.activation <gelu> %s : %s" % (act, fc, act_type(I)))
        down = linear(act, I, H, pre + "down_proj")
        x = w.value()
        w.emit("%s = sits.add %s, %s : %s" % (x, x1, down, x_t))
    h = norm(x, H, "final_norm")
    logits = w.value()
    if p["tied"]:
        head, head_t = embed, embed_t
    else:
        head, head_t = w.weight("lm_head.weight", [V, H])
    text = "%s = sits.lm_head %s, %s" % (logits, h, head)
    if p["lm_bias"]:
        b, b_t = w.weight("lm_head.bias", [V], scale=0.1)
        text += " bias(%s : %s)" % (b, b_t)
    if p["tied"]:
        text += " {tied}"
    w.emit(text + " : %s, %s -> tensor<?x?x%dxf32>" % (x_t, head_t, V))
    w.emit("return %s : tensor<?x?x%dxf32>" % (logits, V))
    return "\n".join([header] + w.lines + ["}"]) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--splat", action="store_true")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    text = "// Generated by make_program.py --preset %s\n" % args.preset
    text += build(PRESETS[args.preset], rng, args.splat)
    with open(args.output, "w") as out:
        out.write(text)


if __name__ == "__main__":
    main()
