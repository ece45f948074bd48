"""Shared pieces of the reference-executor checks (reference_check.py).

A Case is one randomly drawn program: MLIR text, .npy inputs, and the
expected results computed independently (numpy in float64, or onnxruntime).
run_case() runs it through sits-exec and compares, returning a list of
failure descriptions (empty when every result matches).
"""

import dataclasses
import os
import subprocess

import numpy as np

# MLIR spelling of the float element types the cases use.
FLOAT_TYPES = ("f32", "f16", "bf16")


def round_bf16(values):
    """Rounds float values to bf16 (nearest, ties to even), kept as float32."""
    x = np.asarray(values, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    rounded = bits.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, rounded)


def to_dtype(values, dtype):
    """Rounds float64 values to a float element type, as numpy storage."""
    if dtype == "f32":
        return np.asarray(values, dtype=np.float32)
    if dtype == "f16":
        return np.asarray(values, dtype=np.float16)
    if dtype == "bf16":
        return round_bf16(np.asarray(values, dtype=np.float32))
    raise ValueError(dtype)


def ulp(values, dtype):
    """Spacing of the float type `dtype` at |values| (float64)."""
    a = np.abs(np.asarray(values, dtype=np.float64))
    a = np.where(np.isfinite(a), a, 0.0)
    if dtype == "f32":
        return np.spacing(a.astype(np.float32)).astype(np.float64)
    if dtype == "f16":
        return np.spacing(np.minimum(a, 65504).astype(np.float16)).astype(
            np.float64)
    if dtype == "bf16":
        _, exponent = np.frexp(np.maximum(a, 2.0 ** -126))
        return np.ldexp(1.0, exponent - 8)
    raise ValueError(dtype)


def tensor_type(shape, element, dynamic=()):
    """tensor<2x?x4xf32>; dims whose index is in `dynamic` print as ?."""
    dims = ["?" if i in dynamic else str(d) for i, d in enumerate(shape)]
    return "tensor<" + "".join(d + "x" for d in dims) + element + ">"


def f32_literal(value):
    """A decimal that parses back to exactly float32(value)."""
    return "%.9e" % float(np.float32(value))


def dense_literal(array, element):
    """dense<...> text of an array (float values printed exactly)."""
    flat = np.asarray(array).reshape(-1)
    if element.startswith("f") or element == "bf16":
        items = [f32_literal(v) for v in flat.astype(np.float32)]
    elif element == "i1":
        items = ["true" if v else "false" for v in flat]
    else:
        items = [str(int(v)) for v in flat]
    text = nest(items, list(np.asarray(array).shape))
    return "dense<" + text + ">"


def nest(items, shape):
    if not shape:
        return items[0]
    if len(shape) == 1:
        return "[" + ", ".join(items) + "]"
    step = len(items) // shape[0] if shape[0] else 0
    return "[" + ", ".join(
        nest(items[i * step:(i + 1) * step], shape[1:])
        for i in range(shape[0])) + "]"


def storage(values, element):
    """The .npy array for an argument of MLIR element type `element`."""
    if element == "f32":
        return np.asarray(values, dtype=np.float32)
    if element == "f16":
        return np.asarray(values, dtype=np.float16)
    if element == "bf16":
        return round_bf16(values)  # sits-exec reads bf16 arguments as f32
    if element == "i64":
        return np.asarray(values, dtype=np.int64)
    if element == "i32":
        return np.asarray(values, dtype=np.int32)
    if element == "i1":
        return np.asarray(values, dtype=np.bool_)
    raise ValueError(element)


@dataclasses.dataclass
class Expected:
    """One expected result. `dtype` is its element type (f32/f16/bf16 or an
    integer/bool type, compared exactly). A float result matches when
    |actual - value| <= atol + rtol * |value| + ulps * ulp(dtype); NaN
    matches NaN."""
    value: np.ndarray
    dtype: str = "f32"
    rtol: float = 1e-5
    atol: float = 1e-6
    ulps: float = 0.0


@dataclasses.dataclass
class Case:
    name: str
    mlir: str
    inputs: list
    expected: list
    function: str = "main"
    allow_unregistered: bool = False


def float_expected(value, dtype, atol=1e-6, rtol=1e-5):
    """Expected float result: in f32 a relative and absolute tolerance; in
    f16/bf16 the same plus one unit in the last place of the type (the
    executor computes in f32 and rounds once, the check in float64)."""
    value = np.asarray(value, dtype=np.float64)
    if dtype == "f32":
        return Expected(value, "f32", rtol=rtol, atol=atol)
    rounded = to_dtype(value, dtype).astype(np.float64)
    return Expected(rounded, dtype, rtol=rtol, atol=atol, ulps=1.0)


def compare(actual, expected, label):
    """None when `actual` matches, else a description of the mismatch."""
    if tuple(actual.shape) != tuple(expected.value.shape):
        return "%s: shape %s, expected %s" % (label, tuple(actual.shape),
                                              tuple(expected.value.shape))
    want = expected.value
    if expected.dtype not in FLOAT_TYPES:
        if actual.dtype.kind == "f":
            return "%s: float result, expected %s" % (label, expected.dtype)
        bad = np.asarray(actual).astype(np.int64) != want.astype(np.int64)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            return "%s: %d of %d elements differ; first at %s: %s, expected %s" % (
                label, int(bad.sum()), bad.size, index, actual[index], want[index])
        return None
    got = np.asarray(actual, dtype=np.float64)
    if expected.dtype != "f32":
        # Every f16/bf16 result must be rounded to its type.
        rounded = to_dtype(got, expected.dtype).astype(np.float64)
        unrounded = ~np.isnan(got) & (rounded != got)
        if unrounded.any():
            index = tuple(int(i) for i in np.argwhere(unrounded)[0])
            return "%s: %d values are not %s numbers; first at %s: %r" % (
                label, int(unrounded.sum()), expected.dtype, index,
                float(got[index]))
    nan_mismatch = np.isnan(got) != np.isnan(want)
    both = ~np.isnan(got) & ~np.isnan(want)
    error = np.where(both, np.abs(got - want), 0.0)
    # Equal infinities have no error.
    error = np.where(both & (got == want), 0.0, error)
    bound = expected.atol + expected.rtol * np.abs(want)
    if expected.ulps:
        bound = bound + expected.ulps * np.maximum(
            ulp(want, expected.dtype), ulp(got, expected.dtype))
    bad = nan_mismatch | (error > bound)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        relative = error / np.maximum(np.abs(want), 1e-30)
        return ("%s: %d of %d elements off; max abs error %.3g, max rel "
                "error %.3g; first at %s: %r, expected %r (bound %.3g)") % (
                    label, int(bad.sum()), bad.size, float(error.max()),
                    float(relative[both].max()) if both.any() else 0.0, index,
                    float(got[index]), float(want[index]),
                    float(np.broadcast_to(bound, want.shape)[index]))
    return None


def run_case(case, sits_exec, workdir, index):
    """Runs one case; returns a list of failure messages."""
    folder = os.path.join(workdir, "case_%03d" % index)
    os.makedirs(folder, exist_ok=True)
    mlir_path = os.path.join(folder, "program.mlir")
    with open(mlir_path, "w") as f:
        f.write(case.mlir)
    command = [sits_exec, mlir_path, "--function", case.function,
               "--output-dir", os.path.join(folder, "out")]
    if case.allow_unregistered:
        command.append("--allow-unregistered-dialect")
    for i, array in enumerate(case.inputs):
        path = os.path.join(folder, "input_%d.npy" % i)
        np.save(path, array)
        command += ["--input", path]
    process = subprocess.run(command, capture_output=True, text=True,
                             timeout=120)
    if process.returncode != 0:
        return ["sits-exec failed (exit %d) on %s:\n%s" %
                (process.returncode, mlir_path, process.stderr.strip())]
    failures = []
    for i, expected in enumerate(case.expected):
        path = os.path.join(folder, "out", "result_%d.npy" % i)
        if not os.path.exists(path):
            failures.append("result %d missing (%s)" % (i, path))
            continue
        problem = compare(np.load(path), expected, "result %d" % i)
        if problem:
            failures.append(problem + "\n  program: " + mlir_path)
    return failures
