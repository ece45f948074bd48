#!/usr/bin/env python3
"""Makes real exporter output of test/models/llama_gqa for the frontend tests.

Rebuilds the Hugging Face LlamaForCausalLM whose dynamo export is
test/models/llama_gqa/model.onnx (its weights are that file's initializers:
the embedding and norms under their state-dict names, the projections as
transposed `val_N` constants, found here by the MatMul that reads them), then
runs the real producers on it:

  optimum/     optimum-cli export onnx --task text-generation-with-past
  genai_fp32/  python -m onnxruntime_genai.models.builder -p fp32 -e cpu
  genai_int4/  python -m onnxruntime_genai.models.builder -p int4 -e cpu

Usage: make_real_exports.py OUT_DIR [STEP...]  in a venv with torch,
transformers, optimum-onnx, onnxruntime-genai. Each output folder gets a
VERSIONS.txt of the packages that made it (optimum-onnx 0.1.0 pins
transformers < 4.58 and the GenAI builder 0.18 imports transformers 5
classes: run the steps in environments that satisfy each, e.g. the genai
steps with PYTHONPATH pointing at a transformers 5 install).
"""
import json
import os
import subprocess
import sys
from importlib import metadata

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "test", "models", "llama_gqa")


def state_dict_from_onnx(config):
    import torch
    model = onnx.load(os.path.join(SOURCE, "model.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    hidden = config["hidden_size"]
    state = {"model.embed_tokens.weight": inits["m.model.embed_tokens.weight"]}
    # Norm weights: the [hidden] constants multiplied in, in node order
    # (input, post-attention per layer, then the final norm).
    norms, linears = [], []
    for node in model.graph.node:
        consts = [x for x in node.input if x in inits]
        if node.op_type == "Mul":
            norms += [x for x in consts if inits[x].shape == (hidden,)]
        if node.op_type == "MatMul" and consts and inits[consts[0]].ndim == 2:
            linears.append(consts[0])
    layers = config["num_hidden_layers"]
    assert len(norms) == 2 * layers + 1, norms
    assert len(linears) == 7 * layers + 1, linears
    names = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
             "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
             "mlp.down_proj"]
    for layer in range(layers):
        prefix = f"model.layers.{layer}."
        state[prefix + "input_layernorm.weight"] = inits[norms[2 * layer]]
        state[prefix + "post_attention_layernorm.weight"] = \
            inits[norms[2 * layer + 1]]
        for i, name in enumerate(names):
            # MatMul(x, W) with W = weight^T.
            state[prefix + name + ".weight"] = \
                inits[linears[7 * layer + i]].T.copy()
    state["model.norm.weight"] = inits[norms[-1]]
    state["lm_head.weight"] = inits[linears[-1]].T.copy()
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in
            state.items()}


def main():
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    import torch
    import transformers
    greedy = json.load(open(os.path.join(SOURCE, "greedy.json")))
    config = greedy["config"]
    hf_config = transformers.LlamaConfig(
        vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
        intermediate_size=config["intermediate_size"],
        num_hidden_layers=config["num_hidden_layers"],
        num_attention_heads=config["num_attention_heads"],
        num_key_value_heads=config["num_key_value_heads"],
        head_dim=config["head_dim"], rms_norm_eps=config["rms_norm_eps"],
        max_position_embeddings=config["max_position_embeddings"],
        rope_theta=10000.0, tie_word_embeddings=False,
        bos_token_id=config["bos_token_id"],
        eos_token_id=config["eos_token_id"])
    model = transformers.LlamaForCausalLM(hf_config).eval()
    missing = model.load_state_dict(state_dict_from_onnx(config), strict=True)
    print("loaded:", missing)
    hf_dir = os.path.join(out, "hf")
    model.save_pretrained(hf_dir)
    # The builders want a tokenizer; none of the tests reads it, so the
    # shared llama_bpe16k one stands in (its ids are not this model's).
    tokenizer = os.environ.get(
        "SITS_EXPORT_TOKENIZER",
        "/work/shared/models/llama_bpe16k/tokenizer.json")
    import shutil
    shutil.copy(tokenizer, os.path.join(hf_dir, "tokenizer.json"))
    with open(os.path.join(hf_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast"}, f)
    # Check the rebuilt model: greedy tokens as in greedy.json.
    ids = torch.tensor([greedy["prompt"]])
    with torch.no_grad():
        gen = model.generate(ids, max_new_tokens=len(greedy["greedy"]),
                             do_sample=False, pad_token_id=0)
    got = gen[0, ids.shape[1]:].tolist()
    print("greedy matches greedy.json:", got == greedy["greedy"])
    assert got == greedy["greedy"], (got, greedy["greedy"])

    versions = {"torch": torch.__version__,
                "transformers": transformers.__version__}
    for p in ["onnx", "onnxruntime", "optimum", "optimum-onnx",
              "onnxruntime-genai", "onnx-ir"]:
        try:
            versions[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            pass

    py = sys.executable
    bindir = os.path.dirname(py)
    steps = [
        ("optimum", [os.path.join(bindir, "optimum-cli"), "export", "onnx",
                     "--model", hf_dir, "--task", "text-generation-with-past",
                     "--framework", "pt", os.path.join(out, "optimum")]),
        ("genai_fp32", [py, "-m", "onnxruntime_genai.models.builder",
                        "-i", hf_dir, "-o", os.path.join(out, "genai_fp32"),
                        "-p", "fp32", "-e", "cpu",
                        "-c", os.path.join(out, "cache")]),
        ("genai_int4", [py, "-m", "onnxruntime_genai.models.builder",
                        "-i", hf_dir, "-o", os.path.join(out, "genai_int4"),
                        "-p", "int4", "-e", "cpu",
                        "-c", os.path.join(out, "cache")]),
    ]
    only = sys.argv[2:] or [s[0] for s in steps]
    for name, cmd in steps:
        if name not in only:
            continue
        print("+", " ".join(cmd), flush=True)
        result = subprocess.run(cmd)
        print(name, "exit", result.returncode, flush=True)
        if result.returncode == 0:
            with open(os.path.join(out, name, "VERSIONS.txt"), "w") as f:
                for k, v in versions.items():
                    f.write(f"{k} {v}\n")


if __name__ == "__main__":
    main()
