#!/usr/bin/env python3
"""Checks that an engine's weights are its ONNX model's initializers, bit for
bit, in the engine's storage type.

    check_engine_weights.py MODEL.onnx ENGINE.sits

Reads the engine file itself (header, section table, the plan's buffer
table, the weights section; docs/engine-format.md) and, for every weight
buffer named after an initializer, compares its bytes with the
initializer's values: transposed when a MatMul reads the initializer as its
[in, out] weight (sits.linear stores [out, in]), converted to the buffer's
type (f32, f16, or bf16, rounded to nearest even). Prints how many weights
and bytes it checked; exits 1 naming the first weight that differs.
"""

import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper

F32, F16, BF16 = 0, 1, 2
WEIGHT_ROLE = 0
PLAN, WEIGHTS = 3, 4


class Reader:
    def __init__(self, data, offset=0):
        self.data, self.at = data, offset

    def take(self, fmt):
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def string(self):
        n = self.take("I")
        text = self.data[self.at:self.at + n].decode()
        self.at += n
        return text


def read_engine(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89SITS\r\n\x1a":
        sys.exit("%s: not a sits engine" % path)
    count = struct.unpack_from("<I", data, 24)[0]
    table = struct.unpack_from("<Q", data, 40)[0]
    sections = {}
    for i in range(count):
        kind, _, offset, size, _ = struct.unpack_from(
            "<IIQQQ", data, table + 32 * i)
        sections[kind] = (offset, size)
    plan = Reader(data, sections[PLAN][0])
    buffers = []
    for _ in range(plan.take("I")):
        name = plan.string()
        role, dtype, offset, size, rank = plan.take("IIQQI")
        dims = [plan.take("Q") for _ in range(rank)]
        buffers.append((name, role, dtype, offset, size, dims))
    start, size = sections[WEIGHTS]
    return buffers, data[start:start + size]


def to_bfloat16_bits(values):
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def stored_bytes(values, dtype):
    if dtype == F32:
        return values.astype(np.float32).tobytes()
    if dtype == F16:
        return values.astype(np.float16).tobytes()
    if dtype == BF16:
        return to_bfloat16_bits(values).tobytes()
    return None


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model = onnx.load(sys.argv[1])
    initializers = {t.name: t for t in model.graph.initializer}
    matmul_weights = {node.input[1] for node in model.graph.node
                      if node.op_type == "MatMul"}
    buffers, section = read_engine(sys.argv[2])
    checked = transposed = checked_bytes = 0
    for name, role, dtype, offset, size, dims in buffers:
        if role != WEIGHT_ROLE or name not in initializers:
            continue
        values = numpy_helper.to_array(initializers[name])
        if name in matmul_weights:
            values = values.T
            transposed += 1
        expected = stored_bytes(np.ascontiguousarray(values), dtype)
        if expected is None:
            continue
        if list(values.shape) != dims:
            sys.exit("weight '%s': engine shape %s, model %s" % (
                name, dims, list(values.shape)))
        actual = section[offset:offset + size]
        if actual != expected:
            first = next(i for i in range(min(len(actual), len(expected)))
                         if actual[i] != expected[i])
            sys.exit("weight '%s': bytes differ from the model's (first at "
                     "byte %d of %d)" % (name, first, size))
        checked += 1
        checked_bytes += size
    print("checked %d weights (%d transposed), %d bytes" % (
        checked, transposed, checked_bytes))


if __name__ == "__main__":
    main()
