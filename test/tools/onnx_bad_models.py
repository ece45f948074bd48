#!/usr/bin/env python3
"""Writes a malformed ONNX model (or tensor file) into a folder, for the
negative loading tests of the ONNX frontend.

  onnx_bad_models.py CASE DIR

creates DIR (emptied first) holding `model.onnx` and whatever files the case
needs (external data, symlinks, hard links, files outside the model's folder
at DIR/../outside-*). Malformed tensors are built as raw protobuf messages,
so that the onnx helpers' own checks do not get in the way. `list` prints
the cases.
"""

import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def graph_with_weight(weight, extra_nodes=(), outputs=None):
    """y = x + w, with `w` the initializer given."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="node_add")]
    nodes += list(extra_nodes)
    return helper.make_graph(nodes, "g", [x], outputs or [y], [weight])


def model(graph, opset=20, **kwargs):
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], **kwargs)


def raw_weight(dims, data, dtype=TensorProto.FLOAT, name="w"):
    tensor = TensorProto()
    tensor.name = name
    tensor.data_type = dtype
    tensor.dims.extend(dims)
    tensor.raw_data = data
    return tensor


def external_weight(location, offset=None, length=None, dims=(4,),
                    extra=()):
    tensor = TensorProto()
    tensor.name = "w"
    tensor.data_type = TensorProto.FLOAT
    tensor.dims.extend(dims)
    tensor.data_location = TensorProto.EXTERNAL
    entries = [("location", location)]
    if offset is not None:
        entries.append(("offset", str(offset)))
    if length is not None:
        entries.append(("length", str(length)))
    entries += list(extra)
    for key, value in entries:
        entry = tensor.external_data.add()
        entry.key = key
        entry.value = value
    return tensor


FOUR_FLOATS = np.arange(4, dtype=np.float32).tobytes()


def save(directory, graph_or_model, **kwargs):
    m = graph_or_model
    if isinstance(m, onnx.GraphProto):
        m = model(m, **kwargs)
    with open(os.path.join(directory, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())


def outside(directory, name, data=FOUR_FLOATS):
    """A file next to the model's folder, which no location may reach."""
    path = os.path.join(os.path.dirname(os.path.abspath(directory)),
                        os.path.basename(directory) + "-outside-" + name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def write(directory, name, data=FOUR_FLOATS):
    path = os.path.join(directory, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


# --- external data -------------------------------------------------------


def case_external_ok(d):
    write(d, "weights.bin", b"\0" * 16 + FOUR_FLOATS)
    save(d, graph_with_weight(external_weight("weights.bin", 16, 16)))


def case_external_absolute(d):
    path = outside(d, "abs.bin")
    save(d, graph_with_weight(external_weight(path, 0, 16)))


def case_external_dotdot(d):
    path = outside(d, "dotdot.bin")
    save(d, graph_with_weight(
        external_weight("sub/../../" + os.path.basename(path), 0, 16)))


def case_external_symlink(d):
    path = outside(d, "symlink.bin")
    os.symlink(path, os.path.join(d, "weights.bin"))
    save(d, graph_with_weight(external_weight("weights.bin", 0, 16)))


def case_external_symlink_dir(d):
    target = os.path.dirname(outside(d, "dir.bin"))
    os.symlink(target, os.path.join(d, "sub"))
    name = os.path.basename(d) + "-outside-dir.bin"
    save(d, graph_with_weight(external_weight("sub/" + name, 0, 16)))


def case_external_hardlink(d):
    path = outside(d, "hardlink.bin")
    os.link(path, os.path.join(d, "weights.bin"))
    save(d, graph_with_weight(external_weight("weights.bin", 0, 16)))


def case_external_past_end(d):
    write(d, "weights.bin", FOUR_FLOATS)
    save(d, graph_with_weight(external_weight("weights.bin", 8, 16)))


def case_external_offset_past_end(d):
    write(d, "weights.bin", FOUR_FLOATS)
    save(d, graph_with_weight(external_weight("weights.bin", 100)))


def case_external_offset_overflow(d):
    write(d, "weights.bin", FOUR_FLOATS)
    save(d, graph_with_weight(
        external_weight("weights.bin", 8, 2**63 - 1)))


def case_external_length_mismatch(d):
    write(d, "weights.bin", FOUR_FLOATS + FOUR_FLOATS)
    save(d, graph_with_weight(external_weight("weights.bin", 0, 20)))


def case_external_missing(d):
    save(d, graph_with_weight(external_weight("missing.bin", 0, 16)))


def case_external_bad_offset(d):
    write(d, "weights.bin", FOUR_FLOATS)
    save(d, graph_with_weight(
        external_weight("weights.bin", extra=[("offset", "-16")])))


def case_external_unknown_key(d):
    write(d, "weights.bin", FOUR_FLOATS)
    save(d, graph_with_weight(
        external_weight("weights.bin", extra=[("basepath", "/")])))


# --- tensors ---------------------------------------------------------------


def case_negative_dim(d):
    save(d, graph_with_weight(raw_weight([-1, 4], FOUR_FLOATS)))


def case_overflow_dims(d):
    save(d, graph_with_weight(raw_weight([2**40, 2**40, 2**40], b"")))


def case_overflow_bytes(d):
    save(d, graph_with_weight(raw_weight([2**31, 2**31], b"")))


def case_raw_size_mismatch(d):
    save(d, graph_with_weight(raw_weight([4], FOUR_FLOATS[:10])))


def case_typed_count_mismatch(d):
    tensor = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    tensor.dims[0] = 4
    save(d, graph_with_weight(tensor))


def case_no_data(d):
    tensor = TensorProto()
    tensor.name = "w"
    tensor.data_type = TensorProto.FLOAT
    tensor.dims.extend([4])
    save(d, graph_with_weight(tensor))


def case_string_tensor(d):
    save(d, graph_with_weight(
        helper.make_tensor("w", TensorProto.STRING, [1], [b"a"])))


def case_bool_not_bit(d):
    x = helper.make_tensor_value_info("x", TensorProto.BOOL, [2])
    y = helper.make_tensor_value_info("y", TensorProto.BOOL, [2])
    node = helper.make_node("And", ["x", "w"], ["y"], name="node_and")
    save(d, helper.make_graph([node], "g", [x], [y],
                              [raw_weight([2], b"\x01\x02", TensorProto.BOOL)]))


def case_duplicate_initializer(d):
    graph = graph_with_weight(raw_weight([4], FOUR_FLOATS))
    graph.initializer.append(raw_weight([4], FOUR_FLOATS))
    save(d, graph)


def case_duplicate_output(d):
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    save(d, graph_with_weight(raw_weight([4], FOUR_FLOATS), outputs=[y, y]))


def case_not_decoder(d):
    """A valid model that is not a decoder: y = x + w, no token ids."""
    save(d, graph_with_weight(raw_weight([4], FOUR_FLOATS)))


# --- opsets and operators -------------------------------------------------


def case_opset_26(d):
    save(d, graph_with_weight(raw_weight([4], FOUR_FLOATS)), opset=26)


def case_opset_16(d):
    save(d, graph_with_weight(raw_weight([4], FOUR_FLOATS)), opset=16)


def case_no_opset_import(d):
    m = model(graph_with_weight(raw_weight([4], FOUR_FLOATS)))
    del m.opset_import[:]
    save(d, m)


def case_unknown_domain(d):
    extra = helper.make_node("FusedMatMul", ["x", "w"], ["z"],
                             name="node_fused", domain="com.microsoft")
    m = helper.make_model(
        graph_with_weight(raw_weight([4], FOUR_FLOATS), [extra]),
        opset_imports=[helper.make_opsetid("", 20),
                       helper.make_opsetid("com.microsoft", 1)])
    save(d, m)


def case_unsupported_ops(d):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Einsum", ["x", "x"], ["a"], name="node_einsum",
                         equation="bi,bi->bi"),
        helper.make_node("Relu", ["a"], ["b"], name="node_relu_after"),
        helper.make_node("HardSwish", ["x"], ["c"], name="node_hardswish"),
        helper.make_node("Sqrt", ["x"], ["s"], name="node_sqrt"),
        helper.make_node("Round", ["s"], ["y"], name="node_round"),
    ]
    save(d, helper.make_graph(nodes, "g", [x], [y]))


def case_attention_opset20(d):
    q = helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Attention", ["q", "q", "q"], ["y"],
                            name="node_attention")
    save(d, helper.make_graph([node], "g", [q], [y]))


def case_attention_window_opset24(d):
    # The window sizes came with Attention-25, nonpad_kv_seqlen with -24.
    q = helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Attention", ["q", "q", "q"], ["y"],
                            name="node_window", left_window_size=2)
    save(d, helper.make_graph([node], "g", [q], [y]), opset=24)


def case_attention_nonpad_opset23(d):
    q = helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 2, 3, 4])
    n = helper.make_tensor_value_info("n", TensorProto.INT64, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Attention", ["q", "q", "q", "", "", "", "n"],
                            ["y"], name="node_nonpad")
    save(d, helper.make_graph([node], "g", [q, n], [y]), opset=23)


def case_float_mod(d):
    # Float Mod needs fmod = 1 (Python's % is for integers, before Mod-28).
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Mod", ["x", "x"], ["y"], name="node_mod")
    save(d, helper.make_graph([node], "g", [x], [y]))


def case_missing_attribute(d):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Concat", ["x", "x"], ["y"], name="node_concat")
    save(d, helper.make_graph([node], "g", [x], [y]))


def case_wrong_attribute_kind(d):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Softmax", ["x"], ["y"], name="node_softmax",
                            axis=1.5)
    save(d, helper.make_graph([node], "g", [x], [y]))


def case_undefined_input(d):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Add", ["x", "nowhere"], ["y"], name="node_add")
    save(d, helper.make_graph([node], "g", [x], [y]))


def case_cycle(d):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="node_a"),
             helper.make_node("Relu", ["a"], ["b"], name="node_b"),
             helper.make_node("Relu", ["a"], ["y"], name="node_y")]
    save(d, helper.make_graph(nodes, "g", [x], [y]))


def case_shape_error(d):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 128])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Add", ["x", "w"], ["y"], name="node_bad_add")
    w = raw_weight([64], np.zeros(64, np.float32).tobytes())
    save(d, helper.make_graph([node], "g", [x], [y], [w]))


def case_value_info_contradiction(d):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    node = helper.make_node("Relu", ["x"], ["y"], name="node_relu")
    save(d, helper.make_graph([node], "g", [x], [y]))


def case_input_without_shape(d):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Relu", ["x"], ["y"], name="node_relu")
    save(d, helper.make_graph([node], "g", [x], [y]))


# --- files -----------------------------------------------------------------


def valid_bytes():
    return model(graph_with_weight(raw_weight([4], FOUR_FLOATS))) \
        .SerializeToString()


def case_truncated(d):
    data = valid_bytes()
    write(d, "model.onnx", data[: len(data) // 2])


def case_garbage(d):
    write(d, "model.onnx", b"\xff\xff\xff\xff this is not a protobuf" * 4)


def case_text_file(d):
    write(d, "model.onnx", b"<\n  ir_version: 8\n>\nagraph () => () {}\n")


def case_empty(d):
    write(d, "model.onnx", b"")


def case_no_graph(d):
    m = onnx.ModelProto()
    m.ir_version = 8
    m.opset_import.add().version = 20
    write(d, "model.onnx", m.SerializeToString())


def case_directory(d):
    os.makedirs(os.path.join(d, "model.onnx"))


CASES = {name[len("case_"):].replace("_", "-"): fn
         for name, fn in sorted(globals().items()) if name.startswith("case_")}


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "list":
        print("\n".join(CASES))
        return 0
    if len(sys.argv) != 3 or sys.argv[1] not in CASES:
        sys.stderr.write("usage: onnx_bad_models.py CASE DIR (cases: %s)\n"
                         % ", ".join(CASES))
        return 2
    directory = sys.argv[2]
    shutil.rmtree(directory, ignore_errors=True)
    parent = os.path.dirname(os.path.abspath(directory))
    for name in os.listdir(parent) if os.path.isdir(parent) else []:
        if name.startswith(os.path.basename(directory) + "-outside-"):
            os.remove(os.path.join(parent, name))
    os.makedirs(directory)
    CASES[sys.argv[1]](directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
