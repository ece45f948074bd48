#!/usr/bin/env python3
"""Runs ONNX's own backend node tests through `sitsc --verify`.

The cases come from the installed `onnx` package's generators
(`onnx.backend.test.case.node.<module>`: importing a module runs its
`export*` functions, which build each case's model, inputs and expected
outputs with `onnx.reference`-equivalent numpy code). They are written to a
temporary folder in the suite's own layout (`<case>/model.onnx`,
`<case>/test_data_set_0/{input,output}_N.pb`) and each is checked with

    sitsc <case>/model.onnx --verify=<case>/test_data_set_0
          --verify-stage=<stages> --verify-rtol=R --verify-atol=A

at the suite's tolerances (rtol 1e-3, atol 1e-7 unless a case sets its own).
A case made outside the opsets sits imports (17 to 25) runs at the nearest
of them when each of its operators means the same there (move_opset).

  onnx_node_tests.py --sitsc PATH [--suite transformer|frontend|all]
                     [--op OP ...] [--stages imported,sits] [--jobs N]
                     [--workdir DIR] [--markdown] [--verbose]

A case passes when sitsc exits 0. Cases known to fail are listed in
EXPECTED_FAILURES with the reason and what sitsc then says; the run fails
(exit 1) on any other failure, on a listed case that fails saying something
else, and on a listed case that passes (so that the list stays true).
"""

import argparse
import importlib
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx
from onnx import numpy_helper

# The three ops opset 23 added for transformers.
TRANSFORMER_OPS = ["Attention", "RotaryEmbedding", "RMSNormalization"]

# The other ops the frontend imports (docs/frontend.md, "Supported").
FRONTEND_OPS = [
    "Abs", "Add", "And", "Cast", "CastLike", "Clip", "Concat", "Constant",
    "ConstantOfShape", "Cos", "CumSum", "Div", "Dropout", "Equal", "Erf",
    "Exp", "Expand", "Flatten", "Gather", "GatherND", "Gelu", "Gemm",
    "Greater", "GreaterOrEqual", "Identity", "IsNaN", "LayerNormalization",
    "Less", "LessOrEqual", "Log", "MatMul", "Max", "Min", "Mod", "Mul", "Neg",
    "Not", "Or", "Pad", "Pow", "Range", "Reciprocal", "ReduceMax",
    "ReduceMean", "ReduceSum", "Relu", "Reshape", "Shape", "Sigmoid", "Sin",
    "Size", "Slice", "Softmax", "Split", "Sqrt", "Squeeze", "Sub", "Tanh",
    "Tile", "Transpose", "Trilu", "Unsqueeze", "Where"]

# Cases known to fail: (why, what sitsc's output says, the cases). The
# runner fails on a listed case that passes, on one that fails saying
# something else, and on any failure not listed.
EXPECTED_FAILURES = [
    ("made at an opset sits does not import, with operators whose meaning "
     "differs at the nearest one it does (Mod-28's float fmod = 0, Range-27, "
     "Dropout-10, Sub-13 and Div-13 in Softmax-13's function body)",
     "is not supported; sits supports the default ONNX domain", [
        "test_dropout_default_old", "test_dropout_random_old",
        "test_mod_broadcast", "test_mod_float16_mixed_sign_fmod_0",
        "test_mod_float32_mixed_sign_fmod_0",
        "test_mod_float64_mixed_sign_fmod_0",
        "test_mod_float_edge_cases_fmod_0_float16",
        "test_mod_float_edge_cases_fmod_0_float32",
        "test_mod_float_edge_cases_fmod_0_float64", "test_mod_int64_fmod",
        "test_mod_mixed_sign_float16", "test_mod_mixed_sign_float32",
        "test_mod_mixed_sign_float64", "test_mod_mixed_sign_int16",
        "test_mod_mixed_sign_int32", "test_mod_mixed_sign_int64",
        "test_mod_mixed_sign_int8", "test_mod_uint16", "test_mod_uint32",
        "test_mod_uint64", "test_mod_uint8",
        "test_range_bfloat16_type_positive_delta",
        "test_range_float16_type_positive_delta",
        "test_range_float_type_positive_delta",
        "test_range_int32_type_negative_delta", "test_softmax_axis_0_expanded",
        "test_softmax_axis_1_expanded", "test_softmax_axis_2_expanded",
        "test_softmax_default_axis_expanded", "test_softmax_example_expanded",
        "test_softmax_large_number_expanded",
        "test_softmax_negative_axis_expanded",
    ]),
    ("an element type sits does not import (8-, 6-, 4- and 2-bit floats and "
     "integers, strings)",
     "which sits does not support", [
        "test_cast_FLOAT4E2M1_to_FLOAT", "test_cast_FLOAT4E2M1_to_FLOAT16",
        "test_cast_FLOAT8E4M3FNUZ_to_FLOAT",
        "test_cast_FLOAT8E4M3FNUZ_to_FLOAT16", "test_cast_FLOAT8E4M3FN_to_FLOAT",
        "test_cast_FLOAT8E4M3FN_to_FLOAT16", "test_cast_FLOAT8E5M2FNUZ_to_FLOAT",
        "test_cast_FLOAT8E5M2FNUZ_to_FLOAT16", "test_cast_FLOAT8E5M2_to_FLOAT",
        "test_cast_FLOAT8E5M2_to_FLOAT16", "test_cast_INT2_to_FLOAT",
        "test_cast_INT2_to_FLOAT16", "test_cast_INT2_to_INT8",
        "test_cast_INT4_to_FLOAT", "test_cast_INT4_to_FLOAT16",
        "test_cast_INT4_to_INT8", "test_cast_UINT2_to_FLOAT",
        "test_cast_UINT2_to_FLOAT16", "test_cast_UINT2_to_UINT8",
        "test_cast_UINT4_to_FLOAT", "test_cast_UINT4_to_FLOAT16",
        "test_cast_UINT4_to_UINT8", "test_cast_e8m0_FLOAT8E8M0_to_FLOAT",
        "test_cast_e8m0_FLOAT8E8M0_to_FLOAT16",
        "test_castlike_FLOAT16_to_FLOAT4E2M1",
        "test_castlike_FLOAT16_to_FLOAT4E2M1_expanded",
        "test_castlike_FLOAT16_to_FLOAT8E4M3FN",
        "test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ",
        "test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ_expanded",
        "test_castlike_FLOAT16_to_FLOAT8E4M3FN_expanded",
        "test_castlike_FLOAT16_to_FLOAT8E5M2",
        "test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ",
        "test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ_expanded",
        "test_castlike_FLOAT16_to_FLOAT8E5M2_expanded",
        "test_castlike_FLOAT16_to_INT2",
        "test_castlike_FLOAT16_to_INT2_expanded",
        "test_castlike_FLOAT16_to_INT4",
        "test_castlike_FLOAT16_to_INT4_expanded",
        "test_castlike_FLOAT16_to_UINT2",
        "test_castlike_FLOAT16_to_UINT2_expanded",
        "test_castlike_FLOAT16_to_UINT4",
        "test_castlike_FLOAT16_to_UINT4_expanded",
        "test_castlike_FLOAT4E2M1_to_FLOAT",
        "test_castlike_FLOAT4E2M1_to_FLOAT16",
        "test_castlike_FLOAT4E2M1_to_FLOAT16_expanded",
        "test_castlike_FLOAT4E2M1_to_FLOAT_expanded",
        "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT",
        "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16",
        "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16_expanded",
        "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT_expanded",
        "test_castlike_FLOAT8E4M3FN_to_FLOAT",
        "test_castlike_FLOAT8E4M3FN_to_FLOAT16",
        "test_castlike_FLOAT8E4M3FN_to_FLOAT16_expanded",
        "test_castlike_FLOAT8E4M3FN_to_FLOAT_expanded",
        "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT",
        "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16",
        "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16_expanded",
        "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT_expanded",
        "test_castlike_FLOAT8E5M2_to_FLOAT",
        "test_castlike_FLOAT8E5M2_to_FLOAT16",
        "test_castlike_FLOAT8E5M2_to_FLOAT16_expanded",
        "test_castlike_FLOAT8E5M2_to_FLOAT_expanded",
        "test_castlike_FLOAT_to_FLOAT4E2M1",
        "test_castlike_FLOAT_to_FLOAT4E2M1_expanded",
        "test_castlike_FLOAT_to_FLOAT8E4M3FN",
        "test_castlike_FLOAT_to_FLOAT8E4M3FNUZ",
        "test_castlike_FLOAT_to_FLOAT8E4M3FNUZ_expanded",
        "test_castlike_FLOAT_to_FLOAT8E4M3FN_expanded",
        "test_castlike_FLOAT_to_FLOAT8E5M2",
        "test_castlike_FLOAT_to_FLOAT8E5M2FNUZ",
        "test_castlike_FLOAT_to_FLOAT8E5M2FNUZ_expanded",
        "test_castlike_FLOAT_to_FLOAT8E5M2_expanded",
        "test_castlike_FLOAT_to_INT2", "test_castlike_FLOAT_to_INT2_expanded",
        "test_castlike_FLOAT_to_INT4", "test_castlike_FLOAT_to_INT4_expanded",
        "test_castlike_FLOAT_to_UINT2", "test_castlike_FLOAT_to_UINT2_expanded",
        "test_castlike_FLOAT_to_UINT4", "test_castlike_FLOAT_to_UINT4_expanded",
        "test_castlike_INT2_to_FLOAT", "test_castlike_INT2_to_FLOAT16",
        "test_castlike_INT2_to_FLOAT16_expanded",
        "test_castlike_INT2_to_FLOAT_expanded", "test_castlike_INT2_to_INT8",
        "test_castlike_INT2_to_INT8_expanded", "test_castlike_INT4_to_FLOAT",
        "test_castlike_INT4_to_FLOAT16",
        "test_castlike_INT4_to_FLOAT16_expanded",
        "test_castlike_INT4_to_FLOAT_expanded", "test_castlike_INT4_to_INT8",
        "test_castlike_INT4_to_INT8_expanded", "test_castlike_UINT2_to_FLOAT",
        "test_castlike_UINT2_to_FLOAT16",
        "test_castlike_UINT2_to_FLOAT16_expanded",
        "test_castlike_UINT2_to_FLOAT_expanded", "test_castlike_UINT2_to_UINT8",
        "test_castlike_UINT2_to_UINT8_expanded", "test_castlike_UINT4_to_FLOAT",
        "test_castlike_UINT4_to_FLOAT16",
        "test_castlike_UINT4_to_FLOAT16_expanded",
        "test_castlike_UINT4_to_FLOAT_expanded", "test_castlike_UINT4_to_UINT8",
        "test_castlike_UINT4_to_UINT8_expanded",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ_expanded",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN_expanded",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ_expanded",
        "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2_expanded",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ_expanded",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN_expanded",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ_expanded",
        "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2_expanded",
        "test_equal_string", "test_equal_string_broadcast",
    ]),
    ("a Cast to an element type sits does not import",
     "is not supported", [
        "test_cast_FLOAT16_to_FLOAT4E2M1", "test_cast_FLOAT16_to_FLOAT8E4M3FN",
        "test_cast_FLOAT16_to_FLOAT8E4M3FNUZ", "test_cast_FLOAT16_to_FLOAT8E5M2",
        "test_cast_FLOAT16_to_FLOAT8E5M2FNUZ", "test_cast_FLOAT16_to_INT2",
        "test_cast_FLOAT16_to_INT4", "test_cast_FLOAT16_to_UINT2",
        "test_cast_FLOAT16_to_UINT4", "test_cast_FLOAT_to_FLOAT4E2M1",
        "test_cast_FLOAT_to_FLOAT8E4M3FN", "test_cast_FLOAT_to_FLOAT8E4M3FNUZ",
        "test_cast_FLOAT_to_FLOAT8E5M2", "test_cast_FLOAT_to_FLOAT8E5M2FNUZ",
        "test_cast_FLOAT_to_INT2", "test_cast_FLOAT_to_INT4",
        "test_cast_FLOAT_to_UINT2", "test_cast_FLOAT_to_UINT4",
        "test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FN",
        "test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ",
        "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2",
        "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ",
        "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN",
        "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ",
        "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2",
        "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ",
    ]),
    ("round_mode rounds to FLOAT8E8M0, an element type sits does not import",
     "has unknown attribute 'round_mode'", [
        "test_cast_e8m0_FLOAT16_to_FLOAT8E8M0",
        "test_cast_e8m0_FLOAT_to_FLOAT8E8M0",
    ]),
    ("Range-27's function body uses Ceil, which sits does not import",
     "operator Ceil is not supported", [
        "test_range_bfloat16_type_positive_delta_expanded",
        "test_range_float16_type_positive_delta_expanded",
        "test_range_float_type_positive_delta_expanded",
        "test_range_int32_type_negative_delta_expanded",
    ]),
    ("axes (or Pad's pads/axes) come from a graph input: sits infers every "
     "shape at compile time and needs them known then",
     "must be a constant (or computable from shapes)", [
        "test_constant_pad_axes", "test_constant_pad_negative_axes",
        "test_reduce_max_bool_inputs", "test_reduce_max_do_not_keepdims_example",
        "test_reduce_max_do_not_keepdims_random", "test_reduce_max_empty_set",
        "test_reduce_max_empty_set_bool", "test_reduce_max_keepdims_example",
        "test_reduce_max_keepdims_random",
        "test_reduce_max_negative_axes_keepdims_example",
        "test_reduce_max_negative_axes_keepdims_random",
        "test_reduce_mean_default_axes_keepdims_example",
        "test_reduce_mean_default_axes_keepdims_random",
        "test_reduce_mean_do_not_keepdims_example",
        "test_reduce_mean_do_not_keepdims_random",
        "test_reduce_mean_keepdims_example", "test_reduce_mean_keepdims_random",
        "test_reduce_mean_negative_axes_keepdims_example",
        "test_reduce_mean_negative_axes_keepdims_random",
        "test_reduce_sum_default_axes_keepdims_example",
        "test_reduce_sum_default_axes_keepdims_random",
        "test_reduce_sum_do_not_keepdims_example",
        "test_reduce_sum_do_not_keepdims_random",
        "test_reduce_sum_empty_axes_input_noop",
        "test_reduce_sum_empty_axes_input_noop_example",
        "test_reduce_sum_empty_set",
        "test_reduce_sum_empty_set_non_reduced_axis_zero",
        "test_reduce_sum_keepdims_example", "test_reduce_sum_keepdims_random",
        "test_reduce_sum_negative_axes_keepdims_example",
        "test_reduce_sum_negative_axes_keepdims_random", "test_slice",
        "test_slice_default_steps", "test_slice_end_out_of_bounds",
        "test_slice_neg", "test_slice_neg_steps", "test_slice_negative_axes",
        "test_slice_start_out_of_bounds", "test_squeeze",
        "test_squeeze_negative_axes", "test_unsqueeze_axis_0",
        "test_unsqueeze_axis_1", "test_unsqueeze_axis_2",
        "test_unsqueeze_negative_axes", "test_unsqueeze_three_axes",
        "test_unsqueeze_two_axes", "test_unsqueeze_unsorted_axes",
    ]),
    ("UINT64 data: the reference executor holds integers as i64, which does "
     "not hold every uint64",
     "holds UINT64 elements", [
        "test_add_uint64", "test_div_uint64", "test_equal_uint64",
        "test_greater_equal_uint64", "test_greater_equal_uint64_expanded",
        "test_greater_uint64", "test_less_equal_uint64",
        "test_less_equal_uint64_expanded", "test_less_uint64", "test_max_uint64",
        "test_min_uint64", "test_mul_uint64", "test_pow_types_float32_uint64",
        "test_sub_uint64",
    ]),
    ("Dropout in training mode draws a random mask; sits compiles for "
     "inference",
     "training_mode is true", [
        "test_training_dropout", "test_training_dropout_default",
        "test_training_dropout_default_mask", "test_training_dropout_mask",
        "test_training_dropout_zero_ratio",
        "test_training_dropout_zero_ratio_mask",
    ]),
    ("the data are sequences or optionals, not tensors",
     "the case's data is not tensors", [
        "test_identity_opt", "test_identity_sequence",
    ]),
]


def module_for(op):
    """The generator module's name for `op` (`GreaterOrEqual` is
    `greater_or_equal`, `And` is `and_`, `Range` is `rangeop`)."""
    import onnx.backend.test.case.node as node

    wanted = op.lower()
    for info in pkgutil.iter_modules(node.__path__):
        name = info.name
        if name.replace("_", "") in (wanted, wanted + "op"):
            return name
    return None


def collect(ops):
    """The node test cases of `ops`: (case, op) for every case whose node
    (or, for `_expanded` cases, whose unexpanded case's node) is one of
    them."""
    import onnx.backend.test.case.node as node

    for op in ops:
        name = module_for(op)
        if name is None:
            sys.exit(f"onnx_node_tests.py: onnx {onnx.__version__} has no "
                     f"case generator for {op}")
        importlib.import_module(f"{node.__name__}.{name}")
    cases = list(node._NodeTestCases)
    base_op = {}
    for case in cases:
        graph = case.model.graph
        if len(graph.node) == 1:
            base_op[case.name] = graph.node[0].op_type
    selected = []
    for case in cases:
        base = re.sub(r"_expanded(_ver\d+)?$", "", case.name)
        op = base_op.get(base)
        if op in ops:
            selected.append((case, op))
    return selected


# The default-domain opsets sits imports (frontends/onnx/OnnxLoader.h).
MIN_OPSET, MAX_OPSET = 17, 25


def same_definition(op, made, target):
    """Whether `op` means the same at opsets `made` and `target`: the same
    operator version, or versions that differ only in the element types
    they allow (same inputs, outputs, attributes with their defaults, and
    description)."""
    try:
        a = onnx.defs.get_schema(op, made)
        b = onnx.defs.get_schema(op, target)
    except onnx.defs.SchemaError:
        return False
    if a.since_version == b.since_version:
        return True

    def signature(schema):
        return ([(i.name, i.option) for i in schema.inputs],
                [(o.name, o.option) for o in schema.outputs],
                sorted((name, attr.default_value.SerializeToString())
                       for name, attr in schema.attributes.items()),
                schema.doc)
    return signature(a) == signature(b)


def move_opset(model):
    """The generators make each case at its op's newest version. A case
    made outside MIN_OPSET..MAX_OPSET runs at the nearest of them when every
    operator of its graph means the same there (same_definition): the same
    test of the same operator. Returns the opset the model imports."""
    default = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if len(default) != 1:
        return None
    made = default[0].version
    target = min(max(made, MIN_OPSET), MAX_OPSET)
    if target != made and all(
            node.domain not in ("", "ai.onnx") or
            same_definition(node.op_type, made, target)
            for node in model.graph.node):
        default[0].version = target
    return default[0].version


def tensor_proto(value, name):
    if isinstance(value, onnx.TensorProto):
        return value
    return numpy_helper.from_array(np.asarray(value), name)


def write_case(case, root):
    """Writes `case` as the suite does (cmd_tools.generate_data): the model
    and test_data_set_0 with tensors named after the graph's inputs and
    outputs. Returns the case folder, or None for non-tensor data (maps,
    sequences, optionals), which sitsc does not read."""
    folder = os.path.join(root, case.name)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data)
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    move_opset(model)
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    inputs, outputs = case.data_sets[0]
    graph = case.model.graph
    for prefix, values, infos in (("input", inputs, graph.input),
                                  ("output", outputs, graph.output)):
        for j, value in enumerate(values):
            if not infos[j].type.HasField("tensor_type"):
                return None
            with open(os.path.join(data, f"{prefix}_{j}.pb"), "wb") as f:
                f.write(tensor_proto(value, infos[j].name)
                        .SerializeToString())
    return folder


def run_case(sitsc, folder, stages, rtol, atol, timeout):
    command = [sitsc, os.path.join(folder, "model.onnx"),
               "--verify=" + os.path.join(folder, "test_data_set_0"),
               "--verify-stage=" + stages, f"--verify-rtol={rtol}",
               f"--verify-atol={atol}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout} s"
    return done.returncode == 0, (done.stdout + done.stderr).strip()


def first_error(output):
    """The line that says why a case failed."""
    for line in output.splitlines():
        if "error:" in line or "FAILED" in line:
            return line.strip()
    lines = output.splitlines()
    return lines[-1].strip() if lines else "(no output)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sitsc", required=True)
    parser.add_argument("--suite", default="transformer",
                        choices=["transformer", "frontend", "all"])
    parser.add_argument("--op", action="append", default=[],
                        help="only these ops (repeatable)")
    parser.add_argument("--case", default="",
                        help="only cases whose name matches this regex")
    parser.add_argument("--stages", default="imported,sits")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--workdir", default="",
                        help="write the cases here and keep them")
    parser.add_argument("--markdown", action="store_true",
                        help="print the summary as a markdown table")
    parser.add_argument("--verbose", action="store_true",
                        help="print sitsc's output of every failing case")
    args = parser.parse_args()

    ops = args.op or {"transformer": TRANSFORMER_OPS,
                      "frontend": FRONTEND_OPS,
                      "all": TRANSFORMER_OPS + FRONTEND_OPS}[args.suite]
    start = time.time()
    # The generators print numpy warnings for the cases that overflow on
    # purpose.
    np.seterr(all="ignore")
    cases = collect(ops)
    pattern = re.compile(args.case)
    cases = [(c, op) for c, op in cases if pattern.search(c.name)]

    root = args.workdir or tempfile.mkdtemp(prefix="sits-onnx-node-")
    if args.workdir:
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
    jobs = []
    for case, op in cases:
        folder = write_case(case, root)
        jobs.append((case, op, folder))
    generated = time.time() - start

    def check(job):
        case, op, folder = job
        if folder is None:
            return False, "the case's data is not tensors"
        return run_case(args.sitsc, folder, args.stages, case.rtol,
                        case.atol, args.timeout)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(check, jobs))
    if not args.workdir:
        shutil.rmtree(root, ignore_errors=True)

    expected = {name: (reason, message)
                for reason, message, names in EXPECTED_FAILURES
                for name in names}
    per_op = {}
    unexpected = []
    for (case, op, _), (passed, output) in zip(jobs, results):
        counts = per_op.setdefault(op, [0, 0, 0])
        counts[0 if passed else 1] += 1
        reason, message = expected.get(case.name, (None, None))
        if passed and reason is not None:
            unexpected.append(f"UNEXPECTED PASS {case.name} (listed: "
                              f"{reason})")
        elif not passed and reason is None:
            unexpected.append(f"NEW FAILURE {case.name}: "
                              f"{first_error(output)}")
        elif not passed and message not in output:
            unexpected.append(f"FAILS DIFFERENTLY {case.name} (listed: "
                              f"{reason}): {first_error(output)}")
        elif not passed:
            counts[2] += 1
        if not passed and args.verbose:
            print(f"--- {case.name}\n{output}\n")

    total_pass = sum(c[0] for c in per_op.values())
    print(f"onnx {onnx.__version__} node tests, stages {args.stages}: "
          f"{total_pass} of {len(jobs)} pass ({generated:.0f} s to generate, "
          f"{time.time() - start:.0f} s in all)")
    if args.markdown:
        print("\n| op | cases | pass | fail (expected) |\n|---|---|---|---|")
    for op in ops:
        if op not in per_op:
            continue
        passed, failed, expected = per_op[op]
        if args.markdown:
            print(f"| {op} | {passed + failed} | {passed} | {failed} "
                  f"({expected}) |")
        else:
            print(f"  {op:20s} {passed:4d} pass {failed:4d} fail "
                  f"({expected} expected)")
    for line in unexpected:
        print(line)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
