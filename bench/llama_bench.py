#!/usr/bin/env python3
"""The PyTorch half of bench/run.sh, for one Llama-shaped model.

  llama_bench.py --shape tinyllama|llama3-8b --work DIR --json FILE
                 [--contexts 32,128,2048,8192] [--batches 1,4,8]
                 [--new-tokens 128] [--deadline EPOCH] [--sitsc SITSC ...]

In one process, so that the model is made once:
  1. the model: LlamaForCausalLM(LlamaConfig(shape)) with random weights
     (seeded), in fp16 on the GPU;
  2. the ONNX export: torch.onnx.export(..., dynamo=True), opset 20, the
     graph computed in float32 (the weights hold fp16 values; or the fp16
     graph with --export-dtype fp16), external data; this is the exporter
     of the shared test models, whose graphs the raising recognizes. By
     default torch exports a two-layer twin of the model and
     bench/onnx_graft.py grows it to the model's layers with the model's
     weights (export_by_layers; --export-method dynamo exports the model
     itself, minutes for billions of weights). The export is timed;
  3. if --sitsc is given, sitsc compiles it in the background (timed) while
  4. the references run: a gpt-fast style decoder on the same weights
     (static KV cache, precomputed RoPE, fused QKV and gate/up weights,
     torch.compile(mode="reduce-overhead") of the decode step) and Hugging
     Face `generate` in eager mode; plus the device-to-device copy bandwidth.
Every phase is timed and its errors are recorded, not fatal: the JSON always
gets written. Phases are skipped once the deadline is near.
"""

import argparse
import copy
import json
import os
import subprocess
import sys
import threading
import time
import traceback

SHAPES = {
    "tinyllama": dict(vocab_size=32000, hidden_size=2048,
                      intermediate_size=5632, num_hidden_layers=22,
                      num_attention_heads=32, num_key_value_heads=4,
                      rope_theta=10000.0),
    "llama3-8b": dict(vocab_size=128256, hidden_size=4096,
                      intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8,
                      rope_theta=500000.0),
}
# The 8B shape's first two layers and head: its kernels (one layer's
# GEMVs, attention, the head) profiled in seconds of export and compile.
SHAPES["llama3-8b-l2"] = dict(SHAPES["llama3-8b"], num_hidden_layers=2)
# Two layers of the 8B shape (the export grafts at least two) with a
# 2048-token vocabulary: its attention kernels at long contexts, profiled
# with seconds of export and compile.
SHAPES["llama3-8b-attn"] = dict(SHAPES["llama3-8b"], num_hidden_layers=2,
                                vocab_size=2048)
MAX_POSITIONS = 8448


def log(*args):
    print("[%s]" % time.strftime("%H:%M:%S"), *args, flush=True)


class Recorder:
    def __init__(self, path, shape):
        self.path = path
        self.data = {"shape": shape, "phases": {}, "errors": [],
                     "torch_compile": [], "hf_generate": [], "notes": []}

    def phase(self, name, seconds):
        self.data["phases"][name] = round(seconds, 2)
        log("%s: %.1f s" % (name, seconds))
        self.save()

    def error(self, what):
        text = "%s: %s" % (what, traceback.format_exc(limit=3))
        self.data["errors"].append(text)
        log("ERROR", text)
        self.save()

    def save(self):
        with open(self.path, "w") as f:
            json.dump(self.data, f, indent=2)


def make_llama(dims, device="cuda", dtype=None):
    """LlamaForCausalLM with the bench's config (dims as SHAPES gives them)
    and seeded random weights, on `device` in `dtype` (fp16 by default)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    dims = dict(dims)
    theta = dims.pop("rope_theta")
    config = LlamaConfig(
        **dims, max_position_embeddings=MAX_POSITIONS, rms_norm_eps=1e-5,
        tie_word_embeddings=False, hidden_act="silu", attention_bias=False,
        mlp_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": theta})
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config)
    return model.to(dtype or torch.float16).eval()


def make_model(shape):
    model = make_llama(SHAPES[shape])
    log("model: %s, %.2f GB fp16, attention %s" % (
        shape, sum(p.numel() for p in model.parameters()) * 2 / 1e9,
        getattr(model.config, "_attn_implementation", "?")))
    return model, SHAPES[shape]["rope_theta"]


def export_onnx(model, folder, dtype="fp32"):
    """`fp32`: a float32 graph over the fp16-valued weights, as the shared
    models. `fp16`: the fp16 model as it is (f16 weights and activations,
    tables and softmax in f32 with casts), half the bytes to write and read:
    what a Llama-3-8B shape needs to export and compile in minutes."""
    import torch

    class Logits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids):
            return self.inner(input_ids=input_ids, use_cache=False).logits

    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    float_model = copy.deepcopy(model).float() if dtype == "fp32" else model
    device = next(model.parameters()).device
    ids = torch.randint(0, model.config.vocab_size, (2, 16), device=device)
    kwargs = dict(dynamo=True, opset_version=20, input_names=["input_ids"],
                  output_names=["logits"], external_data=True)
    try:
        dims = {"input_ids": {0: torch.export.Dim("batch"),
                              1: torch.export.Dim("seq")}}
        with torch.no_grad():
            torch.onnx.export(Logits(float_model).eval(), (ids,), path,
                              dynamic_shapes=dims, **kwargs)
    except Exception:
        log("export with Dim objects failed, retrying with dynamic_axes:\n" +
            traceback.format_exc(limit=2))
        with torch.no_grad():
            torch.onnx.export(Logits(float_model).eval(), (ids,), path,
                              dynamic_axes={"input_ids": {0: "batch",
                                                          1: "seq"}},
                              **kwargs)
    if dtype == "fp32":
        del float_model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return path


# The twin's vocabulary: small, and no other dim of the shapes.
TWIN_VOCAB = 1009


def export_by_layers(model, folder, dtype="fp32"):
    """The export of `model` as bench/onnx_graft.py makes it: torch exports
    a twin with 2 layers and a vocabulary of TWIN_VOCAB (weights made
    distinct), the graft grows its graph to the model's layers and writes
    the model's own weights. The same graph as export_onnx gives, in
    seconds instead of minutes for billions of weights."""
    import shutil
    import numpy as np
    import torch
    import onnx
    import onnx_graft
    from transformers import LlamaForCausalLM
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = 2
    config.vocab_size = TWIN_VOCAB
    device = next(model.parameters()).device
    torch.manual_seed(1)
    with torch.device(device):
        twin = LlamaForCausalLM(config)
    twin = twin.to(model.dtype).eval()
    with torch.no_grad():
        for name, p in twin.named_parameters():
            p.normal_(0, 0.02)
            if p.ndim == 1:
                p.add_(1.0)  # norm weights: near one, all distinct
    twin_folder = os.path.join(folder, "twin")
    twin_path = export_onnx(twin, twin_folder, dtype)
    cast = torch.float32 if dtype == "fp32" else model.dtype
    twin_params = {name: p.detach().to(cast).cpu().numpy()
                   for name, p in twin.named_parameters()}
    del twin
    grown, sources = onnx_graft.graft(
        onnx.load(twin_path), twin_params, model.config.num_hidden_layers,
        TWIN_VOCAB, model.config.vocab_size)
    shutil.rmtree(twin_folder)
    params = dict(model.named_parameters())

    def fetch(name, transposed, dtype):
        # Transposed and cast where the weights are (the GPU), then copied.
        tensor = params[name].detach()
        if transposed:
            tensor = tensor.t()
        cast = torch.float32 if np.dtype(dtype) == np.float32 else \
            torch.float16
        return tensor.to(cast).contiguous().cpu().numpy()

    onnx_graft.save(grown, sources, fetch, folder)
    return os.path.join(folder, "model.onnx")


def make_fast_decoder(hf, theta, batch, max_len):
    """A gpt-fast style Llama over the Hugging Face model's weights (an
    nn.Module, so that torch.compile treats its tensors as static): fused
    QKV and gate/up matrices, a static KV cache of `max_len` positions per
    sequence, RoPE tables computed once, K and V repeated for GQA and SDPA
    over the whole cache with a mask (as gpt-fast does), greedy decoding."""
    import torch
    import torch.nn.functional as F

    class FastDecoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            c = hf.config
            self.heads = c.num_attention_heads
            self.kv_heads = c.num_key_value_heads
            self.head_dim = c.hidden_size // c.num_attention_heads
            self.eps = c.rms_norm_eps
            m = hf.model
            self.count = len(m.layers)

            def keep(name, tensor):
                self.register_buffer(name, tensor.detach(), persistent=False)

            keep("embed", m.embed_tokens.weight)
            for i, layer in enumerate(m.layers):
                a, f = layer.self_attn, layer.mlp
                keep("wqkv%d" % i, torch.cat([a.q_proj.weight,
                                              a.k_proj.weight,
                                              a.v_proj.weight]))
                keep("wo%d" % i, a.o_proj.weight)
                keep("w13%d" % i, torch.cat([f.gate_proj.weight,
                                             f.up_proj.weight]))
                keep("w2%d" % i, f.down_proj.weight)
                keep("n1%d" % i, layer.input_layernorm.weight)
                keep("n2%d" % i, layer.post_attention_layernorm.weight)
            keep("norm", m.norm.weight)
            keep("head", hf.lm_head.weight)
            d = self.head_dim
            inv = 1.0 / (theta ** (torch.arange(0, d, 2, device="cuda")
                                   .float() / d))
            angles = torch.outer(
                torch.arange(max_len, device="cuda").float(), inv)
            angles = torch.cat([angles, angles], dim=-1)
            keep("cos", angles.cos().half())
            keep("sin", angles.sin().half())
            shape = (self.count, batch, self.kv_heads, max_len, d)
            keep("k_cache", torch.zeros(shape, dtype=torch.float16,
                                        device="cuda"))
            keep("v_cache", torch.zeros(shape, dtype=torch.float16,
                                        device="cuda"))
            keep("causal", torch.tril(torch.ones(
                max_len, max_len, dtype=torch.bool, device="cuda")))

        def rms(self, x, w):
            x32 = x.float()
            x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) +
                                    self.eps)
            return x32.half() * w

        def rope(self, x, pos):
            cos = self.cos[pos][None, None]
            sin = self.sin[pos][None, None]
            half = x.shape[-1] // 2
            rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
            return x * cos + rotated * sin

        def forward(self, ids, pos, last_only: bool = False):
            b, s = ids.shape
            h, kv, d = self.heads, self.kv_heads, self.head_dim
            x = F.embedding(ids, self.embed)
            mask = self.causal[pos][None, None]
            for i in range(self.count):
                qkv = F.linear(self.rms(x, getattr(self, "n1%d" % i)),
                               getattr(self, "wqkv%d" % i))
                q, k, v = qkv.split([h * d, kv * d, kv * d], dim=-1)
                q = self.rope(q.view(b, s, h, d).transpose(1, 2), pos)
                k = self.rope(k.view(b, s, kv, d).transpose(1, 2), pos)
                v = v.view(b, s, kv, d).transpose(1, 2)
                self.k_cache[i].index_copy_(2, pos, k)
                self.v_cache[i].index_copy_(2, pos, v)
                keys = self.k_cache[i].repeat_interleave(h // kv, dim=1)
                values = self.v_cache[i].repeat_interleave(h // kv, dim=1)
                o = F.scaled_dot_product_attention(q, keys, values,
                                                   attn_mask=mask)
                x = x + F.linear(o.transpose(1, 2).reshape(b, s, h * d),
                                 getattr(self, "wo%d" % i))
                gate, up = F.linear(self.rms(x, getattr(self, "n2%d" % i)),
                                    getattr(self, "w13%d" % i)).chunk(2, -1)
                x = x + F.linear(F.silu(gate) * up, getattr(self, "w2%d" % i))
            if last_only:
                x = x[:, -1:]
            return F.linear(self.rms(x, self.norm), self.head)

    return FastDecoder()


def time_torch_compile(rec, hf, theta, batch, contexts, max_len, new_tokens,
                       deadline, label):
    import torch
    decoder = make_fast_decoder(hf, theta, batch, max_len)

    def decode_one(model, token, pos):
        return model(token, pos)[:, -1].argmax(-1)

    compiled_step = torch.compile(decode_one, mode="reduce-overhead",
                                  fullgraph=True)

    def step(token, pos):
        return compiled_step(decoder, token, pos)
    compiled = False
    for context in contexts:
        if time.time() > deadline:
            rec.data["notes"].append("torch.compile batch %d context %d "
                                     "skipped: deadline" % (batch, context))
            continue
        try:
            ids = torch.randint(0, hf.config.vocab_size, (batch, context),
                                device="cuda")
            decoder.k_cache.zero_()
            decoder.v_cache.zero_()
            torch.cuda.synchronize()
            start = time.time()
            with torch.no_grad():
                logits = decoder(ids, torch.arange(context, device="cuda"),
                                 True)
            torch.cuda.synchronize()
            prefill_ms = (time.time() - start) * 1e3
            token = logits[:, -1].argmax(-1, keepdim=True)
            pos = context
            compile_s = 0.0
            with torch.no_grad():
                for _ in range(3):  # compile / capture, then warm
                    t0 = time.time()
                    token = step(token, torch.tensor([pos], device="cuda"))
                    token = token.view(batch, 1).clone()
                    torch.cuda.synchronize()
                    if not compiled:
                        compile_s += time.time() - t0
                    pos += 1
                compiled = True
                begin = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                begin.record()
                for _ in range(new_tokens):
                    token = step(token, torch.tensor([pos], device="cuda"))
                    token = token.view(batch, 1).clone()
                    pos += 1
                end.record()
                torch.cuda.synchronize()
            ms = begin.elapsed_time(end) / new_tokens
            row = dict(impl="torch.compile", label=label, batch=batch,
                       context=context, cache_len=max_len,
                       decode_ms_per_token=round(ms, 4),
                       decode_tokens_per_s=round(batch * 1e3 / ms, 1),
                       prefill_ms=round(prefill_ms, 2),
                       first_compile_s=round(compile_s, 1))
            rec.data["torch_compile"].append(row)
            rec.save()
            log("torch.compile %s B=%d ctx=%d: %.3f ms/token" % (
                label, batch, context, ms))
        except Exception:
            rec.error("torch.compile batch %d context %d" % (batch, context))
    del decoder, compiled_step
    torch._dynamo.reset()
    torch.cuda.empty_cache()


def time_hf_generate(rec, hf, batch, context, new_tokens):
    import torch
    ids = torch.randint(0, hf.config.vocab_size, (batch, context),
                        device="cuda")
    kwargs = dict(do_sample=False, pad_token_id=0)
    with torch.no_grad():
        hf.generate(ids, max_new_tokens=4, min_new_tokens=4, **kwargs)
        torch.cuda.synchronize()
        start = time.time()
        out = hf.generate(ids, max_new_tokens=new_tokens,
                          min_new_tokens=new_tokens, **kwargs)
        torch.cuda.synchronize()
    seconds = time.time() - start
    generated = out.shape[1] - context
    ms = seconds * 1e3 / generated
    rec.data["hf_generate"].append(dict(
        impl="hf generate (eager)", batch=batch, context=context,
        new_tokens=generated, decode_ms_per_token=round(ms, 3),
        decode_tokens_per_s=round(batch * 1e3 / ms, 1),
        note="wall time of generate (prefill included) over new tokens"))
    rec.save()
    log("hf generate B=%d ctx=%d: %.2f ms/token" % (batch, context, ms))


def copy_bandwidth():
    import torch
    n = 2 * 1024 ** 3  # 2 GiB each way
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(10):
        dst.copy_(src)
    end.record()
    torch.cuda.synchronize()
    seconds = begin.elapsed_time(end) / 1e3 / 10
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n / seconds / 1e9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--json", required=True)
    parser.add_argument("--contexts", default="32,128,2048,8192")
    parser.add_argument("--batches", default="1,4,8")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--deadline", type=float, default=time.time() + 3600)
    parser.add_argument("--sitsc", help="compile the export with this sitsc")
    parser.add_argument("--engine", help="engine file sitsc writes")
    parser.add_argument("--sitsc-args", default="")
    parser.add_argument("--export-dtype", choices=["fp32", "fp16"],
                        default="fp32",
                        help="graph type of the ONNX export (see export_onnx)")
    parser.add_argument("--torch-batches",
                        help="batches with torch.compile references "
                             "(default: all of --batches)")
    parser.add_argument("--export-method", choices=["graft", "dynamo"],
                        default="graft",
                        help="graft: export a two-layer twin and grow it "
                             "(export_by_layers); dynamo: export the model "
                             "itself (minutes for billions of weights)")
    parser.add_argument("--int4-engine",
                        help="also compile an engine with int4 weights "
                             "(--weights=int4) to this file, concurrently")
    parser.add_argument("--int4-args", default="--weights=int4",
                        help="the int4 engine's extra sitsc options")
    args = parser.parse_args()
    contexts = [int(c) for c in args.contexts.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    rec = Recorder(args.json, args.shape)

    import torch
    rec.data["device"] = torch.cuda.get_device_name()
    rec.data["torch"] = torch.__version__
    import transformers
    rec.data["transformers"] = transformers.__version__
    start = time.time()
    model, theta = make_model(args.shape)
    rec.phase("model_init_s", time.time() - start)

    try:
        rec.data["copy_gb_per_s"] = round(copy_bandwidth(), 1)
        log("device-to-device copy: %.0f GB/s" % rec.data["copy_gb_per_s"])
    except Exception:
        rec.error("copy bandwidth")

    sitsc = None
    int4 = None
    folder = os.path.join(args.work, "onnx")
    try:
        start = time.time()
        rec.data["export_method"] = args.export_method
        if args.export_method == "graft":
            path = export_by_layers(model, folder, args.export_dtype)
        else:
            path = export_onnx(model, folder, args.export_dtype)
        rec.phase("onnx_export_s", time.time() - start)
        size = sum(os.path.getsize(os.path.join(folder, f))
                   for f in os.listdir(folder))
        rec.data["onnx_bytes"] = size
        if args.sitsc:
            command = [args.sitsc, path, "-o", args.engine, "--force"] + \
                args.sitsc_args.split()
            log("compiling: " + " ".join(command))
            sitsc_log = open(os.path.join(args.work, "sitsc.log"), "w")
            sitsc_start = time.time()
            sitsc = subprocess.Popen(command, stdout=sitsc_log,
                                     stderr=subprocess.STDOUT)
            # The end time of sitsc itself, not of our wait for it.
            sitsc_end = {}
            watcher = threading.Thread(
                target=lambda: sitsc_end.setdefault(
                    "t", (sitsc.wait(), time.time())[1]), daemon=True)
            watcher.start()
        if args.sitsc and args.int4_engine:
            command = [args.sitsc, path, "-o", args.int4_engine, "--force"] + \
                args.sitsc_args.split() + args.int4_args.split()
            log("compiling: " + " ".join(command))
            int4_log = open(os.path.join(args.work, "sitsc-int4.log"), "w")
            int4_start = time.time()
            int4 = subprocess.Popen(command, stdout=int4_log,
                                    stderr=subprocess.STDOUT)
            int4_end = {}
            int4_watcher = threading.Thread(
                target=lambda: int4_end.setdefault(
                    "t", (int4.wait(), time.time())[1]), daemon=True)
            int4_watcher.start()
    except Exception:
        rec.error("onnx export")

    # References. The tight cache (context + new tokens, as gpt-fast sizes
    # it) for the short prompts at batch 1; one cache of the largest
    # context for the rest (SDPA then reads the whole cache every step).
    new = args.new_tokens
    short = [c for c in contexts if c <= 128]
    full_len = max(contexts) + new + 8
    torch_batches = batches if not args.torch_batches else \
        [int(b) for b in args.torch_batches.split(",")]
    plans = []
    if short and 1 in torch_batches:
        plans.append((1, short, max(short) + new + 8, "tight cache"))
    for batch in torch_batches:
        rest = [c for c in contexts if batch > 1 or c > 128]
        if rest:
            plans.append((batch, rest, full_len, "full cache"))
    for batch, ctxs, max_len, label in plans:
        if time.time() > args.deadline:
            rec.data["notes"].append("torch.compile batch %d (%s) skipped: "
                                     "deadline" % (batch, label))
            continue
        try:
            time_torch_compile(rec, model, theta, batch, ctxs, max_len, new,
                               args.deadline, label)
        except Exception:
            rec.error("torch.compile batch %d" % batch)
    for context in short[:1]:
        if time.time() > args.deadline:
            rec.data["notes"].append("hf generate skipped: deadline")
            break
        try:
            time_hf_generate(rec, model, 1, context, new)
        except Exception:
            rec.error("hf generate")

    if sitsc is not None:
        code = sitsc.wait()
        watcher.join()
        rec.phase("sitsc_compile_s", sitsc_end["t"] - sitsc_start)
        rec.data["sitsc_exit"] = code
        if code != 0:
            rec.data["errors"].append("sitsc exited with %d (see sitsc.log)"
                                      % code)
        rec.save()
    if int4 is not None:
        code = int4.wait()
        int4_watcher.join()
        rec.phase("sitsc_int4_compile_s", int4_end["t"] - int4_start)
        if code != 0:
            rec.data["errors"].append("sitsc --weights=int4 exited with %d "
                                      "(see sitsc-int4.log)" % code)
        rec.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
