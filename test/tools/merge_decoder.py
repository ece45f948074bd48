#!/usr/bin/env python3
"""Writes a merged decoder (the form of Optimum's decoder_model_merged.onnx)
from an Optimum decoder with past key/values, for the frontend tests.

  merge_decoder.py WITH_PAST.onnx OUT.onnx

The merge is optimum.onnx.merge_decoders' (optimum-onnx 0.1.0): one node
`If` named `optimum::if` on a new input `use_cache_branch` (bool[1]), its
then_branch the decoder with past, its else_branch the decoder without
past, both returning the same outputs; the large initializers
(deduplicated) in the outer graph, the scalars and 1-D int64/int32 ones in
each branch; opset and IR version 9 as merge_decoders writes them.

optimum-onnx 0.1.0 no longer exports the decoder without past, so the
else_branch is made from the with-past one: each past input is an empty
[batch, kv_heads, 0, head_dim] tensor made inside the branch (what
the first-step decoder computes: no past rows), and Constant nodes of
scalars and 1-D integers become branch initializers in both branches (as
in a dynamo export's decoders, so that the loader's handling of subgraph
initializers is exercised). As merge_decoders does, the inputs both
decoders read are declared as the first-step decoder declares them: the
attention mask [batch_size, sequence_length], as long as the step.
onnxruntime runs the result (either branch).
"""

import copy
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def small(tensor):
    """Kept in the branches by merge_decoders: scalars, 1-D int32/int64."""
    return len(tensor.dims) == 0 or (
        len(tensor.dims) == 1 and tensor.data_type in (TensorProto.INT32,
                                                       TensorProto.INT64))


def constants_to_initializers(graph):
    """Constant nodes of small values as the graph's initializers."""
    nodes = []
    for node in graph.node:
        attrs = {a.name: a for a in node.attribute}
        if node.op_type == "Constant" and set(attrs) == {"value"} and \
                small(attrs["value"].t):
            tensor = copy.deepcopy(attrs["value"].t)
            tensor.name = node.output[0]
            graph.initializer.append(tensor)
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)


def without_past(graph):
    """The first-step decoder: each past input an empty tensor of its
    heads and head_dim, batch from input_ids."""
    graph = copy.deepcopy(graph)
    pasts = [i for i in graph.input if i.name.startswith("past_key_values")]
    nodes = [helper.make_node("Shape", ["input_ids"], ["/no_past/batch"],
                              name="/no_past/Shape", start=0, end=1)]
    for past in pasts:
        dims = past.type.tensor_type.shape.dim
        rest = numpy_helper.from_array(np.array(
            [dims[1].dim_value, 0, dims[3].dim_value], np.int64),
            past.name + "/rest")
        graph.initializer.append(rest)
        nodes.append(helper.make_node(
            "Concat", ["/no_past/batch", rest.name], [past.name + "/dims"],
            name=past.name + "/Concat", axis=0))
        nodes.append(helper.make_node(
            "ConstantOfShape", [past.name + "/dims"], [past.name],
            name=past.name + "/ConstantOfShape",
            value=numpy_helper.from_array(np.zeros(1, np.float32))))
    # The branch reads its own empty tensors (an outer name defined again
    # in a branch would shadow the graph input).
    empty = {p.name: p.name + "/empty" for p in pasts}
    for node in nodes:
        node.output[:] = [empty.get(o, o) for o in node.output]
    # At no past the mask is as long as the step: the first-step decoder
    # declares it [batch, sequence_length], like the ids.
    ids = next(i for i in graph.input if i.name == "input_ids")
    step = ids.type.tensor_type.shape.dim[1]
    for info in graph.input:
        dims = info.type.tensor_type.shape.dim
        if info.type.tensor_type.elem_type == TensorProto.INT64 and \
                len(dims) == 2:
            dims[1].CopyFrom(step)
    rest = list(graph.node)
    for node in rest:
        node.input[:] = [empty.get(i, i) for i in node.input]
    del graph.node[:]
    graph.node.extend(nodes + rest)
    for past in pasts:
        graph.input.remove(past)
    return graph


def merge(with_past):
    decoder = without_past(with_past.graph)
    constants_to_initializers(decoder)
    with_past_graph = copy.deepcopy(with_past.graph)
    constants_to_initializers(with_past_graph)
    # Large initializers: one copy in the outer graph (the same data under
    # the same name in both decoders here).
    outer = [t for t in with_past_graph.initializer if not small(t)]
    branches = []
    for name, graph in (("with_past", with_past_graph),
                        ("no_past", decoder)):
        branches.append(helper.make_graph(
            nodes=graph.node, name=name, inputs=[], outputs=graph.output,
            initializer=[t for t in graph.initializer if small(t)]))
    use_cache_branch = helper.make_tensor_value_info(
        "use_cache_branch", TensorProto.BOOL, [1])
    if_node = helper.make_node(
        "If", ["use_cache_branch"], [o.name for o in decoder.output],
        name="optimum::if", then_branch=branches[0],
        else_branch=branches[1])
    # The inputs as merge_decoders lists them: the first-step decoder's
    # declarations first, so the inputs both read (the mask too) have its
    # dims; then the past inputs.
    inputs = list(decoder.input)
    inputs += [i for i in with_past.graph.input
               if i.name not in {d.name for d in decoder.input}]
    merged = helper.make_graph(
        [if_node], "merged", inputs + [use_cache_branch],
        list(decoder.output), outer)
    model = helper.make_model_gen_version(
        merged, producer_name="optimum-onnx",
        opset_imports=list(with_past.opset_import), ir_version=9)
    onnx.checker.check_model(model)
    return model


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    onnx.save(merge(onnx.load(sys.argv[1])), sys.argv[2])


if __name__ == "__main__":
    main()
