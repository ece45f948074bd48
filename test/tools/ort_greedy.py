#!/usr/bin/env python3
"""Greedy decoding of a decoder with past key/values (GenAI builder or
Optimum form) with onnxruntime and its own KV cache, written as a
greedy.json (`prompt`, `greedy`) that `sitsc --verify-greedy` reads: the
reference stream of a quantized graph, whose tokens the dequantized float
weights of another model would not give.

  ort_greedy.py MODEL.onnx PROMPT_JSON OUT.json [--steps N]
                [--accuracy-level L]

PROMPT_JSON is a greedy.json whose `prompt` is used. With
--accuracy-level, MatMulNBits nodes run at that level (0: f32 products).
"""

import argparse
import json
import os
import tempfile

import numpy as np
import onnx
import onnxruntime


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("prompt_json")
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--accuracy-level", type=int)
    args = parser.parse_args()
    path = args.model
    tmp = tempfile.TemporaryDirectory()
    if args.accuracy_level is not None:
        model = onnx.load(path)
        for node in model.graph.node:
            for attr in node.attribute:
                if node.op_type == "MatMulNBits" and \
                        attr.name == "accuracy_level":
                    attr.i = args.accuracy_level
        path = os.path.join(tmp.name, "model.onnx")
        onnx.save(model, path, save_as_external_data=True,
                  location="model.onnx.data")
    session = onnxruntime.InferenceSession(
        path, providers=["CPUExecutionProvider"])
    prompt = json.load(open(args.prompt_json))["prompt"]
    inputs = {i.name: i for i in session.get_inputs()}
    outputs = [o.name for o in session.get_outputs()]
    past = {}
    for name, info in inputs.items():
        if name.startswith("past_key_values"):
            shape = [1, info.shape[1], 0, 32 if not isinstance(
                info.shape[3], int) else info.shape[3]]
            past[name] = np.zeros(shape, np.float32)
    ids = list(prompt)
    step_ids = np.array([prompt], np.int64)
    greedy = []
    for _ in range(args.steps):
        total = len(ids)
        feeds = {"input_ids": step_ids}
        if "attention_mask" in inputs:
            feeds["attention_mask"] = np.ones((1, total), np.int64)
        if "position_ids" in inputs:
            feeds["position_ids"] = np.arange(
                total - step_ids.shape[1], total, dtype=np.int64)[None, :]
        feeds.update(past)
        result = dict(zip(outputs, session.run(None, feeds)))
        token = int(np.argmax(result["logits"][0, -1]))
        greedy.append(token)
        ids.append(token)
        step_ids = np.array([[token]], np.int64)
        for name in past:
            past[name] = result[name.replace("past_key_values", "present")]
    json.dump({"prompt": prompt, "greedy": greedy,
               "made_by": "test/tools/ort_greedy.py (onnxruntime %s%s)" % (
                   onnxruntime.__version__,
                   "" if args.accuracy_level is None else
                   ", MatMulNBits accuracy_level %d" % args.accuracy_level)},
              open(args.out, "w"))
    print(" ".join(map(str, greedy)))


if __name__ == "__main__":
    main()
