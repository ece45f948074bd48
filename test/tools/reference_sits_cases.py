"""Random cases for the sits ops, with numpy (float64) references.

Each generator takes a numpy Generator and a float element type (f32, f16 or
bf16) and returns a Case. The references follow the op descriptions in
dialects/sits/SitsOps.td, written independently of the C++ executor: matrix
forms instead of loops, boolean visibility matrices for attention.
"""

import math

import numpy as np

from reference_common import (Case, Expected, dense_literal, f32_literal,
                               float_expected, storage, tensor_type, to_dtype)

# (heads, kv_heads) pairs: MHA, GQA with several ratios, MQA.
HEAD_PAIRS = [(4, 4), (4, 2), (4, 1), (6, 3), (6, 2), (8, 2), (3, 1), (2, 2)]


def dyn(rng, rank, probability=0.3):
    """A random set of dims to declare dynamic (?)."""
    return {i for i in range(rank) if rng.random() < probability}


def rand(rng, shape, dtype, scale=1.0):
    """Random float data, already representable in `dtype`, as float64."""
    return to_dtype(rng.standard_normal(shape) * scale, dtype).astype(
        np.float64)


def function(args, results, body):
    """func.func @main(args) -> results { body; return }."""
    arg_text = ", ".join("%%a%d: %s" % (i, t) for i, (_, t) in enumerate(args))
    result_types = ", ".join(t for _, t in results)
    names = ", ".join(n for n, _ in results)
    lines = ["func.func @main(%s) -> (%s) {" % (arg_text, result_types)]
    lines += ["  " + line for line in body]
    lines.append("  return %s : %s" % (names, result_types))
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Embedding, norms, projections
# ---------------------------------------------------------------------------

def case_embedding(rng, dtype):
    vocab, hidden = int(rng.integers(3, 40)), int(rng.integers(1, 17))
    ids_shape = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(1, 4)))]
    id_type = str(rng.choice(["i64", "i32"]))
    scale = float(np.float32(rng.choice([1.0, math.sqrt(hidden), 0.37])))
    table = rand(rng, (vocab, hidden), dtype)
    ids = rng.integers(0, vocab, ids_shape)
    expected = table[ids] * scale
    t_table = tensor_type(table.shape, dtype)
    t_ids = tensor_type(ids_shape, id_type, dyn(rng, len(ids_shape)))
    t_out = tensor_type(ids_shape + [hidden], dtype, dyn(rng, len(ids_shape)))
    body = ["%%r = sits.embedding %%a0[%%a1] {scale = %s : f32} : %s, %s -> %s"
            % (f32_literal(scale), t_table, t_ids, t_out)]
    return Case("embedding table=%s ids=%s %s scale=%g" % (table.shape, ids_shape, id_type, scale),
                function([("", t_table), ("", t_ids)], [("%r", t_out)], body),
                [storage(table, dtype), storage(ids, id_type)],
                [float_expected(expected, dtype)])


def case_rms_norm(rng, dtype):
    rank = int(rng.integers(1, 5))
    shape = [int(rng.integers(1, 4)) for _ in range(rank - 1)] + [int(rng.integers(1, 70))]
    epsilon = float(np.float32(rng.choice([1e-6, 1e-5, 0.1])))
    offset = float(rng.choice([0.0, 1.0]))
    x = rand(rng, shape, dtype, scale=float(rng.choice([0.01, 1.0, 30.0])))
    w = rand(rng, shape[-1:], dtype)
    expected = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + epsilon) * (w + offset)
    tx = tensor_type(shape, dtype, dyn(rng, rank))
    tw = tensor_type(shape[-1:], dtype)
    body = ["%%r = sits.rms_norm %%a0, %%a1 {epsilon = %s : f32, weight_offset = %s : f32} : %s, %s -> %s"
            % (f32_literal(epsilon), f32_literal(offset), tx, tw, tx)]
    return Case("rms_norm x=%s eps=%g offset=%g" % (shape, epsilon, offset),
                function([("", tx), ("", tw)], [("%r", tx)], body),
                [storage(x, dtype), storage(w, dtype)],
                [float_expected(expected, dtype, atol=1e-5)])


def case_layer_norm(rng, dtype):
    rank = int(rng.integers(1, 5))
    shape = [int(rng.integers(1, 4)) for _ in range(rank - 1)] + [int(rng.integers(2, 70))]
    epsilon = float(np.float32(rng.choice([1e-5, 1e-3])))
    has_bias = bool(rng.integers(0, 2))
    x = to_dtype(rng.standard_normal(shape) + float(rng.choice([0.0, 3.0])), dtype).astype(np.float64)
    w, b = rand(rng, shape[-1:], dtype), rand(rng, shape[-1:], dtype)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    expected = (x - mean) / np.sqrt(var + epsilon) * w + (b if has_bias else 0.0)
    tx = tensor_type(shape, dtype, dyn(rng, rank))
    tw = tensor_type(shape[-1:], dtype)
    bias = " bias(%%a2 : %s)" % tw if has_bias else ""
    body = ["%%r = sits.layer_norm %%a0, %%a1%s {epsilon = %s : f32} : %s, %s -> %s"
            % (bias, f32_literal(epsilon), tx, tw, tx)]
    args = [("", tx), ("", tw)] + ([("", tw)] if has_bias else [])
    inputs = [storage(x, dtype), storage(w, dtype)] + ([storage(b, dtype)] if has_bias else [])
    return Case("layer_norm x=%s bias=%s" % (shape, has_bias),
                function(args, [("%r", tx)], body), inputs,
                [float_expected(expected, dtype, atol=2e-5)])


def case_projection(rng, dtype, op="linear", large=False):
    if large:
        # Large enough for the executor to split the product over threads.
        lead, k, n = [4, 8], 256, 520
    else:
        lead = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3)))]
        k, n = int(rng.integers(1, 300)), int(rng.integers(1, 70))
    has_bias = bool(rng.integers(0, 2))
    x, w, b = rand(rng, lead + [k], dtype), rand(rng, (n, k), dtype), rand(rng, (n,), dtype)
    expected = x @ w.T + (b if has_bias else 0.0)
    # f32 accumulation: the error grows with the sum of |terms|.
    magnitude = np.abs(x) @ np.abs(w).T
    atol = 1e-6 + 2e-7 * float(magnitude.max(initial=1.0))
    tx = tensor_type(lead + [k], dtype, dyn(rng, len(lead) + 1))
    tw = tensor_type([n, k], dtype)
    tb = tensor_type([n], dtype)
    tr = tensor_type(lead + [n], dtype, dyn(rng, len(lead)))
    bias = " bias(%%a2 : %s)" % tb if has_bias else ""
    tied = " {tied}" if op == "lm_head" and rng.integers(0, 2) else ""
    body = ["%%r = sits.%s %%a0, %%a1%s%s : %s, %s -> %s" % (op, bias, tied, tx, tw, tr)]
    args = [("", tx), ("", tw)] + ([("", tb)] if has_bias else [])
    inputs = [storage(x, dtype), storage(w, dtype)] + ([storage(b, dtype)] if has_bias else [])
    return Case("%s x=%s w=%s bias=%s" % (op, lead + [k], [n, k], has_bias),
                function(args, [("%r", tr)], body), inputs,
                [float_expected(expected, dtype, atol=atol)])


def case_linear(rng, dtype):
    return case_projection(rng, dtype, "linear", large=rng.random() < 0.2)


def case_lm_head(rng, dtype):
    return case_projection(rng, dtype, "lm_head")


# ---------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------

def activation(kind, x):
    if kind == "silu":
        return x / (1.0 + np.exp(-x))
    if kind == "gelu":
        from math import erf
        return 0.5 * x * (1.0 + np.vectorize(erf)(x / math.sqrt(2.0)))
    if kind == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if kind == "relu":
        return np.maximum(x, 0.0)
    if kind == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    raise ValueError(kind)


def random_shape(rng, max_rank=4, max_dim=9):
    return [int(rng.integers(1, max_dim)) for _ in range(int(rng.integers(1, max_rank + 1)))]


def case_add(rng, dtype):
    shape = random_shape(rng)
    a, b = rand(rng, shape, dtype), rand(rng, shape, dtype)
    t = tensor_type(shape, dtype, dyn(rng, len(shape)))
    return Case("add %s" % shape,
                function([("", t), ("", t)], [("%r", t)], ["%%r = sits.add %%a0, %%a1 : %s" % t]),
                [storage(a, dtype), storage(b, dtype)], [float_expected(a + b, dtype)])


ACTIVATIONS = ["silu", "gelu", "gelu_tanh", "relu", "sigmoid"]


def case_activation(rng, dtype):
    shape = random_shape(rng)
    kind = str(rng.choice(ACTIVATIONS))
    x = rand(rng, shape, dtype, scale=3.0)
    t = tensor_type(shape, dtype, dyn(rng, len(shape)))
    return Case("activation %s %s" % (kind, shape),
                function([("", t)], [("%r", t)], ["%%r = sits.activation <%s> %%a0 : %s" % (kind, t)]),
                [storage(x, dtype)], [float_expected(activation(kind, x), dtype)])


def case_glu(rng, dtype):
    shape = random_shape(rng)
    kind = str(rng.choice(ACTIVATIONS))
    gate, up = rand(rng, shape, dtype, scale=3.0), rand(rng, shape, dtype)
    t = tensor_type(shape, dtype, dyn(rng, len(shape)))
    return Case("glu %s %s" % (kind, shape),
                function([("", t), ("", t)], [("%r", t)], ["%%r = sits.glu <%s> %%a0, %%a1 : %s" % (kind, t)]),
                [storage(gate, dtype), storage(up, dtype)],
                [float_expected(activation(kind, gate) * up, dtype)])


# ---------------------------------------------------------------------------
# Heads, positions, RoPE
# ---------------------------------------------------------------------------

def case_heads(rng, dtype):
    batch, seq = int(rng.integers(1, 4)), int(rng.integers(1, 7))
    heads, head_dim = int(rng.integers(1, 6)), int(rng.integers(1, 9))
    x = rand(rng, (batch, seq, heads * head_dim), dtype)
    y = rand(rng, (batch, heads, seq, head_dim), dtype)
    t3 = tensor_type([batch, seq, heads * head_dim], dtype, dyn(rng, 3))
    t4 = tensor_type([batch, heads, seq, head_dim], dtype, dyn(rng, 2) - {1})
    t4in = tensor_type([batch, heads, seq, head_dim], dtype)
    t3out = tensor_type([batch, seq, heads * head_dim], dtype)
    body = ["%%s = sits.split_heads %%a0 {num_heads = %d} : %s -> %s" % (heads, t3, t4),
            "%%m = sits.merge_heads %%a1 : %s -> %s" % (t4in, t3out)]
    split = x.reshape(batch, seq, heads, head_dim).transpose(0, 2, 1, 3)
    merged = y.transpose(0, 2, 1, 3).reshape(batch, seq, heads * head_dim)
    return Case("split/merge heads b=%d s=%d h=%d d=%d" % (batch, seq, heads, head_dim),
                function([("", t3), ("", t4in)], [("%s", t4), ("%m", t3out)], body),
                [storage(x, dtype), storage(y, dtype)],
                [float_expected(split, dtype), float_expected(merged, dtype)])


def case_position_ids(rng, dtype):
    batch, seq = int(rng.integers(1, 5)), int(rng.integers(1, 9))
    id_type = str(rng.choice(["i64", "i32"]))
    has_past = bool(rng.integers(0, 2))
    ids = rng.integers(0, 100, (batch, seq))
    past = rng.integers(0, 50, (batch,))
    t_ids = tensor_type([batch, seq], id_type, dyn(rng, 2))
    t_past = tensor_type([batch], id_type, dyn(rng, 1))
    t_out = tensor_type([batch, seq], id_type, dyn(rng, 2))
    past_text = " past %%a1 : %s" % t_past if has_past else ""
    body = ["%%r = sits.position_ids %%a0%s : %s -> %s" % (past_text, t_ids, t_out)]
    expected = np.arange(seq)[None, :] + (past[:, None] if has_past else np.zeros((batch, 1)))
    args = [("", t_ids)] + ([("", t_past)] if has_past else [])
    inputs = [storage(ids, id_type)] + ([storage(past, id_type)] if has_past else [])
    return Case("position_ids b=%d s=%d past=%s %s" % (batch, seq, has_past, id_type),
                function(args, [("%r", t_out)], body), inputs,
                [Expected(expected.astype(np.int64), id_type)])


def inverse_frequencies(rotary_dim, theta=10000.0):
    return (1.0 / theta ** (np.arange(0, rotary_dim, 2) / rotary_dim)).astype(np.float32)


def case_rope_cos_sin(rng, dtype):
    batch, seq = int(rng.integers(1, 4)), int(rng.integers(1, 9))
    rotary_dim = 2 * int(rng.integers(1, 17))
    scaling = float(np.float32(rng.choice([1.0, 1.3, 0.7])))
    positions = rng.integers(0, 4096, (batch, seq))
    inv_freq = inverse_frequencies(rotary_dim, float(rng.choice([10000.0, 500000.0])))
    # One f32 product, as the op states; cos and sin then in float64.
    angle = (positions.astype(np.float32)[..., None] * inv_freq).astype(np.float64)
    half = rotary_dim // 2
    t_pos = tensor_type([batch, seq], "i64", dyn(rng, 2))
    t_out = tensor_type([batch, seq, half], dtype, dyn(rng, 2))
    body = ["%%c, %%s = sits.rope_cos_sin %%a0 {inv_freq = %s : %s, attention_scaling = %s : f32} : %s -> %s, %s"
            % (dense_literal(inv_freq, "f32"), tensor_type([half], "f32"), f32_literal(scaling), t_pos, t_out, t_out)]
    return Case("rope_cos_sin b=%d s=%d R=%d scaling=%g" % (batch, seq, rotary_dim, scaling),
                function([("", t_pos)], [("%c", t_out), ("%s", t_out)], body),
                [storage(positions, "i64")],
                [float_expected(np.cos(angle) * scaling, dtype, atol=2e-6),
                 float_expected(np.sin(angle) * scaling, dtype, atol=2e-6)])


def case_rope_gather(rng, dtype):
    batch, seq = int(rng.integers(1, 4)), int(rng.integers(1, 9))
    positions_max, half = int(rng.integers(1, 40)), int(rng.integers(1, 9))
    table = rand(rng, (positions_max, 2 * half), dtype)
    positions = rng.integers(0, positions_max, (batch, seq))
    t_table = tensor_type(table.shape, dtype)
    t_pos = tensor_type([batch, seq], "i64", dyn(rng, 2))
    t_out = tensor_type([batch, seq, half], dtype, dyn(rng, 2))
    body = ["%%c, %%s = sits.rope_gather %%a0[%%a1] : %s, %s -> %s, %s" % (t_table, t_pos, t_out, t_out)]
    return Case("rope_gather table=%s pos=%s" % (table.shape, positions.shape),
                function([("", t_table), ("", t_pos)], [("%c", t_out), ("%s", t_out)], body),
                [storage(table, dtype), storage(positions, "i64")],
                [float_expected(table[positions][..., :half], dtype),
                 float_expected(table[positions][..., half:], dtype)])


def rope_reference(x, cos, sin, style, rotary_dim):
    """x [b, h, s, d], cos/sin [b or 1, s, R/2]."""
    half = rotary_dim // 2
    c, n = cos[:, None], sin[:, None]
    y = x.copy()
    if style == "rotate_half":
        first, second = x[..., :half], x[..., half:rotary_dim]
        y[..., :half] = first * c - second * n
        y[..., half:rotary_dim] = second * c + first * n
    else:
        even, odd = x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]
        y[..., 0:rotary_dim:2] = even * c - odd * n
        y[..., 1:rotary_dim:2] = odd * c + even * n
    return y


def case_rope(rng, dtype):
    batch, heads, seq = int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 7))
    head_dim = 2 * int(rng.integers(1, 9)) + int(rng.integers(0, 2))
    rotary_dim = 2 * int(rng.integers(1, head_dim // 2 + 1))
    style = str(rng.choice(["rotate_half", "interleaved"]))
    cos_batch = int(rng.choice([1, batch]))
    x = rand(rng, (batch, heads, seq, head_dim), dtype)
    angle = rng.uniform(-7, 7, (cos_batch, seq, rotary_dim // 2))
    cos, sin = to_dtype(np.cos(angle), dtype).astype(np.float64), to_dtype(np.sin(angle), dtype).astype(np.float64)
    tx = tensor_type(x.shape, dtype, dyn(rng, 4) - {3})
    tc = tensor_type(cos.shape, dtype, dyn(rng, 3) - {0, 2})
    body = ["%%r = sits.rope %%a0, %%a1, %%a2 {style = #sits.rope_style<%s>, rotary_dim = %d} : %s, %s, %s -> %s"
            % (style, rotary_dim, tx, tc, tc, tx)]
    return Case("rope %s x=%s R=%d cos_batch=%d" % (style, x.shape, rotary_dim, cos_batch),
                function([("", tx), ("", tc), ("", tc)], [("%r", tx)], body),
                [storage(x, dtype), storage(cos, dtype), storage(sin, dtype)],
                [float_expected(rope_reference(x, cos, sin, style, rotary_dim), dtype)])


# ---------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------

def attention_reference(q, k, v, scale, causal="none", window=None, softcap=None,
                        mask=None, past_len=None):
    """Scaled dot-product attention exactly as sits.attention describes it."""
    batch, heads, seq_q, _ = q.shape
    kv_heads, seq_k = k.shape[1], k.shape[2]
    group = heads // kv_heads
    k = np.repeat(np.nan_to_num(k), group, axis=1)
    v = np.repeat(np.nan_to_num(v), group, axis=1)
    i = np.arange(seq_q)[:, None]
    j = np.arange(seq_k)[None, :]
    visible = np.zeros((batch, heads, seq_q, seq_k), dtype=bool)
    for b in range(batch):
        offset = int(past_len[b]) if past_len is not None else seq_k - seq_q
        rule = j < offset + seq_q
        if causal == "bottom_right":
            rule = rule & (j <= i + offset)
        elif causal == "top_left":
            rule = rule & (j <= i)
        if window is not None:
            rule = rule & (j > i + offset - window)
        visible[b] = rule
    scores = scale * np.einsum("bhqd,bhkd->bhqk", q, k)
    if softcap is not None:
        scores = softcap * np.tanh(scores / softcap)
    if mask is not None:
        full = np.broadcast_to(mask, visible.shape)
        if mask.dtype == bool:
            visible = visible & full
        else:
            scores = scores + full
    scores = np.where(visible, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    empty = ~np.isfinite(top)
    weights = np.exp(scores - np.where(empty, 0.0, top))
    weights = weights / np.where(empty, 1.0, weights.sum(axis=-1, keepdims=True))
    weights = np.where(empty, 0.0, weights)
    return weights @ v


def case_attention(rng, dtype):
    heads, kv_heads = HEAD_PAIRS[int(rng.integers(0, len(HEAD_PAIRS)))]
    batch = int(rng.integers(1, 4))
    head_dim = int(rng.choice([1, 4, 6, 8, 16]))
    value_dim = int(rng.choice([head_dim, head_dim, 5]))
    seq_q = int(rng.integers(1, 7))
    causal = str(rng.choice(["none", "top_left", "bottom_right"]))
    use_past = rng.random() < 0.4
    if use_past:
        past = rng.integers(0, 6, (batch,))
        seq_k = int(past.max()) + seq_q + int(rng.integers(0, 4))
    else:
        past = None
        seq_k = max(1, seq_q + int(rng.integers(-1, 6)))
    window = int(rng.integers(1, 6)) if rng.random() < 0.3 else None
    softcap = float(np.float32(rng.choice([5.0, 30.0]))) if rng.random() < 0.3 else None
    scale = float(np.float32(1.0 / math.sqrt(head_dim) if rng.random() < 0.7 else rng.uniform(0.05, 1.0)))

    q = rand(rng, (batch, heads, seq_q, head_dim), dtype)
    k = rand(rng, (batch, kv_heads, seq_k, head_dim), dtype)
    v = rand(rng, (batch, kv_heads, seq_k, value_dim), dtype)
    if use_past:
        # Rows past the bound hold no token: NaN catches a read of them.
        for b in range(batch):
            k[b, :, int(past[b]) + seq_q:] = np.nan
            v[b, :, int(past[b]) + seq_q:] = np.nan

    mask = None
    mask_kind = str(rng.choice(["none", "bool", "float"]))
    full_shape = [batch, heads, seq_q, seq_k]
    if mask_kind != "none":
        rank = int(rng.integers(0, 5))
        shape = [d if rng.random() < 0.6 else 1 for d in full_shape[4 - rank:]]
        if mask_kind == "bool":
            mask = rng.random(shape) < 0.75
        else:
            mask = to_dtype(rng.standard_normal(shape), dtype).astype(np.float64)
            mask = np.where(rng.random(shape) < 0.15, -np.inf, mask)
    expected = attention_reference(q, k, v, scale, causal, window, softcap, mask, past)

    tq = tensor_type(q.shape, dtype, dyn(rng, 4) - {1})
    tk = tensor_type(k.shape, dtype, dyn(rng, 4) - {1})
    tv = tensor_type(v.shape, dtype, dyn(rng, 4) - {1})
    tr = tensor_type(expected.shape, dtype, dyn(rng, 4) - {1})
    args = [("", tq), ("", tk), ("", tv)]
    inputs = [storage(q, dtype), storage(k, dtype), storage(v, dtype)]
    operands = ""
    if mask is not None:
        element = "i1" if mask.dtype == bool else dtype
        tm = tensor_type(mask.shape, element)
        operands += " mask(%%a%d : %s)" % (len(args), tm)
        args.append(("", tm))
        inputs.append(storage(mask, element))
    if use_past:
        tp = tensor_type([batch], "i64", dyn(rng, 1))
        operands += " past_len(%%a%d : %s)" % (len(args), tp)
        args.append(("", tp))
        inputs.append(storage(past, "i64"))
    attributes = ["num_heads = %d" % heads, "num_kv_heads = %d" % kv_heads,
                  "scale = %s : f32" % f32_literal(scale),
                  "causal = #sits.causal<%s>" % causal]
    if window is not None:
        attributes.append("window = %d" % window)
    if softcap is not None:
        attributes.append("softcap = %s : f32" % f32_literal(softcap))
    body = ["%%r = sits.attention %%a0, %%a1, %%a2%s {%s} : %s, %s, %s -> %s"
            % (operands, ", ".join(attributes), tq, tk, tv, tr)]
    name = ("attention b=%d h=%d/%d sq=%d sk=%d d=%d dv=%d causal=%s past=%s window=%s "
            "softcap=%s mask=%s%s") % (
        batch, heads, kv_heads, seq_q, seq_k, head_dim, value_dim, causal,
        None if past is None else list(past), window, softcap, mask_kind,
        "" if mask is None else list(mask.shape))
    return Case(name, function(args, [("%r", tr)], body), inputs,
                [float_expected(expected, dtype, atol=2e-6)])


# ---------------------------------------------------------------------------
# KV cache
# ---------------------------------------------------------------------------

def case_kv_cache(rng, dtype):
    """Prefill then one decode step through a cache, attending with
    past_len: the attention over the cache must equal full attention over
    the concatenated keys, the lengths must count the tokens, and rows past
    the lengths must read as NaN."""
    heads, kv_heads = HEAD_PAIRS[int(rng.integers(0, len(HEAD_PAIRS)))]
    layers, batch = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    max_batch = batch + int(rng.integers(0, 2))
    head_dim, prefill = int(rng.choice([2, 4, 8])), int(rng.integers(1, 6))
    capacity = prefill + 1 + int(rng.integers(0, 5))
    layer = layers - 1
    kv = ("!sits.kv_cache<layers = %d, max_batch = %d, kv_heads = %d, capacity = %d, "
          "head_dim = %d, element_type = %s, layout = #sits.kv_layout<contiguous>>") % (
              layers, max_batch, kv_heads, capacity, head_dim, dtype)
    k0 = rand(rng, (batch, kv_heads, prefill, head_dim), dtype)
    v0 = rand(rng, (batch, kv_heads, prefill, head_dim), dtype)
    k1 = rand(rng, (batch, kv_heads, 1, head_dim), dtype)
    v1 = rand(rng, (batch, kv_heads, 1, head_dim), dtype)
    other = rand(rng, (batch, kv_heads, prefill, head_dim), dtype)
    q = rand(rng, (batch, heads, 1, head_dim), dtype)
    ids0 = rng.integers(0, 9, (batch, prefill))
    ids1 = rng.integers(0, 9, (batch, 1))
    scale = float(np.float32(1.0 / math.sqrt(head_dim)))

    t = lambda shape, d=(): tensor_type(shape, dtype, d)
    tk0, tk1 = t(k0.shape, {0, 2}), t(k1.shape, {0})
    tq, tread = t(q.shape, {0}), t([batch, kv_heads, capacity, head_dim], {0})
    tlen = tensor_type([batch], "i64", {0})
    tids0, tids1 = tensor_type(ids0.shape, "i64", {0, 1}), tensor_type(ids1.shape, "i64", {0})
    body = [
        "%%c0 = sits.kv_cache.init : %s" % kv,
        "%%p0 = sits.kv_cache.length %%c0 : %s -> %s" % (kv, tlen),
    ]
    state = "%c0"
    if layers > 1:
        # Another layer written with other data must not leak into `layer`.
        body.append("%%cx = sits.kv_cache.append %%c0[0], %%a7, %%a7 at %%p0 : %s, %s, %s, %s" % (kv, tk0, tk0, tlen))
        state = "%cx"
    body += [
        "%%c1 = sits.kv_cache.append %s[%d], %%a0, %%a1 at %%p0 : %s, %s, %s, %s" % (state, layer, kv, tk0, tk0, tlen),
        "%%c2 = sits.kv_cache.advance %%c1 by %%a4 : %s, %s" % (kv, tids0),
        "%%p1 = sits.kv_cache.length %%c2 : %s -> %s" % (kv, tlen),
        "%%c3 = sits.kv_cache.append %%c2[%d], %%a2, %%a3 at %%p1 : %s, %s, %s, %s" % (layer, kv, tk1, tk1, tlen),
        "%%k, %%v = sits.kv_cache.read %%c3[%d] : %s -> %s, %s" % (layer, kv, tread, tread),
        "%%att = sits.attention %%a6, %%k, %%v past_len(%%p1 : %s) {num_heads = %d, num_kv_heads = %d, scale = %s : f32, causal = #sits.causal<bottom_right>} : %s, %s, %s -> %s"
        % (tlen, heads, kv_heads, f32_literal(scale), tq, tread, tread, tq),
        "%%c4 = sits.kv_cache.advance %%c3 by %%a5 : %s, %s" % (kv, tids1),
        "%%len = sits.kv_cache.length %%c4 : %s -> %s" % (kv, tlen),
    ]
    args = [("", tk0), ("", tk0), ("", tk1), ("", tk1), ("", tids0), ("", tids1), ("", tq), ("", tk0)]
    keys = np.concatenate([k0, k1], axis=2)
    values = np.concatenate([v0, v1], axis=2)
    expected_att = attention_reference(q, keys, values, scale, "bottom_right", past_len=np.full(batch, prefill))
    read = np.full((batch, kv_heads, capacity, head_dim), np.nan)
    read[:, :, :prefill + 1] = keys
    return Case("kv_cache layers=%d batch=%d/%d h=%d/%d capacity=%d prefill=%d %s"
                % (layers, batch, max_batch, heads, kv_heads, capacity, prefill, dtype),
                function(args, [("%len", tlen), ("%k", tread), ("%att", tq)], body),
                [storage(k0, dtype), storage(v0, dtype), storage(k1, dtype), storage(v1, dtype),
                 storage(ids0, "i64"), storage(ids1, "i64"), storage(q, dtype), storage(other, dtype)],
                [Expected(np.full(batch, prefill + 1, dtype=np.int64), "i64"),
                 float_expected(read, dtype), float_expected(expected_att, dtype, atol=2e-6)])


# ---------------------------------------------------------------------------
# Constants and a whole decoder layer
# ---------------------------------------------------------------------------

def case_constants(rng, dtype):
    """sits.weight and arith.constant (dense, splat, resource blob) feeding
    a linear layer."""
    k, n = int(rng.integers(1, 9)), int(rng.integers(1, 7))
    x = rand(rng, (2, k), dtype)
    w = rand(rng, (n, k), dtype)
    bias_value = float(to_dtype(rng.standard_normal(), dtype))
    tw, tb, tx = tensor_type([n, k], dtype), tensor_type([n], dtype), tensor_type([2, k], dtype)
    tr = tensor_type([2, n], dtype)
    form = str(rng.choice(["weight", "constant", "resource"]))
    blob = ""
    if form == "weight":
        define_w = '%%w = sits.weight "layer.weight" %s : %s' % (dense_literal(w, dtype), tw)
    elif form == "constant":
        define_w = "%%w = arith.constant %s : %s" % (dense_literal(w, dtype), tw)
    else:
        raw = storage(w, dtype)
        if dtype == "bf16":
            raw = (raw.view(np.uint32) >> 16).astype(np.uint16)
        # A resource blob: 4-byte alignment, then the little-endian data.
        hexdata = (np.uint32(8).tobytes() + raw.tobytes()).hex().upper()
        define_w = '%%w = sits.weight "layer.weight" dense_resource<w_blob> : %s' % tw
        blob = '\n{-#\n  dialect_resources: {\n    builtin: {\n      w_blob: "0x%s"\n    }\n  }\n#-}\n' % hexdata
    body = [define_w,
            "%%b = arith.constant dense<%s> : %s" % (f32_literal(bias_value), tb),
            "%%r = sits.linear %%a0, %%w bias(%%b : %s) : %s, %s -> %s" % (tb, tx, tw, tr)]
    return Case("constants %s w=%s" % (form, w.shape),
                function([("", tx)], [("%r", tr)], body) + blob,
                [storage(x, dtype)], [float_expected(x @ w.T + bias_value, dtype)])


def case_decoder_layer(rng, dtype):
    """A Llama-style layer and LM head in sits ops (GQA, partial RoPE,
    SwiGLU, tied head) against a numpy forward pass."""
    heads, kv_heads = HEAD_PAIRS[int(rng.integers(0, len(HEAD_PAIRS)))]
    head_dim = int(rng.choice([4, 8]))
    hidden, inter, vocab = heads * head_dim, int(rng.integers(8, 40)), int(rng.integers(8, 50))
    batch, seq = int(rng.integers(1, 4)), int(rng.integers(1, 8))
    rotary_dim = 2 * int(rng.integers(1, head_dim // 2 + 1))
    eps = float(np.float32(1e-6))
    w = lambda *shape: rand(rng, shape, dtype, scale=0.3)
    table, norm1, norm2 = w(vocab, hidden), w(hidden) + 1, w(hidden) + 1
    wq, wk, wv, wo = w(hidden, hidden), w(kv_heads * head_dim, hidden), w(kv_heads * head_dim, hidden), w(hidden, hidden)
    wg, wu, wd = w(inter, hidden), w(inter, hidden), w(hidden, inter)
    ids = rng.integers(0, vocab, (batch, seq))
    inv_freq = inverse_frequencies(rotary_dim)

    # Every op rounds its result to the element type: so does the reference.
    R = lambda t: to_dtype(t, dtype).astype(np.float64)

    def rms(x, weight):
        return R(x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * weight)

    x = R(table[ids])
    h = rms(x, norm1)
    split = lambda t, n: t.reshape(batch, seq, n, head_dim).transpose(0, 2, 1, 3)
    q, k, v = split(R(h @ wq.T), heads), split(R(h @ wk.T), kv_heads), split(R(h @ wv.T), kv_heads)
    angle = (np.arange(seq, dtype=np.float32)[None, :, None] * inv_freq).astype(np.float64)
    cos, sin = R(np.cos(angle)), R(np.sin(angle))
    q = R(rope_reference(q, cos, sin, "rotate_half", rotary_dim))
    k = R(rope_reference(k, cos, sin, "rotate_half", rotary_dim))
    scale = float(np.float32(1 / math.sqrt(head_dim)))
    a = R(attention_reference(q, k, v, scale, "bottom_right"))
    x = R(x + R(a.transpose(0, 2, 1, 3).reshape(batch, seq, hidden) @ wo.T))
    h = rms(x, norm2)
    x = R(x + R(R(activation("silu", R(h @ wg.T)) * R(h @ wu.T)) @ wd.T))
    logits = x @ table.T

    T = lambda *shape: tensor_type(list(shape), dtype)
    kvw = kv_heads * head_dim
    weights = [("table", table), ("norm1", norm1), ("norm2", norm2), ("wq", wq), ("wk", wk),
               ("wv", wv), ("wo", wo), ("wg", wg), ("wu", wu), ("wd", wd)]
    args = [("", tensor_type([batch, seq], "i64", {0, 1}))] + [("", T(*value.shape)) for _, value in weights]
    a_ = {name: "%%a%d" % (i + 1) for i, (name, _) in enumerate(weights)}
    X = "tensor<?x?x%dx%s>" % (hidden, dtype)
    act = lambda n: "tensor<?x?x%dx%s>" % (n, dtype)
    head4 = lambda n: "tensor<?x%dx?x%dx%s>" % (n, head_dim, dtype)
    cs = "tensor<?x?x%dx%s>" % (rotary_dim // 2, dtype)
    body = [
        "%%x = sits.embedding %s[%%a0] : %s, tensor<?x?xi64> -> %s" % (a_["table"], T(vocab, hidden), X),
        "%pos = sits.position_ids %a0 : tensor<?x?xi64> -> tensor<?x?xi64>",
        "%%cos, %%sin = sits.rope_cos_sin %%pos {inv_freq = %s : %s} : tensor<?x?xi64> -> %s, %s"
        % (dense_literal(inv_freq, "f32"), tensor_type([rotary_dim // 2], "f32"), cs, cs),
        "%%h = sits.rms_norm %%x, %s {epsilon = %s : f32} : %s, %s -> %s" % (a_["norm1"], f32_literal(eps), X, T(hidden), X),
        "%%q = sits.linear %%h, %s : %s, %s -> %s" % (a_["wq"], X, T(hidden, hidden), X),
        "%%k = sits.linear %%h, %s : %s, %s -> %s" % (a_["wk"], X, T(kvw, hidden), act(kvw)),
        "%%v = sits.linear %%h, %s : %s, %s -> %s" % (a_["wv"], X, T(kvw, hidden), act(kvw)),
        "%%qh = sits.split_heads %%q {num_heads = %d} : %s -> %s" % (heads, X, head4(heads)),
        "%%kh = sits.split_heads %%k {num_heads = %d} : %s -> %s" % (kv_heads, act(kvw), head4(kv_heads)),
        "%%vh = sits.split_heads %%v {num_heads = %d} : %s -> %s" % (kv_heads, act(kvw), head4(kv_heads)),
        "%%qr = sits.rope %%qh, %%cos, %%sin {style = #sits.rope_style<rotate_half>, rotary_dim = %d} : %s, %s, %s -> %s"
        % (rotary_dim, head4(heads), cs, cs, head4(heads)),
        "%%kr = sits.rope %%kh, %%cos, %%sin {style = #sits.rope_style<rotate_half>, rotary_dim = %d} : %s, %s, %s -> %s"
        % (rotary_dim, head4(kv_heads), cs, cs, head4(kv_heads)),
        "%%att = sits.attention %%qr, %%kr, %%vh {num_heads = %d, num_kv_heads = %d, scale = %s : f32, causal = #sits.causal<bottom_right>} : %s, %s, %s -> %s"
        % (heads, kv_heads, f32_literal(scale), head4(heads), head4(kv_heads), head4(kv_heads), head4(heads)),
        "%%m = sits.merge_heads %%att : %s -> %s" % (head4(heads), X),
        "%%o = sits.linear %%m, %s : %s, %s -> %s" % (a_["wo"], X, T(hidden, hidden), X),
        "%%x1 = sits.add %%x, %%o : %s" % X,
        "%%h1 = sits.rms_norm %%x1, %s {epsilon = %s : f32} : %s, %s -> %s" % (a_["norm2"], f32_literal(eps), X, T(hidden), X),
        "%%g = sits.linear %%h1, %s : %s, %s -> %s" % (a_["wg"], X, T(inter, hidden), act(inter)),
        "%%u = sits.linear %%h1, %s : %s, %s -> %s" % (a_["wu"], X, T(inter, hidden), act(inter)),
        "%%gu = sits.glu <silu> %%g, %%u : %s" % act(inter),
        "%%d = sits.linear %%gu, %s : %s, %s -> %s" % (a_["wd"], act(inter), T(hidden, inter), X),
        "%%x2 = sits.add %%x1, %%d : %s" % X,
        "%%logits = sits.lm_head %%x2, %s {tied} : %s, %s -> %s" % (a_["table"], X, T(vocab, hidden), act(vocab)),
    ]
    # f16/bf16: an intermediate that rounds the other way (f32 inside an op
    # versus float64 here) moves later results by about one unit in the last
    # place; allow a few, relative to the logits' scale.
    epsilon = {"f32": 1e-5, "f16": 2.0 ** -10, "bf16": 2.0 ** -7}[dtype]
    scale_of_logits = float(np.abs(logits).max(initial=1.0))
    expected = float_expected(logits, dtype, rtol=4 * epsilon,
                              atol=4 * epsilon * scale_of_logits)
    return Case("decoder layer b=%d s=%d h=%d/%d d=%d R=%d vocab=%d %s"
                % (batch, seq, heads, kv_heads, head_dim, rotary_dim, vocab, dtype),
                function(args, [("%logits", act(vocab))], body),
                [storage(ids, "i64")] + [storage(value, dtype) for _, value in weights],
                [expected])


FAMILIES = {
    "embedding": case_embedding,
    "rms_norm": case_rms_norm,
    "layer_norm": case_layer_norm,
    "linear": case_linear,
    "lm_head": case_lm_head,
    "add": case_add,
    "activation": case_activation,
    "glu": case_glu,
    "heads": case_heads,
    "position_ids": case_position_ids,
    "rope_cos_sin": case_rope_cos_sin,
    "rope_gather": case_rope_gather,
    "rope": case_rope,
    "attention": case_attention,
    "kv_cache": case_kv_cache,
    "constants": case_constants,
    "decoder_layer": case_decoder_layer,
}
