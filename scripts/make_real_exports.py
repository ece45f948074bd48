#!/usr/bin/env python3
"""Makes real exporter output of tiny decoders for the frontend tests.

--arch llama (the default) rebuilds the Hugging Face LlamaForCausalLM whose
dynamo export is test/models/llama_gqa/model.onnx (its weights are that
file's initializers: the embedding and norms under their state-dict names,
the projections as transposed `val_N` constants, found here by the MatMul
that reads them). --arch qwen2 and --arch mistral make a Qwen2ForCausalLM
(q/k/v biases, tied embedding) and a MistralForCausalLM (GQA, a sliding
window of 8 tokens) from transformers' real configs at tiny sizes with
seeded random weights (ARCHS below). Then the real producers run on it:

  optimum/     optimum-cli export onnx --task text-generation-with-past
  genai_fp32/  python -m onnxruntime_genai.models.builder -p fp32 -e cpu
  genai_int4/  python -m onnxruntime_genai.models.builder -p int4 -e cpu
  genai_dml_fp16/  ... -p fp16 -e dml (rotary outside attention)
  optimum_merged/  optimum.onnx.merge_decoders of a first-step decoder
                   and optimum/ (not a default step: too large to commit;
                   the tests make the same form with
                   test/tools/merge_decoder.py)

and, for the made-up architectures, the reference step writes into each
producer's folder what onnxruntime computes on that file:
greedy_ort.json (test/tools/ort_greedy.py) and test_data_set_0 (input_ids
of two prompts, the logits at an empty past). Only the references step
runs without the producers: `make_real_exports.py test/models/exports/qwen2
--arch qwen2 reference` rewrites them in place.

Usage: make_real_exports.py OUT_DIR [--arch A] [STEP...]  in a venv with
torch, transformers, optimum-onnx, onnxruntime-genai. Each output folder
gets a VERSIONS.txt of the packages that made it (optimum-onnx 0.1.0 pins
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


# Tiny made-up models: transformers' real classes and configs, sizes that
# keep each export under 250 KB (one layer: the TorchScript graph of a
# layer is 50 KB of nodes; head_dim 16: the engine's attention kernels'
# smallest), seeded random weights. The prompt is longer than Mistral's
# window, so the window decides the logits.
ARCHS = {
    "qwen2": dict(cls="Qwen2ForCausalLM", config="Qwen2Config",
                  tie_word_embeddings=True, use_sliding_window=False),
    "mistral": dict(cls="MistralForCausalLM", config="MistralConfig",
                    tie_word_embeddings=False, sliding_window=8),
}
TINY = dict(vocab_size=96, hidden_size=64, intermediate_size=32,
            num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, max_position_embeddings=128, rms_norm_eps=1e-6,
            rope_theta=10000.0, initializer_range=1.0, bos_token_id=1,
            eos_token_id=2)
SEED = 0
PROMPT = [5, 17, 46, 33, 61, 12, 54, 40, 9, 44, 27, 30]
GREEDY_STEPS = 48
# The greedy prompt of a folder whose stream from PROMPT has a near tie
# within GREEDY_STEPS (a step whose top two logits are closer than 0.05:
# an f16 engine may rightly take the other token there): the first prompt
# test/tools/pick_prompt.py finds for it (seed 0, every margin >= 0.05).
# test_data_set_0 keeps PROMPT.
GREEDY_PROMPTS = {
    ("qwen2", "genai_int4"): [82, 62, 50, 28, 31, 6, 9, 4, 19, 78, 63, 87],
    ("mistral", "optimum"): [82, 62, 50, 28, 31, 6, 9, 4, 19, 78, 63, 87],
    ("mistral", "genai_fp32"): [82, 62, 50, 28, 31, 6, 9, 4, 19, 78, 63, 87],
    ("mistral", "genai_int4"): [49, 59, 93, 70, 61, 53, 55, 89, 28, 78, 65, 3],
}


def llama_from_onnx(transformers):
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
    return model, greedy


def made_up(transformers, arch):
    import torch
    spec = dict(ARCHS[arch])
    cls, config_cls = spec.pop("cls"), spec.pop("config")
    torch.manual_seed(SEED)
    hf_config = getattr(transformers, config_cls)(**TINY, **spec)
    model = getattr(transformers, cls)(hf_config).eval()
    # transformers initializes norms to 1 and biases to 0, which would let
    # a frontend that drops either pass; weights of std 1 give a greedy
    # stream of many tokens with clear margins (a std of 0.02 repeats one).
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(1 + 0.3 * torch.randn_like(param))
            elif name.endswith("bias"):
                param.copy_(torch.randn_like(param))
    return model, {"prompt": PROMPT}


def save_with_tokenizer(model, hf_dir):
    import shutil
    model.save_pretrained(hf_dir)
    # The builders want a tokenizer; none of the tests reads it, so the
    # shared llama_bpe16k one stands in (its ids are not this model's).
    tokenizer = os.environ.get(
        "SITS_EXPORT_TOKENIZER",
        "/work/shared/models/llama_bpe16k/tokenizer.json")
    shutil.copy(tokenizer, os.path.join(hf_dir, "tokenizer.json"))
    with open(os.path.join(hf_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast"}, f)


def export_merged(hf_dir, out):
    """optimum_merged/: Optimum's merged decoder, made as Optimum made it
    before optimum-onnx 0.1.0 stopped merging: the first-step decoder (no
    past inputs, present outputs) exported through the Python API and
    merged with optimum/'s decoder by optimum.onnx.merge_decoders."""
    from pathlib import Path

    import transformers
    from optimum.exporters.onnx import export
    from optimum.exporters.tasks import TasksManager
    from optimum.onnx import merge_decoders
    first = os.path.join(out, "optimum_first_step")
    os.makedirs(first, exist_ok=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    constructor = TasksManager.get_exporter_config_constructor(
        "onnx", model=model, task="text-generation-with-past")
    config = constructor(model.config, task="text-generation", use_past=True,
                         use_past_in_inputs=False)
    export(model, config, Path(first) / "model.onnx", opset=18)
    merged = os.path.join(out, "optimum_merged")
    os.makedirs(merged, exist_ok=True)
    merge_decoders(os.path.join(first, "model.onnx"),
                   os.path.join(out, "optimum", "model.onnx"),
                   save_path=os.path.join(merged, "model.onnx"))


def write_references(folder, prompt, greedy_prompt):
    """onnxruntime on the export itself: its greedy stream from
    `greedy_prompt`, and the logits of `prompt` and its reverse at an empty
    past as test_data_set_0."""
    prompt_json = os.path.join(folder, "prompt.json")
    greedy_json = os.path.join(folder, "greedy_ort.json")
    tool = os.path.join(ROOT, "test", "tools", "ort_greedy.py")
    level = ["--accuracy-level", "0"] \
        if os.path.basename(folder).endswith("int4") else []
    for p, out, extra in [
            (prompt, greedy_json, ["--test-data",
                                   os.path.join(folder, "test_data_set_0")]),
            (greedy_prompt, greedy_json, [])]:
        with open(prompt_json, "w") as f:
            json.dump({"prompt": p}, f)
        subprocess.run([sys.executable, tool, os.path.join(
            folder, "model.onnx"), prompt_json, out, "--steps",
            str(GREEDY_STEPS)] + level + extra, check=True)
    os.remove(prompt_json)


def main():
    args = sys.argv[1:]
    arch = "llama"
    if "--arch" in args:
        at = args.index("--arch")
        arch = args[at + 1]
        del args[at:at + 2]
    out = os.path.abspath(args[0])
    os.makedirs(out, exist_ok=True)
    if args[1:] == ["reference"] and arch != "llama":
        # onnxruntime on the folders already there: no torch needed.
        for name in ["optimum", "genai_fp32", "genai_int4", "genai_dml_fp16"]:
            if os.path.isdir(os.path.join(out, name)):
                write_references(os.path.join(out, name), PROMPT,
                                 GREEDY_PROMPTS.get((arch, name), PROMPT))
        return
    import torch
    import transformers
    hf_dir = os.path.join(out, "hf")
    if arch == "llama":
        model, greedy = llama_from_onnx(transformers)
    else:
        model, greedy = made_up(transformers, arch)
    steps = greedy.get("greedy")
    ids = torch.tensor([greedy["prompt"]])
    with torch.no_grad():
        gen = model.generate(ids, max_new_tokens=len(steps or range(
            GREEDY_STEPS)), do_sample=False, pad_token_id=0)
    got = gen[0, ids.shape[1]:].tolist()
    if steps:
        # The rebuilt model: greedy tokens as in greedy.json.
        print("greedy matches greedy.json:", got == steps)
        assert got == steps, (got, steps)
    else:
        print("transformers greedy:", got)
    only = args[1:] or ["hf", "optimum", "genai_fp32", "genai_int4",
                        "genai_dml_fp16", "reference"]
    if "hf" in only:
        save_with_tokenizer(model, hf_dir)

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
        # For DirectML the builder keeps rotary out of attention: a
        # standalone com.microsoft RotaryEmbedding with a position_ids input.
        ("genai_dml_fp16", [py, "-m", "onnxruntime_genai.models.builder",
                            "-i", hf_dir, "-o",
                            os.path.join(out, "genai_dml_fp16"), "-p", "fp16",
                            "-e", "dml", "-c", os.path.join(out, "cache")]),
    ]
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
    # After optimum/, which it merges.
    if "optimum_merged" in only:
        export_merged(hf_dir, out)
        with open(os.path.join(out, "optimum_merged", "VERSIONS.txt"),
                  "w") as f:
            for k, v in versions.items():
                f.write(f"{k} {v}\n")
    if "reference" in only and arch != "llama":
        for name, _ in steps:
            if os.path.isdir(os.path.join(out, name)):
                write_references(
                    os.path.join(out, name), greedy["prompt"],
                    GREEDY_PROMPTS.get((arch, name), greedy["prompt"]))


if __name__ == "__main__":
    main()
