#!/usr/bin/env python3
"""Rewrites an Optimum decoder with past key/values so that it computes
its position_ids from attention_mask inside the graph (the input goes),
for the frontend tests of positions computed from the mask.

  positions_from_mask.py CASE WITH_PAST.onnx OUT.onnx
  positions_from_mask.py check-padding MODEL.onnx

CASE is one of:
  hf-where   Hugging Face's rule as TorchScript exports it:
             cumsum(mask, -1) - 1, Where(mask == 0, 1, .), Slice of the
             last seq columns (starts -seq, ends INT64_MAX)
  hf-mul     the same with Add(., -1), the padding zeroed by Mul with the
             mask cast to int32, the Slice ending at the mask's length
  exclusive  an exclusive cumsum (no -1): not the rule
  minus-two  cumsum - 2: not the rule
  no-slice   no Slice: [batch, past + seq] positions, not the step's
  head-slice the first seq columns: not the step's tokens

check-padding runs onnxruntime on MODEL (no position_ids input) with a
left-padded batch of two prompts, a prefill and two decode steps, and
checks that each real token's logits are those of its prompt run alone,
unpadded, which is what the engine runs (it prints the largest
difference, and exits 1 above 1e-4).
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INT64_MAX = np.iinfo(np.int64).max


def rewrite(case, path, out):
    model = onnx.load(path)
    graph = model.graph
    graph.input.remove(next(i for i in graph.input
                            if i.name == "position_ids"))
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, output, name, **kw):
        nodes.append(helper.make_node(op, inputs, [output], name=name, **kw))
        return output

    mask = "attention_mask"
    c = node("CumSum", [mask, const("/pos/axis", np.array(-1, np.int64))],
             "/pos/cumsum", "/model/pos/CumSum",
             exclusive=int(case == "exclusive"))
    if case == "exclusive":
        p = c
    elif case == "hf-mul":
        p = node("Add", [c, const("/pos/minus_one", np.array(-1, np.int64))],
                 "/pos/minus_one_out", "/model/pos/Add")
    else:
        one = 2 if case == "minus-two" else 1
        p = node("Sub", [c, const("/pos/one", np.array(one, np.int64))],
                 "/pos/sub", "/model/pos/Sub")
    if case == "hf-mul":
        m32 = node("Cast", [mask], "/pos/mask32", "/model/pos/Cast",
                   to=TensorProto.INT32)
        m64 = node("Cast", [m32], "/pos/mask64", "/model/pos/Cast_1",
                   to=TensorProto.INT64)
        p = node("Mul", [p, m64], "/pos/masked", "/model/pos/Mul")
    else:
        eq = node("Equal", [mask, const("/pos/zero", np.array(0, np.int64))],
                  "/pos/is_pad", "/model/pos/Equal")
        p = node("Where", [eq, const("/pos/fill", np.array(1, np.int64)), p],
                 "/pos/masked", "/model/pos/Where")
    seq = node("Shape", ["input_ids"], "/pos/seq", "/model/pos/Shape",
               start=1, end=2)
    if case == "no-slice":
        node("Identity", [p], "position_ids", "/model/pos/Identity")
    elif case == "head-slice":
        node("Slice", [p, const("/pos/zero1", np.array([0], np.int64)), seq,
                       const("/pos/axes", np.array([1], np.int64))],
             "position_ids", "/model/pos/Slice")
    else:
        start = node("Neg", [seq], "/pos/start", "/model/pos/Neg")
        if case == "hf-mul":
            end = node("Shape", [mask], "/pos/total", "/model/pos/Shape_1",
                       start=1, end=2)
        else:
            end = const("/pos/end", np.array([INT64_MAX], np.int64))
        node("Slice", [p, start, end,
                       const("/pos/axes", np.array([-1 if case == "hf-mul"
                                                    else 1], np.int64)),
                       const("/pos/steps", np.array([1], np.int64))],
             "position_ids", "/model/pos/Slice")
    rest = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + rest)
    graph.initializer.extend(inits)
    onnx.checker.check_model(model)
    onnx.save(model, out)


def check_padding(path):
    import onnxruntime
    session = onnxruntime.InferenceSession(
        path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    pasts = [i for i in session.get_inputs()
             if i.name.startswith("past_key_values")]
    prompts = [[5, 17, 46, 33, 61, 12, 54, 40, 9, 44, 27, 30],
               [44, 9, 40, 54, 12, 61, 33]]
    steps = [[7, 3], [11, 60]]

    def run(ids, mask, past):
        feeds = {"input_ids": np.array(ids, np.int64),
                 "attention_mask": np.array(mask, np.int64)}
        for info in pasts:
            feeds[info.name] = past.get(info.name, np.zeros(
                (len(ids), info.shape[1], 0, info.shape[3]), np.float32))
        result = dict(zip(names, session.run(None, feeds)))
        past = {i.name: result[i.name.replace("past_key_values", "present")]
                for i in pasts}
        return result["logits"], past

    # Each prompt alone, unpadded: the prefill's logits, then a step each.
    alone = []
    for b, prompt in enumerate(prompts):
        logits, past = run([prompt], [[1] * len(prompt)], {})
        outs = [logits[0]]
        total = len(prompt)
        for step in steps:
            total += 1
            logits, past = run([[step[b]]], [[1] * total], past)
            outs.append(logits[0])
        alone.append(outs)
    # Both, left-padded to the longer one (pad id 0).
    width = max(map(len, prompts))
    ids = [[0] * (width - len(p)) + p for p in prompts]
    mask = [[0] * (width - len(p)) + [1] * len(p) for p in prompts]
    logits, past = run(ids, mask, {})
    worst = 0.0
    for b, prompt in enumerate(prompts):
        worst = max(worst, float(np.abs(
            logits[b, width - len(prompt):] - alone[b][0]).max()))
    for s, step in enumerate(steps):
        mask = [row + [1] for row in mask]
        logits, past = run([[t] for t in step], mask, past)
        for b in range(len(prompts)):
            worst = max(worst, float(np.abs(
                logits[b] - alone[b][s + 1]).max()))
    print("left-padded batch vs each prompt unpadded: max abs diff %.3g"
          % worst)
    return 0 if worst <= 1e-4 else 1


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "check-padding":
        return check_padding(sys.argv[2])
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    rewrite(*sys.argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
