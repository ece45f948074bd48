#!/usr/bin/env python3
"""Greedy decoding of a decoder with past key/values (GenAI builder or
Optimum form, merged or not) with onnxruntime and its own KV cache, written as a
greedy.json (`prompt`, `greedy`) that `sitsc --verify-greedy` reads: the
reference stream of a quantized graph, whose tokens the dequantized float
weights of another model would not give.

  ort_greedy.py MODEL.onnx PROMPT_JSON OUT.json [--steps N]
                [--accuracy-level L] [--test-data DIR]

PROMPT_JSON is a greedy.json whose `prompt` is used. With
--accuracy-level, MatMulNBits nodes run at that level (0: f32 products).
--test-data also writes DIR/input_0.pb (input_ids: the prompt and its
reverse) and DIR/output_0.pb (their logits at an empty past), the
test_data_set form `sitsc --verify` reads.

The json also records the smallest greedy margin (the top logit minus the
second, over the steps) and the step it is at: a stream whose margin is
within an engine's rounding of zero is no reference for that engine.
"""

import argparse
import json
import os
import tempfile

import numpy as np
import onnx
import onnxruntime
from onnx import numpy_helper


def open_session(path, accuracy_level, tmp):
    """An onnxruntime session of `path`, its MatMulNBits nodes at
    `accuracy_level` when given (a copy written into `tmp`)."""
    if accuracy_level is not None:
        model = onnx.load(path)
        for node in model.graph.node:
            for attr in node.attribute:
                if node.op_type == "MatMulNBits" and \
                        attr.name == "accuracy_level":
                    attr.i = accuracy_level
        path = os.path.join(tmp, "model.onnx")
        onnx.save(model, path, save_as_external_data=True,
                  location="model.onnx.data")
    return onnxruntime.InferenceSession(
        path, providers=["CPUExecutionProvider"])


def empty_past(session, batch, model_path):
    """Zero-length past key/values: [batch, kv_heads, 0, head_dim] (the
    builder's head_dim is symbolic: its genai_config.json says it)."""
    config = os.path.join(os.path.dirname(model_path), "genai_config.json")
    head_size = None
    if os.path.exists(config):
        head_size = json.load(open(config))["model"]["decoder"]["head_size"]
    past = {}
    for info in session.get_inputs():
        if info.name.startswith("past_key_values"):
            heads, head_dim = info.shape[1], info.shape[3]
            if not isinstance(head_dim, int):
                head_dim = head_size
            if not isinstance(heads, int) or not isinstance(head_dim, int):
                raise SystemExit("%s: kv heads and head_dim must be static, "
                                 "not %s" % (info.name, info.shape))
            dtype = np.float16 if info.type == "tensor(float16)" \
                else np.float32
            past[info.name] = np.zeros((batch, heads, 0, head_dim), dtype)
    return past


def step(session, ids, past, total):
    """One forward of `ids` [batch, seq] after `total - seq` past tokens."""
    inputs = {i.name for i in session.get_inputs()}
    batch, seq = ids.shape
    feeds = {"input_ids": ids}
    if "attention_mask" in inputs:
        feeds["attention_mask"] = np.ones((batch, total), np.int64)
    if "use_cache_branch" in inputs:
        # A merged decoder: the first-step branch at an empty past.
        feeds["use_cache_branch"] = np.array([total > seq])
    if "position_ids" in inputs:
        feeds["position_ids"] = np.tile(
            np.arange(total - seq, total, dtype=np.int64), (batch, 1))
    feeds.update(past)
    outputs = [o.name for o in session.get_outputs()]
    return dict(zip(outputs, session.run(None, feeds)))


def greedy_margins(session, model, prompt, steps):
    """`steps` greedy tokens after `prompt` through the graph's cache, and
    each step's margin (top logit minus the second)."""
    past = empty_past(session, 1, model)
    ids = list(prompt)
    step_ids = np.array([prompt], np.int64)
    tokens, margins = [], []
    for _ in range(steps):
        result = step(session, step_ids, past, len(ids))
        logits = result["logits"][0, -1].astype(np.float64)
        token = int(np.argmax(logits))
        top_two = np.sort(logits)[-2:]
        margins.append(float(top_two[1] - top_two[0]))
        tokens.append(token)
        ids.append(token)
        step_ids = np.array([[token]], np.int64)
        for name in past:
            past[name] = result[name.replace("past_key_values", "present")]
    return tokens, margins


def run_prompt(path, ids, accuracy_level=None):
    """The logits of the prompts `ids` [batch, seq] at an empty past."""
    with tempfile.TemporaryDirectory() as tmp:
        session = open_session(path, accuracy_level, tmp)
        past = empty_past(session, ids.shape[0], path)
        return step(session, ids, past, ids.shape[1])["logits"]


def write_test_data(path, prompt, accuracy_level, folder):
    ids = np.array([prompt, prompt[::-1]], np.int64)
    logits = run_prompt(path, ids, accuracy_level)
    os.makedirs(folder, exist_ok=True)
    for name, value in [("input_0.pb", ids), ("output_0.pb", logits)]:
        with open(os.path.join(folder, name), "wb") as f:
            f.write(numpy_helper.from_array(value).SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("prompt_json")
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--accuracy-level", type=int)
    parser.add_argument("--test-data")
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory()
    session = open_session(args.model, args.accuracy_level, tmp.name)
    prompt = json.load(open(args.prompt_json))["prompt"]
    greedy, margins = greedy_margins(session, args.model, prompt, args.steps)
    smallest = int(np.argmin(margins))
    json.dump({"prompt": prompt, "greedy": greedy,
               "smallest_margin": round(margins[smallest], 4),
               "smallest_margin_step": smallest,
               "made_by": "test/tools/ort_greedy.py (onnxruntime %s%s)" % (
                   onnxruntime.__version__,
                   "" if args.accuracy_level is None else
                   ", MatMulNBits accuracy_level %d" % args.accuracy_level)},
              open(args.out, "w"))
    print(" ".join(map(str, greedy)))
    if args.test_data:
        write_test_data(args.model, prompt, args.accuracy_level,
                        args.test_data)


if __name__ == "__main__":
    main()
