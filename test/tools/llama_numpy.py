"""An independent numpy forward of the shared Llama exports, with the KV-cache
and weight quantization schemes of docs/quantization.md.

It reads the weights straight from the ONNX file (the exporter's MatMul
initializers, in graph order: q, k, v, o, gate, up, down per layer, then the
LM head), so it shares no code with the compiler or the reference executor.
Two uses:

* cross-checking the reference executor: `sitsc --reference-perplexity` with
  `--weights`/`--kv-cache` must give the NLL this script gives for the same
  scheme (test/compiler/sitsc/quant-crosscheck.test);
* measuring schemes the compiler does not implement, such as KIVI's
  per-channel key groups (`--key-groups channel`), against per-token groups.

    python3 llama_numpy.py MODEL.onnx --text FILE [--tokenizer tokenizer.json]
        [--window 2048] [--max-tokens N] [--kv-cache int4] [--hot-window 512]
        [--key-groups token|channel] [--weights int8|int4] [--weight-group 128]

prints one JSON object: tokens predicted, mean NLL, perplexity.
"""

import argparse
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def load_llama(path):
    model = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    linears = []
    embedding = None
    for node in model.graph.node:
        if node.op_type == "MatMul":
            ws = [x for x in node.input if x in inits and inits[x].ndim == 2]
            if ws:
                linears.append(inits[ws[0]].astype(np.float32))
        if node.op_type == "Gather" and node.input[0] in inits:
            embedding = inits[node.input[0]].astype(np.float32)
    inv_freq = [v for v in inits.values() if v.ndim == 3 and v.shape[0] == 1
                and v.shape[2] == 1 and v.dtype == np.float32]
    if embedding is None or len(inv_freq) != 1 or (len(linears) - 1) % 7:
        raise SystemExit("llama_numpy: %s is not a Llama export this script "
                         "understands" % path)
    layers = (len(linears) - 1) // 7
    norms = {}
    for name, value in inits.items():
        if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
            norms[name] = value.astype(np.float32)
    final_norm = [v for k, v in norms.items() if k.endswith("model.norm.weight")]
    hidden = embedding.shape[1]
    head_dim = 2 * inv_freq[0].shape[1]
    kv_width = linears[1].shape[1]
    return {
        "embedding": embedding,
        "layers": [
            {
                "q": linears[7 * i], "k": linears[7 * i + 1],
                "v": linears[7 * i + 2], "o": linears[7 * i + 3],
                "gate": linears[7 * i + 4], "up": linears[7 * i + 5],
                "down": linears[7 * i + 6],
                "ln1": next(v for k, v in norms.items()
                            if k.endswith("layers.%d.input_layernorm.weight" % i)),
                "ln2": next(v for k, v in norms.items() if k.endswith(
                    "layers.%d.post_attention_layernorm.weight" % i)),
            } for i in range(layers)
        ],
        "final_norm": final_norm[0],
        "lm_head": linears[-1],
        "inv_freq": inv_freq[0].reshape(-1),
        "head_dim": head_dim,
        "heads": hidden // head_dim,
        "kv_heads": kv_width // head_dim,
    }


def round_f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def quantize_groups(x, bits, axis, group, scale_f16=True):
    """Symmetric absmax quantization in groups of `group` consecutive elements
    along `axis` (the last group may be shorter); returns the dequantized
    values (what a consumer reads), computed as docs/quantization.md states."""
    qmax = 127.0 if bits == 8 else 7.0
    x = np.moveaxis(np.asarray(x, dtype=np.float32), axis, -1)
    out = np.empty_like(x)
    length = x.shape[-1]
    for start in range(0, length, group):
        part = x[..., start:start + group]
        amax = np.max(np.abs(part), axis=-1, keepdims=True)
        scale = (amax / np.float32(qmax)).astype(np.float32)
        if scale_f16:
            scale = np.minimum(round_f16(scale), np.float32(65504.0))
        safe = np.where(scale > 0, scale, np.float32(1.0))
        q = np.clip(np.rint(part / safe), -qmax, qmax)
        q = np.where(scale > 0, q, 0.0)
        out[..., start:start + group] = (q * scale).astype(np.float32)
    return np.moveaxis(out, -1, axis)


def quantize_weight(w_in_out, bits, group):
    """A MatMul weight [in, out]: groups run along `in` for each output."""
    return quantize_groups(w_in_out, bits, 0, group)


def rms_norm(x, w, eps=1e-6):
    ms = np.mean(x.astype(np.float32) ** 2, axis=-1, keepdims=True)
    return (x / np.sqrt(ms + np.float32(eps)) * w).astype(np.float32)


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def cold_mask(seq, hot_window, key_groups, block):
    """[seq_q, seq_k]: True where query p reads key j from the cold part."""
    p = np.arange(seq)[:, None]
    j = np.arange(seq)[None, :]
    if key_groups == "channel":
        last_of_block = (j // block) * block + block - 1
        return p - last_of_block >= hot_window
    return p - j >= hot_window


def forward_nll(m, ids, args):
    seq = len(ids)
    x = m["embedding"][ids]
    hd, heads, kvh = m["head_dim"], m["heads"], m["kv_heads"]
    angle = np.arange(seq, dtype=np.float32)[:, None] * m["inv_freq"][None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    causal = np.tril(np.ones((seq, seq), dtype=bool))
    quant_kv = args.kv_cache in ("int8", "int4")
    bits_kv = 8 if args.kv_cache == "int8" else 4
    cold_keys = cold_mask(seq, args.hot_window, args.key_groups,
                          args.channel_block)
    cold_values = cold_mask(seq, args.hot_window, "token", 1)
    for layer in m["layers"]:
        h = rms_norm(x, layer["ln1"])
        q = (h @ layer["q"]).reshape(seq, heads, hd).transpose(1, 0, 2)
        k = (h @ layer["k"]).reshape(seq, kvh, hd).transpose(1, 0, 2)
        v = (h @ layer["v"]).reshape(seq, kvh, hd).transpose(1, 0, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        out = np.empty_like(q)
        if quant_kv:
            # The cold part quantizes what the hot part stores (FP16).
            k_hot, v_hot = round_f16(k), round_f16(v)
            group = min(64, hd)
            if args.key_groups == "channel":
                k_cold = quantize_groups(k_hot, bits_kv, 1, args.channel_block)
            else:
                k_cold = quantize_groups(k_hot, bits_kv, 2, group)
            v_cold = quantize_groups(v_hot, bits_kv, 2, group)
        for head in range(heads):
            g = head // (heads // kvh)
            scale = np.float32(1.0 / np.sqrt(hd))
            if quant_kv:
                s = np.where(cold_keys, q[head] @ k_cold[g].T,
                             q[head] @ k_hot[g].T)
            else:
                s = q[head] @ k[g].T
            s = np.where(causal, s * scale, -np.inf)
            s = s - s.max(axis=-1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=-1, keepdims=True)
            if quant_kv:
                out[head] = (np.where(cold_values, p, 0) @ v_cold[g] +
                             np.where(cold_values, 0, p) @ v_hot[g])
            else:
                out[head] = p @ v[g]
        attn = out.transpose(1, 0, 2).reshape(seq, heads * hd)
        x = x + attn @ layer["o"]
        h = rms_norm(x, layer["ln2"])
        gate = h @ layer["gate"]
        x = x + ((gate / (1 + np.exp(-gate))) * (h @ layer["up"])) @ layer["down"]
    logits = (rms_norm(x, m["final_norm"]) @ m["lm_head"]).astype(np.float64)
    top = logits.max(axis=-1, keepdims=True)
    logz = np.log(np.exp(logits - top).sum(axis=-1)) + top[:, 0]
    targets = np.asarray(ids[1:])
    return float(np.sum(logz[:-1] - logits[np.arange(seq - 1), targets]))


def read_ids(args):
    raw = open(args.text, "rb").read()
    if args.tokenizer:
        from tokenizers import Tokenizer
        return Tokenizer.from_file(args.tokenizer).encode(
            raw.decode("utf-8")).ids
    return list(raw)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--text", required=True)
    parser.add_argument("--tokenizer")
    parser.add_argument("--window", type=int, default=2048)
    parser.add_argument("--max-tokens", type=int, default=0)
    parser.add_argument("--kv-cache", default="fp32",
                        choices=["fp32", "int8", "int4"])
    parser.add_argument("--hot-window", type=int, default=512)
    parser.add_argument("--key-groups", default="token",
                        choices=["token", "channel"])
    parser.add_argument("--channel-block", type=int, default=64)
    parser.add_argument("--weights", default="fp32",
                        choices=["fp32", "int8", "int4"])
    parser.add_argument("--weight-group", type=int, default=128)
    args = parser.parse_args()

    m = load_llama(args.model)
    if args.weights != "fp32":
        bits = 8 if args.weights == "int8" else 4
        for layer in m["layers"]:
            for name in ("q", "k", "v", "o", "gate", "up", "down"):
                layer[name] = quantize_weight(layer[name], bits,
                                              args.weight_group)
        m["lm_head"] = quantize_weight(m["lm_head"], bits, args.weight_group)
    ids = read_ids(args)
    if args.max_tokens:
        ids = ids[:args.max_tokens]
    total, count = 0.0, 0
    for start in range(0, len(ids) - 1, args.window):
        chunk = ids[start:start + args.window]
        if len(chunk) < 2:
            break
        total += forward_nll(m, chunk, args)
        count += len(chunk) - 1
    json.dump({"tokens": count, "mean_nll": total / count,
               "perplexity": float(np.exp(total / count))}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
