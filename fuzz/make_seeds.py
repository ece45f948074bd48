#!/usr/bin/env python3
"""Writes the seed corpora of the text and ONNX fuzz targets.

  fuzz/make_seeds.py OUT_DIR

OUT_DIR/<target>/ gets small inputs in each target's format (see the
comment at the top of fuzz/Fuzz*.cpp): ONNX models from the frontend's test
generators (every malformed-model case that fits in one folder, and the
raising idioms), tokenizer.json files of every supported shape trimmed to a
few hundred tokens, the chat templates of the lit tests, and
tokenizer_config.json variants. The engine seeds come from
sits-fuzz-engine-seeds (fuzz/make_seeds.sh runs both). Needs the Python
packages of scripts/install-deps.sh (onnx, numpy, tokenizers).
"""

import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "test", "tools")
TEXTS = [
    "Hello, world!",
    "Once upon a time, there was a little robot.\n\nIt said: \"hi!\"",
    "  leading spaces\tand\ttabs\r\nand CRLF",
    "caf\u00e9 na\u00efve \u00fcber \u4f60\u597d \U0001F600 \u0627\u0644\u0639",
    "<s>special</s> tokens <|eot_id|> in text",
    "1234567890 3.14159 -42",
]


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def onnx_input(folder):
    """The framed input of one model folder, or None when it does not fit
    the format (more than one external file, links, files outside)."""
    import onnx
    model_path = os.path.join(folder, "model.onnx")
    if not os.path.isfile(model_path) or os.path.islink(model_path):
        return None
    others = [f for f in os.listdir(folder) if f != "model.onnx"]
    if len(others) > 1:
        return None
    data = b""
    with open(model_path, "rb") as f:
        model_bytes = f.read()
    if others:
        other = os.path.join(folder, others[0])
        if os.path.islink(other) or not os.path.isfile(other):
            return None
        with open(other, "rb") as f:
            data = f.read()
        # The harness names the external data file model.onnx.data.
        try:
            model = onnx.ModelProto()
            model.ParseFromString(model_bytes)
        except Exception:
            return None
        for tensor in model.graph.initializer:
            for entry in tensor.external_data:
                if entry.key == "location" and entry.value == others[0]:
                    entry.value = "model.onnx.data"
        model_bytes = model.SerializeToString()
    return struct.pack("<I", len(model_bytes)) + model_bytes + data


def onnx_seeds(out):
    work = tempfile.mkdtemp()
    try:
        for script, kind in (("onnx_bad_models.py", "bad"),
                             ("onnx_pattern_models.py", "pattern")):
            tool = os.path.join(TOOLS, script)
            cases = subprocess.run([sys.executable, tool, "list"], check=True,
                                   capture_output=True,
                                   text=True).stdout.split()
            for case in cases:
                folder = os.path.join(work, kind, case)
                os.makedirs(folder, exist_ok=True)
                target = folder if kind == "bad" else \
                    os.path.join(folder, "model.onnx")
                result = subprocess.run([sys.executable, tool, case, target],
                                        capture_output=True)
                if result.returncode != 0:
                    continue
                framed = onnx_input(folder)
                if framed is None:
                    continue
                for name in ("onnx-loader", "onnx-import"):
                    write(os.path.join(out, name, "%s-%s" % (kind, case)),
                          framed)
    finally:
        shutil.rmtree(work)


def contrib_seeds(out):
    """ONNX Runtime contrib-op models (GroupQueryAttention, MatMulNBits,
    ...) of test/tools/check_contrib_ops.py, one seed per case."""
    import numpy as np
    import onnx
    sys.path.insert(0, TOOLS)
    import check_contrib_ops
    work = tempfile.mkdtemp()
    try:
        for case, make in sorted(check_contrib_ops.CASES.items()):
            model, _ = make(np.random.default_rng(0))
            folder = os.path.join(work, case)
            os.makedirs(folder)
            onnx.save(model, os.path.join(folder, "model.onnx"))
            framed = onnx_input(folder)
            for name in ("onnx-loader", "onnx-import"):
                write(os.path.join(out, name, "contrib-%s" % case), framed)
    finally:
        shutil.rmtree(work)


def merged_seeds(out):
    """Merged decoders (an If whose then_branch the loader takes apart):
    the hand-written graphs of test/frontends/onnx/merged-decoder.test, and
    its valid one with the then_branch's initializer in external data."""
    from onnx import ModelProto, TensorProto, parser
    text = open(os.path.join(ROOT, "test", "frontends", "onnx",
                             "merged-decoder.test")).read()
    models = {}
    for part in text.split("\n#--- ")[1:]:
        name, body = part.split("\n", 1)
        models[name[:-len(".onnxtxt")]] = parser.parse_model(body)
    external = ModelProto()
    external.CopyFrom(models["ok"])
    branch = next(a.g for a in external.graph.node[0].attribute
                  if a.name == "then_branch")
    tensor = branch.initializer[0]
    data = struct.pack("<%df" % len(tensor.float_data), *tensor.float_data)
    tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "model.onnx.data"), ("offset", "0"),
                       ("length", str(len(data)))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    for name, model in list(models.items()) + [("external", external)]:
        model_bytes = model.SerializeToString()
        framed = struct.pack("<I", len(model_bytes)) + model_bytes
        if name == "external":
            framed += data
        for target in ("onnx-loader", "onnx-import"):
            write(os.path.join(out, target, "merged-" + name), framed)


def trim_tokenizer(config, keep=320):
    """The same tokenizer with ids below `keep` (and the added tokens) and
    the merges among them."""
    model = config["model"]
    vocab = {t: i for t, i in model["vocab"].items() if i < keep}
    for added in config.get("added_tokens", []):
        if added["content"] in model["vocab"]:
            vocab[added["content"]] = added["id"]
    merges = []
    for merge in model.get("merges", []):
        a, b = merge if isinstance(merge, list) else merge.split(" ", 1)
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(merge)
    model["vocab"] = vocab
    model["merges"] = merges
    return config


def tokenizer_seeds(out):
    work = tempfile.mkdtemp()
    try:
        subprocess.run([sys.executable,
                        os.path.join(ROOT, "test/runtime/tokenizer/"
                                     "make_tokenizers.py"),
                        os.path.join(ROOT, "test/runtime/tokenizer/Inputs/"
                                     "train.txt"), work],
                       check=True, capture_output=True)
        for path in sorted(glob.glob(os.path.join(work, "*.json"))):
            with open(path) as f:
                config = trim_tokenizer(json.load(f))
            text = json.dumps(config, ensure_ascii=False).encode()
            shape = os.path.basename(path)[:-len(".json")]
            for i, sample in enumerate(TEXTS):
                write(os.path.join(out, "tokenizer", "%s-%d" % (shape, i)),
                      text + b"\0" + sample.encode())
    finally:
        shutil.rmtree(work)


def chat_seeds(out):
    goldens = json.load(open(os.path.join(
        ROOT, "test/runtime/chat/Inputs/goldens.json")))
    conversations = list(goldens["conversations"].items())[:4]
    templates = sorted(glob.glob(os.path.join(
        ROOT, "test/runtime/chat/Inputs/templates/*.jinja")))
    for i, path in enumerate(templates):
        source = open(path, "rb").read()
        name, conversation = conversations[i % len(conversations)]
        variables = dict(conversation)
        variables.update({"add_generation_prompt": True, "bos_token": "<s>",
                          "eos_token": "</s>"})
        variables = {k: v for k, v in variables.items() if v is not None}
        base = os.path.basename(path)[:-len(".jinja")]
        write(os.path.join(out, "chat-template", base), source)
        write(os.path.join(out, "chat-template", base + "-" + name),
              source + b"\0" + json.dumps(variables).encode())
    # Model tokenizer: tokenizer_config.json NUL chat_template.jinja NUL
    # generation_config.json NUL special_tokens_map.json NUL messages.
    simple = ("{{ bos_token }}{% for m in messages %}<{{ m.role }}>"
              "{{ m.content }}{% endfor %}{% if add_generation_prompt %}"
              "<assistant>{% endif %}")
    cases = {
        "config-template": [json.dumps({"bos_token": "<s>",
                                        "eos_token": "</s>",
                                        "chat_template": simple}), "", "", "",
                            ""],
        "jinja-file": [json.dumps({"bos_token": {"content": "<s>",
                                                 "lstrip": False},
                                   "eos_token": "<|eot|>"}), simple,
                       json.dumps({"eos_token_id": [1, 7]}), "", ""],
        "named-templates": [json.dumps({"chat_template": [
            {"name": "default", "template": simple},
            {"name": "tool_use", "template": "{{ tools }}"}]}),
                            "", "", "", ""],
        "special-map": ["{}", "", json.dumps({"eos_token_id": 1}),
                        json.dumps({"bos_token": "<s>", "eos_token": "</s>"}),
                        json.dumps([{"role": "user", "content": "hi!"},
                                    {"role": "assistant", "content": "hi"}])],
    }
    for name, parts in cases.items():
        write(os.path.join(out, "model-tokenizer", name),
              "\0".join(parts).encode())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    onnx_seeds(out)
    contrib_seeds(out)
    merged_seeds(out)
    tokenizer_seeds(out)
    chat_seeds(out)


if __name__ == "__main__":
    main()
