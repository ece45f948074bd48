"""Random cases for the onnx import-dialect ops, checked against onnxruntime.

Each case is one ONNX node: the same node runs in onnxruntime (a one-node
model, CPU provider) and, written as a generic-form `onnx.*` op, in sits-exec.
Attributes keep their ONNX names and types (INT -> i64, FLOAT -> f32, INTS ->
array<i64>, STRING -> string), optional inputs absent in the middle are
omitted (operandSegmentSizes for the ops that have several).
"""

import numpy as np
import onnx
import onnxruntime
from onnx import helper

from reference_common import Case, Expected, dense_literal, f32_literal, tensor_type

OPSET = 23
# Ops with several optional inputs: their ONNX input count.
SEGMENTED = {"Slice": 5, "Clip": 3, "Dropout": 3, "Attention": 7, "Pad": 4}

MLIR_TYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16",
              np.dtype(np.int64): "i64", np.dtype(np.int32): "i32",
              np.dtype(np.bool_): "i1"}


def run_onnxruntime(op, inputs, attrs, num_outputs):
    """Runs one node; `inputs` may hold None for absent optional inputs."""
    names, feeds, infos = [], {}, []
    for i, array in enumerate(inputs):
        if array is None:
            names.append("")
            continue
        name = "in%d" % i
        names.append(name)
        feeds[name] = array
        infos.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape))
    while names and names[-1] == "":
        names.pop()
    outputs = ["out%d" % i for i in range(num_outputs)]
    node = helper.make_node(op, names, outputs, **attrs)
    graph = helper.make_graph(
        [node], "one_node", infos,
        [helper.make_value_info(name, onnx.TypeProto()) for name in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def attribute_text(name, value):
    if isinstance(value, bool) or isinstance(value, (int, np.integer)):
        return "%s = %d : i64" % (name, int(value))
    if isinstance(value, (float, np.floating)):
        return "%s = %s : f32" % (name, f32_literal(value))
    if isinstance(value, str):
        return '%s = "%s"' % (name, value)
    if isinstance(value, onnx.TensorProto):
        array = onnx.numpy_helper.to_array(value)
        element = MLIR_TYPES[array.dtype]
        return "%s = %s : %s" % (name, dense_literal(array, element),
                                 tensor_type(array.shape, element))
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (int, np.integer)) for v in value):
            items = ": " + ", ".join(str(int(v)) for v in value) if value else ""
            return "%s = array<i64%s>" % (name, items)
        return "%s = array<f32: %s>" % (name, ", ".join(f32_literal(v) for v in value))
    raise TypeError(value)


def one_node_case(rng, name, op, inputs, attrs=None, num_outputs=1,
                  rtol=1e-5, atol=1e-6):
    """A case running `op` on `inputs` (None = absent optional input)."""
    attrs = attrs or {}
    inputs = [None if a is None else np.asarray(a) for a in inputs]
    expected = run_onnxruntime(op, inputs, attrs, num_outputs)
    present = [(i, a) for i, a in enumerate(inputs) if a is not None]
    arg_types = [tensor_type(a.shape, MLIR_TYPES[a.dtype]) for _, a in present]
    result_types = []
    for value in expected:
        dynamic = {i for i in range(value.ndim) if rng.random() < 0.25}
        result_types.append(tensor_type(value.shape, MLIR_TYPES[value.dtype], dynamic))
    attr_items = [attribute_text(k, v) for k, v in sorted(attrs.items())]
    if op in SEGMENTED:
        sizes = [1 if i < len(inputs) and inputs[i] is not None else 0
                 for i in range(SEGMENTED[op])]
        attr_items.append("operandSegmentSizes = array<i32: %s>" % ", ".join(map(str, sizes)))
    else:
        last = max(i for i, _ in present) if present else -1
        if any(inputs[i] is None for i in range(last)):
            raise ValueError("absent input in the middle of %s" % op)
    operands = ", ".join("%%a%d" % k for k in range(len(present)))
    attr_text = " {%s}" % ", ".join(attr_items) if attr_items else ""
    results = ", ".join("%%r%d" % i for i in range(len(expected)))
    lines = ["func.func @main(%s) -> (%s) {" % (
                 ", ".join("%%a%d: %s" % (k, t) for k, t in enumerate(arg_types)),
                 ", ".join(result_types)),
             '  %s = "onnx.%s"(%s)%s : (%s) -> (%s)' % (
                 results, op, operands, attr_text, ", ".join(arg_types),
                 ", ".join(result_types)),
             "  return %s : %s" % (results, ", ".join(result_types)),
             "}"]
    checks = []
    for value in expected:
        if value.dtype.kind == "f":
            checks.append(Expected(value.astype(np.float64), "f32", rtol=rtol, atol=atol))
        else:
            checks.append(Expected(value, MLIR_TYPES[value.dtype]))
    return Case(name, "\n".join(lines) + "\n", [a for _, a in present], checks)


def shape_of(rng, rank, low=1, high=6):
    return [int(rng.integers(low, high)) for _ in range(rank)]


def broadcast_partner(rng, shape):
    """A shape that broadcasts with `shape` (dropped leading dims, ones)."""
    rank = int(rng.integers(0, len(shape) + 1))
    return [1 if rng.random() < 0.3 else d for d in shape[len(shape) - rank:]]


def floats(rng, shape, scale=1.0):
    return np.asarray(rng.standard_normal(shape) * scale, dtype=np.float32)


# ---------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------

UNARY = ["Abs", "Cos", "Erf", "Exp", "Log", "Neg", "Reciprocal", "Relu",
         "Sigmoid", "Sin", "Sqrt", "Tanh", "Identity", "IsNaN", "Not", "Gelu"]


def case_unary(rng):
    op = str(rng.choice(UNARY))
    shape = shape_of(rng, int(rng.integers(0, 4)))
    attrs = {}
    if op == "Not":
        x = rng.random(shape) < 0.5
        x = np.asarray(x, dtype=np.bool_)
    elif op in ("Log", "Sqrt"):
        x = (rng.random(shape) * 10 + 0.01).astype(np.float32)
    elif op == "IsNaN":
        x = floats(rng, shape)
        x[rng.random(shape) < 0.3] = np.nan
    elif op in ("Abs", "Neg") and rng.random() < 0.3:
        x = rng.integers(-50, 50, shape).astype(np.int64)
    else:
        x = floats(rng, shape, 3.0)
    if op == "Gelu":
        attrs["approximate"] = str(rng.choice(["none", "tanh"]))
    return one_node_case(rng, "%s %s %s %s" % (op, list(x.shape), x.dtype, attrs),
                         op, [x], attrs, atol=2e-6)


BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "LessOrEqual",
          "Greater", "GreaterOrEqual", "And", "Or"]


def case_binary(rng):
    op = str(rng.choice(BINARY))
    shape = shape_of(rng, int(rng.integers(0, 5)))
    other = broadcast_partner(rng, shape)
    if rng.random() < 0.5:
        shape, other = other, shape
    if op in ("And", "Or"):
        a, b = rng.random(shape) < 0.5, rng.random(other) < 0.5
    elif op == "Pow":
        a = (rng.random(shape) * 3 + 0.1).astype(np.float32)
        b = rng.choice([2.0, 0.5, 3.0, -1.0], other).astype(np.float32)
    elif rng.random() < 0.3:
        a = rng.integers(-20, 20, shape).astype(np.int64)
        b = rng.integers(-20, 20, other).astype(np.int64)
        if op == "Div":
            b[b == 0] = 7
    else:
        a, b = floats(rng, shape), floats(rng, other)
        if op in ("Equal", "LessOrEqual", "GreaterOrEqual"):
            b = np.where(rng.random(other) < 0.3, 0.0, b).astype(np.float32)
            a = np.where(rng.random(shape) < 0.3, 0.0, a).astype(np.float32)
    a, b = np.asarray(a), np.asarray(b)
    return one_node_case(rng, "%s %s %s x %s" % (op, a.dtype, list(a.shape), list(b.shape)),
                         op, [a, b], atol=1e-6)


def case_variadic(rng):
    op = str(rng.choice(["Max", "Min", "Where"]))
    shape = shape_of(rng, int(rng.integers(0, 4)))
    if op == "Where":
        shapes = [broadcast_partner(rng, shape) for _ in range(2)] + [shape]
        rng.shuffle(shapes)
        use_int = rng.random() < 0.3
        cond = rng.random(shapes[0]) < 0.5
        make = (lambda s: rng.integers(-9, 9, s).astype(np.int64)) if use_int else (lambda s: floats(rng, s))
        inputs = [np.asarray(cond), np.asarray(make(shapes[1])), np.asarray(make(shapes[2]))]
    else:
        count = int(rng.integers(1, 4))
        use_int = rng.random() < 0.3
        shapes = [shape] + [broadcast_partner(rng, shape) for _ in range(count - 1)]
        rng.shuffle(shapes)
        inputs = [np.asarray(rng.integers(-9, 9, s).astype(np.int64) if use_int else floats(rng, s))
                  for s in shapes]
    return one_node_case(rng, "%s %s" % (op, [list(a.shape) for a in inputs]), op, inputs)


def case_cast(rng):
    types = {"f32": (np.float32, 1), "f16": (np.float16, 10), "i64": (np.int64, 7),
             "i32": (np.int32, 6), "i1": (np.bool_, 9)}
    source, target = rng.choice(list(types), 2)
    shape = shape_of(rng, int(rng.integers(0, 4)))
    if source in ("f32", "f16"):
        x = np.asarray(rng.standard_normal(shape) * 40, dtype=types[source][0])
        x[rng.random(shape) < 0.2] = 0
    elif source == "i1":
        x = rng.random(shape) < 0.5
    else:
        x = rng.integers(-3000, 3000, shape).astype(types[source][0])
    x = np.asarray(x)
    return one_node_case(rng, "Cast %s -> %s %s" % (source, target, shape), "Cast", [x],
                         {"to": types[target][1]})


def case_clip_cumsum(rng):
    shape = shape_of(rng, int(rng.integers(1, 4)))
    x = floats(rng, shape, 3.0)
    if rng.random() < 0.5:
        low = np.array(rng.uniform(-2, 0), dtype=np.float32) if rng.random() < 0.8 else None
        high = np.array(rng.uniform(0, 2), dtype=np.float32) if rng.random() < 0.8 else None
        return one_node_case(rng, "Clip %s min=%s max=%s" % (shape, low, high), "Clip", [x, low, high])
    axis = int(rng.integers(-len(shape), len(shape)))
    attrs = {"exclusive": int(rng.integers(0, 2)), "reverse": int(rng.integers(0, 2))}
    if rng.random() < 0.4:
        x = rng.integers(-5, 5, shape).astype(np.int64)
    return one_node_case(rng, "CumSum %s axis=%d %s" % (shape, axis, attrs), "CumSum",
                         [x, np.array(axis, dtype=np.int64)], attrs, atol=1e-5)


def case_reduce(rng):
    op = str(rng.choice(["ReduceMean", "ReduceSum", "ReduceMax"]))
    rank = int(rng.integers(1, 5))
    shape = shape_of(rng, rank)
    x = floats(rng, shape) if rng.random() < 0.8 or op == "ReduceMean" else \
        rng.integers(-9, 9, shape).astype(np.int64)
    attrs = {"keepdims": int(rng.integers(0, 2))}
    axes = None
    if rng.random() < 0.8:
        count = int(rng.integers(1, rank + 1))
        chosen = rng.choice(rank, count, replace=False)
        axes = np.array([int(a) - (rank if rng.random() < 0.5 else 0) for a in chosen], dtype=np.int64)
    elif rng.random() < 0.5:
        attrs["noop_with_empty_axes"] = 1
    return one_node_case(rng, "%s %s axes=%s %s" % (op, shape, axes, attrs), op, [x, axes], attrs,
                         atol=2e-6)


def case_softmax(rng):
    rank = int(rng.integers(1, 5))
    shape = shape_of(rng, rank)
    x = floats(rng, shape, 4.0)
    axis = int(rng.integers(-rank, rank))
    return one_node_case(rng, "Softmax %s axis=%d" % (shape, axis), "Softmax", [x], {"axis": axis})


# ---------------------------------------------------------------------------
# Shapes and data movement
# ---------------------------------------------------------------------------

def case_shape_ops(rng):
    op = str(rng.choice(["Shape", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                         "Expand", "Tile", "Transpose"]))
    rank = int(rng.integers(1, 5))
    shape = shape_of(rng, rank)
    x = floats(rng, shape) if rng.random() < 0.7 else rng.integers(-9, 9, shape).astype(np.int64)
    attrs, inputs = {}, [x]
    if op == "Shape":
        if rng.random() < 0.5:
            attrs["start"] = int(rng.integers(-rank - 1, rank + 1))
        if rng.random() < 0.5:
            attrs["end"] = int(rng.integers(-rank - 1, rank + 1))
    elif op == "Reshape":
        target = [int(d) for d in rng.permutation(shape)]
        choice = rng.random()
        if choice < 0.4:
            target[int(rng.integers(0, len(target)))] = -1
        elif choice < 0.7:
            # 0 copies the input's dimension.
            target = [0] + ([int(np.prod(shape[1:]))] if rank > 1 else [])
        inputs.append(np.array(target, dtype=np.int64))
    elif op == "Flatten":
        attrs["axis"] = int(rng.integers(-rank, rank + 1))
    elif op == "Squeeze":
        shape = [1 if rng.random() < 0.4 else d for d in shape]
        x = floats(rng, shape)
        inputs = [x]
        ones = [i for i, d in enumerate(shape) if d == 1]
        if ones and rng.random() < 0.7:
            inputs.append(np.array([i - rank if rng.random() < 0.5 else i for i in ones[:2]], dtype=np.int64))
    elif op == "Unsqueeze":
        out_rank = rank + int(rng.integers(1, 3))
        axes = rng.choice(out_rank, out_rank - rank, replace=False)
        inputs.append(np.array([int(a) - (out_rank if rng.random() < 0.5 else 0) for a in axes], dtype=np.int64))
    elif op == "Expand":
        shape = [1 if rng.random() < 0.5 else d for d in shape]
        x = floats(rng, shape)
        target = [int(rng.integers(2, 4)) if d == 1 and rng.random() < 0.7 else d for d in shape]
        if rng.random() < 0.4:
            target = [int(rng.integers(1, 3))] + target
        if rng.random() < 0.3:
            target = [1] * len(target)
        inputs = [x, np.array(target, dtype=np.int64)]
    elif op == "Tile":
        inputs.append(rng.integers(1, 3, rank).astype(np.int64))
    elif op == "Transpose":
        if rng.random() < 0.8:
            attrs["perm"] = [int(p) for p in rng.permutation(rank)]
    return one_node_case(rng, "%s %s %s %s" % (op, shape, [list(np.asarray(a).reshape(-1)) for a in inputs[1:]], attrs),
                         op, inputs, attrs)


def case_concat_split(rng):
    rank = int(rng.integers(1, 4))
    shape = shape_of(rng, rank)
    axis = int(rng.integers(-rank, rank))
    if rng.random() < 0.5:
        parts = []
        for _ in range(int(rng.integers(1, 4))):
            s = list(shape)
            s[axis] = int(rng.integers(0, 4))
            parts.append(floats(rng, s))
        return one_node_case(rng, "Concat %s axis=%d" % ([list(p.shape) for p in parts], axis),
                             "Concat", parts, {"axis": axis})
    x = floats(rng, shape)
    length = shape[axis]
    if rng.random() < 0.5:
        count = int(rng.integers(1, length + 1))
        cuts = sorted(rng.choice(np.arange(1, length), count - 1, replace=False)) if count > 1 else []
        sizes = np.diff([0] + [int(c) for c in cuts] + [length]).astype(np.int64)
        return one_node_case(rng, "Split %s axis=%d split=%s" % (shape, axis, list(sizes)), "Split",
                             [x, sizes], {"axis": axis}, num_outputs=len(sizes))
    # Parts of ceil(length / count), the last one smaller but not negative.
    counts = [c for c in range(1, length + 1) if length - -(-length // c) * (c - 1) >= 0]
    count = int(rng.choice(counts))
    return one_node_case(rng, "Split %s axis=%d num_outputs=%d" % (shape, axis, count), "Split",
                         [x], {"axis": axis, "num_outputs": count}, num_outputs=count)


def case_slice(rng):
    rank = int(rng.integers(1, 5))
    shape = shape_of(rng, rank, 1, 8)
    x = floats(rng, shape)
    count = int(rng.integers(1, rank + 1))
    axes = [int(a) for a in rng.choice(rank, count, replace=False)]
    starts, ends, steps = [], [], []
    big = 2 ** 63 - 1
    for axis in axes:
        dim = shape[axis]
        step = int(rng.choice([1, 1, 2, 3, -1, -2]))
        candidates = [int(rng.integers(-dim - 2, dim + 3)), 0, -1, big, -big - 1]
        starts.append(int(rng.choice(candidates)))
        # onnxruntime reads end = INT64_MAX with a negative step as "to the
        # front", unlike the ONNX reference (which clamps it to dim - 1, an
        # empty slice); the executor follows the reference, so leave it out.
        ends.append(int(rng.choice(candidates if step > 0 else candidates[:3] + [-big - 1])))
        steps.append(step)
    use_axes = rng.random() < 0.7 or axes != list(range(count))
    use_steps = rng.random() < 0.7 or any(s != 1 for s in steps)
    axes_values = [a - rank if rng.random() < 0.4 else a for a in axes]
    inputs = [x, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64),
              np.array(axes_values, dtype=np.int64) if use_axes else None,
              np.array(steps, dtype=np.int64) if use_steps else None]
    return one_node_case(rng, "Slice %s starts=%s ends=%s axes=%s steps=%s" % (
        shape, starts, ends, axes_values if use_axes else None, steps if use_steps else None),
        "Slice", inputs)


def case_gather(rng):
    rank = int(rng.integers(1, 4))
    shape = shape_of(rng, rank)
    x = floats(rng, shape) if rng.random() < 0.7 else rng.integers(-9, 9, shape).astype(np.int64)
    if rng.random() < 0.6:
        axis = int(rng.integers(-rank, rank))
        dim = shape[axis]
        indices = rng.integers(-dim, dim, shape_of(rng, int(rng.integers(0, 3)))).astype(np.int64)
        return one_node_case(rng, "Gather %s axis=%d indices=%s" % (shape, axis, list(indices.shape)),
                             "Gather", [x, indices], {"axis": axis})
    batch_dims = int(rng.integers(0, rank)) if rank > 1 else 0
    tuple_len = int(rng.integers(1, rank - batch_dims + 1))
    outer = shape_of(rng, int(rng.integers(0, 2)))
    index_shape = shape[:batch_dims] + outer + [tuple_len]
    indices = np.stack([rng.integers(-shape[batch_dims + k], shape[batch_dims + k], index_shape[:-1])
                        for k in range(tuple_len)], axis=-1).astype(np.int64)
    return one_node_case(rng, "GatherND %s indices=%s batch_dims=%d" % (shape, list(indices.shape), batch_dims),
                         "GatherND", [x, indices], {"batch_dims": batch_dims})


def case_generators(rng):
    op = str(rng.choice(["Range", "ConstantOfShape", "Trilu"]))
    if op == "Range":
        if rng.random() < 0.5:
            start, limit = int(rng.integers(-10, 10)), int(rng.integers(-10, 10))
            delta = int(rng.choice([1, 2, 3, -1, -2]))
            inputs = [np.array(v, dtype=np.int64) for v in (start, limit, delta)]
        else:
            start, limit = rng.uniform(-5, 5), rng.uniform(-5, 5)
            delta = float(rng.choice([0.5, 1.25, -0.75, -1.0]))
            inputs = [np.array(v, dtype=np.float32) for v in (start, limit, delta)]
        return one_node_case(rng, "Range %s" % [float(i) for i in inputs], op, inputs)
    if op == "ConstantOfShape":
        shape = np.array(shape_of(rng, int(rng.integers(0, 4)), 0, 4), dtype=np.int64)
        attrs = {}
        choice = rng.random()
        if choice < 0.4:
            attrs["value"] = helper.make_tensor("value", onnx.TensorProto.FLOAT, [1], [float(rng.uniform(-3, 3))])
        elif choice < 0.7:
            attrs["value"] = helper.make_tensor("value", onnx.TensorProto.INT64, [1], [int(rng.integers(-9, 9))])
        return one_node_case(rng, "ConstantOfShape %s %s" % (list(shape), list(attrs)), op, [shape], attrs)
    shape = shape_of(rng, int(rng.integers(2, 4)))
    x = floats(rng, shape)
    k = np.array(int(rng.integers(-4, 5)), dtype=np.int64) if rng.random() < 0.7 else None
    attrs = {"upper": int(rng.integers(0, 2))}
    return one_node_case(rng, "Trilu %s k=%s %s" % (shape, k, attrs), op, [x, k], attrs)


# ---------------------------------------------------------------------------
# MatMul, norms, RoPE, attention
# ---------------------------------------------------------------------------

def case_matmul(rng):
    if rng.random() < 0.25:
        m, k, n = (int(v) for v in rng.integers(1, 20, 3))
        trans_a, trans_b = int(rng.integers(0, 2)), int(rng.integers(0, 2))
        a = floats(rng, (k, m) if trans_a else (m, k))
        b = floats(rng, (n, k) if trans_b else (k, n))
        c = floats(rng, [[m, n], [n], [1, n], [m, 1], []][int(rng.integers(0, 5))]) if rng.random() < 0.7 else None
        attrs = {"transA": trans_a, "transB": trans_b,
                 "alpha": float(np.float32(rng.uniform(0.5, 2))), "beta": float(np.float32(rng.uniform(0.5, 2)))}
        return one_node_case(rng, "Gemm m=%d k=%d n=%d %s C=%s" % (m, k, n, attrs, None if c is None else c.shape),
                             "Gemm", [a, b, c], attrs, atol=1e-5)
    k = int(rng.integers(1, 100))
    m, n = int(rng.integers(1, 9)), int(rng.integers(1, 40))
    batch = shape_of(rng, int(rng.integers(0, 3)), 1, 4)
    shape_a = [1 if rng.random() < 0.3 else d for d in batch] + [m, k]
    shape_b = broadcast_partner(rng, batch) + [k, n]
    if rng.random() < 0.15:
        shape_a = [k]
    elif rng.random() < 0.15:
        shape_b = [k]
    a, b = floats(rng, shape_a), floats(rng, shape_b)
    return one_node_case(rng, "MatMul %s x %s" % (shape_a, shape_b), "MatMul", [a, b], atol=2e-5)


def case_norms(rng):
    rank = int(rng.integers(1, 4))
    shape = shape_of(rng, rank - 1) + [int(rng.integers(2, 70))]
    x = floats(rng, shape, 2.0) + np.float32(rng.choice([0.0, 2.0]))
    axis = int(rng.choice([-1, -1, -rank])) if rank > 1 else -1
    norm_shape = shape[axis:]
    scale_shape = norm_shape if rng.random() < 0.7 else [norm_shape[-1]]
    scale = floats(rng, scale_shape)
    epsilon = float(np.float32(rng.choice([1e-5, 1e-6, 0.01])))
    if rng.random() < 0.5:
        return one_node_case(rng, "RMSNormalization %s axis=%d scale=%s" % (shape, axis, scale_shape),
                             "RMSNormalization", [x, scale], {"axis": axis, "epsilon": epsilon}, atol=1e-5)
    bias = floats(rng, scale_shape) if rng.random() < 0.6 else None
    outputs = int(rng.integers(1, 4))
    return one_node_case(rng, "LayerNormalization %s axis=%d bias=%s outputs=%d" % (
        shape, axis, bias is not None, outputs), "LayerNormalization", [x, scale, bias],
        {"axis": axis, "epsilon": epsilon}, num_outputs=outputs, atol=1e-5)


def case_rotary(rng):
    batch, heads, seq = int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 7))
    head_dim = 2 * int(rng.integers(1, 9))
    rotary_dim = 2 * int(rng.integers(1, head_dim // 2 + 1)) if rng.random() < 0.5 else 0
    half = (rotary_dim or head_dim) // 2
    packed = rng.random() < 0.4
    x = floats(rng, (batch, seq, heads * head_dim) if packed else (batch, heads, seq, head_dim))
    attrs = {"interleaved": int(rng.integers(0, 2))}
    if rotary_dim:
        attrs["rotary_embedding_dim"] = rotary_dim
    if packed:
        attrs["num_heads"] = heads
    if rng.random() < 0.5:
        max_position = int(rng.integers(seq, seq + 20))
        angle = rng.uniform(-6, 6, (max_position, half))
        positions = rng.integers(0, max_position, (batch, seq)).astype(np.int64)
        inputs = [x, np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32), positions]
    else:
        angle = rng.uniform(-6, 6, (batch, seq, half))
        inputs = [x, np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)]
    return one_node_case(rng, "RotaryEmbedding x=%s positions=%s %s" % (list(x.shape), len(inputs) == 4, attrs),
                         "RotaryEmbedding", inputs, attrs)


HEAD_PAIRS = [(4, 4), (4, 2), (4, 1), (6, 3), (8, 2), (2, 1)]


def case_attention(rng):
    heads, kv_heads = HEAD_PAIRS[int(rng.integers(0, len(HEAD_PAIRS)))]
    batch, seq_q = int(rng.integers(1, 4)), int(rng.integers(1, 7))
    head_dim = int(rng.choice([4, 8, 16]))
    past = int(rng.integers(1, 5)) if rng.random() < 0.35 else 0
    seq_kv = seq_q if past or rng.random() < 0.6 else int(rng.integers(1, 8))
    total = past + seq_kv
    packed = rng.random() < 0.3
    attrs = {}
    if packed:
        q = floats(rng, (batch, seq_q, heads * head_dim))
        k = floats(rng, (batch, seq_kv, kv_heads * head_dim))
        v = floats(rng, (batch, seq_kv, kv_heads * head_dim))
        attrs.update(q_num_heads=heads, kv_num_heads=kv_heads)
    else:
        q = floats(rng, (batch, heads, seq_q, head_dim))
        k = floats(rng, (batch, kv_heads, seq_kv, head_dim))
        v = floats(rng, (batch, kv_heads, seq_kv, head_dim))
    if rng.random() < 0.5:
        attrs["is_causal"] = 1
    if rng.random() < 0.3:
        attrs["scale"] = float(np.float32(rng.uniform(0.1, 0.5)))
    if rng.random() < 0.2:
        attrs["softcap"] = float(np.float32(rng.choice([5.0, 20.0])))
    mask = None
    if rng.random() < 0.6:
        full = [batch, heads, seq_q, total]
        rank = int(rng.integers(2, 5))
        shape = [d if rng.random() < 0.6 else 1 for d in full[4 - rank:]]
        # onnxruntime wants the query dimension spelled out.
        shape[-1], shape[-2] = total, seq_q
        mask = rng.random(shape) < 0.8 if rng.random() < 0.5 else \
            np.where(rng.random(shape) < 0.15, -np.inf, rng.standard_normal(shape)).astype(np.float32)
    past_key = floats(rng, (batch, kv_heads, past, head_dim)) if past else None
    past_value = floats(rng, (batch, kv_heads, past, head_dim)) if past else None
    # onnxruntime wants present_key/present_value whenever a past is given.
    outputs = 3 if past or rng.random() < 0.3 else 1
    return one_node_case(rng, "Attention q=%s k=%s past=%d mask=%s %s outputs=%d" % (
        list(q.shape), list(k.shape), past, None if mask is None else (mask.dtype.name, list(mask.shape)),
        attrs, outputs), "Attention", [q, k, v, mask, past_key, past_value], attrs,
        num_outputs=outputs, atol=2e-6)


GENERATORS = {
    "unary": case_unary,
    "binary": case_binary,
    "variadic": case_variadic,
    "cast": case_cast,
    "clip_cumsum": case_clip_cumsum,
    "reduce": case_reduce,
    "softmax": case_softmax,
    "shape_ops": case_shape_ops,
    "concat_split": case_concat_split,
    "slice": case_slice,
    "gather": case_gather,
    "generators": case_generators,
    "matmul": case_matmul,
    "norms": case_norms,
    "rotary": case_rotary,
    "attention": case_attention,
}

# onnxruntime is the oracle in f32 and integer types only.
FAMILIES = {name: (lambda generator: lambda rng, dtype: generator(rng))(generator)
            for name, generator in GENERATORS.items()}
