#!/usr/bin/env python3
"""The TVC part of bench/run.sh (SITS_BENCH_TVC=1): the LM head of the
Llama-3-8B shape (vocabulary 128256, hidden 4096), plain and as a TVC head.

  tvc_head.py model --work DIR --sitsc SITSC [--rank R] [--candidates K]
  tvc_head.py report --out FILE PLAIN.json TVC.json [TVC_FALLBACK.json]

`model`: a one-layer Llama with the 8B shape's vocabulary, hidden size and
attention (random fp16 weights; the head's time does not depend on the
layers) exported to ONNX, then compiled twice with sitsc, in parallel: the
plain engine and one with --tvc=exact --tvc-rank=R --tvc-candidates=K.
Writes DIR/plain.sits, DIR/tvc.sits and DIR/compile.json (the times; the TVC
compile includes the randomized SVD of the 128256 x 4096 head).

`report`: the table of sits-bench's LM-head time (its launches replayed
alone) of the plain engine against the TVC engine measured with
--tvc-no-fallback (the proof taken as succeeding: random weights give
proofs that rarely hold, and that run's tokens may differ), the ratio, the
decode step times, and the fallback rate of a normal TVC run when given.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def make_model(work):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    import llama_bench
    config = LlamaConfig(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336,
        num_hidden_layers=1, num_attention_heads=32, num_key_value_heads=8,
        max_position_embeddings=llama_bench.MAX_POSITIONS, rms_norm_eps=1e-5,
        tie_word_embeddings=False, hidden_act="silu", attention_bias=False,
        mlp_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config)
    model = model.to(torch.float16).eval()
    # The f32 graph: --sits-fuse-tvc keeps heads that are not f32.
    path = llama_bench.export_onnx(model, os.path.join(work, "onnx"), "fp32")
    del model
    torch.cuda.empty_cache()
    return path


def compile_engines(args):
    started = time.time()
    onnx_path = make_model(args.work)
    times = {"export_s": round(time.time() - started, 1),
             "rank": args.rank, "candidates": args.candidates}
    common = ["--max-seq-len=512", "--max-batch=8", "--force"]
    jobs = {
        "plain": [args.sitsc, onnx_path, "-o",
                  os.path.join(args.work, "plain.sits")] + common,
        "tvc": [args.sitsc, onnx_path, "-o",
                os.path.join(args.work, "tvc.sits"), "--tvc=exact",
                "--tvc-rank=%d" % args.rank,
                "--tvc-candidates=%d" % args.candidates] + common,
    }
    results = {}

    def run(name, command):
        begin = time.time()
        with open(os.path.join(args.work, "sitsc-%s.log" % name), "w") as log:
            code = subprocess.call(command, stdout=log,
                                   stderr=subprocess.STDOUT)
        results[name] = (code, round(time.time() - begin, 1))

    threads = [threading.Thread(target=run, args=item)
               for item in jobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, (code, seconds) in results.items():
        times["sitsc_%s_s" % name] = seconds
        times["sitsc_%s_exit" % name] = code
        print("sitsc %s: exit %d in %.1f s" % (name, code, seconds))
        with open(os.path.join(args.work, "sitsc-%s.log" % name)) as log:
            print("".join(log.readlines()[-8:]))
    with open(os.path.join(args.work, "compile.json"), "w") as out:
        json.dump(times, out, indent=2)
    return 0 if all(code == 0 for code, _ in results.values()) else 1


def report(args):
    def load(path):
        try:
            with open(path) as f:
                return {r["batch"]: r for r in json.load(f)["results"]}
        except (OSError, ValueError, KeyError):
            return {}
    plain, tvc = load(args.plain), load(args.tvc)
    fallback = load(args.fallback) if args.fallback else {}
    lines = [
        "## TVC LM head, Llama-3-8B shape (vocabulary 128256, hidden 4096)",
        "",
        "LM-head time: the decode step's head launches replayed alone "
        "(sits-bench). TVC with --tvc-no-fallback: every row taken as proved "
        "(benchmark only), i.e. the time when the proof succeeds.",
        "",
        "| batch | plain head us | TVC head us (proved) | plain / TVC | "
        "decode ms plain | decode ms TVC (proved) | fallback rate (random "
        "weights) |",
        "|---|---|---|---|---|---|---|",
    ]
    best = None
    for batch in sorted(plain):
        p, t = plain[batch], tvc.get(batch, {})
        head_p = p.get("lm_head_ms", 0) * 1e3
        head_t = t.get("lm_head_ms", 0) * 1e3
        ratio = head_p / head_t if head_t else None
        if batch == 1:
            best = ratio
        f = fallback.get(batch, {})
        rows = f.get("tvc_proved_rows", 0) + f.get("tvc_fallback_rows", 0)
        rate = "%.1f%%" % (100.0 * f["tvc_fallback_rows"] / rows) \
            if rows else "-"
        lines.append("| %d | %.1f | %.1f | %s | %.3f | %.3f | %s |" % (
            batch, head_p, head_t, "%.2fx" % ratio if ratio else "-",
            p.get("decode_ms_per_token", 0), t.get("decode_ms_per_token", 0),
            rate))
    lines.append("")
    if best is not None:
        lines.append("Batch 1: plain head time / TVC head time = %.2fx when "
                     "the proof succeeds (the issue asks for >= 2x): %s."
                     % (best, "met" if best >= 2 else "NOT met"))
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "w") as out:
        out.write(text)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    model = sub.add_parser("model")
    model.add_argument("--work", required=True)
    model.add_argument("--sitsc", required=True)
    model.add_argument("--rank", type=int, default=128)
    model.add_argument("--candidates", type=int, default=64)
    rep = sub.add_parser("report")
    rep.add_argument("--out", required=True)
    rep.add_argument("plain")
    rep.add_argument("tvc")
    rep.add_argument("fallback", nargs="?")
    args = parser.parse_args()
    os.makedirs(getattr(args, "work", "."), exist_ok=True)
    return compile_engines(args) if args.mode == "model" else report(args)


if __name__ == "__main__":
    sys.exit(main())
