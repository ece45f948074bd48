#!/usr/bin/env python3
"""The ONNX export of a deep Llama-shaped model, made from the export of
its two-layer twin (test tooling for bench/llama_bench.py; no torch here).

torch.onnx.export(..., dynamo=True) spends time in proportion to the bytes
of the weights: the TinyLlama shape (2.2 GB) took 76 to 108 s on the H200
host and the Llama-3-8B shape (16 GB) more than 330 s, more than a device
call can spend. The graph of a decoder is the graph of one layer repeated,
so the bench exports a twin of the model (the same config with 2 layers and
a small vocabulary, its weights made distinct so that the exporter's
optimizer merges none of them) and this module grows that graph to the real
depth and fills in the real model's weights:

  * nodes belong to layer N when their `pkg.torch.onnx.name_scopes`
    metadata names a `*.layers.N` module; the twin's layer 1 is the template
    (layer 0 also holds what the exporter computed once for every layer: the
    RoPE tables, shapes, masks);
  * layer 1's inputs from layer 0 are either shared values (they depend on
    no parameter) or the residual stream (exactly one); copy L of layer 1
    reads copy L - 1's stream, and the nodes after the layers read the last
    copy's;
  * each initializer is matched by content to the twin's parameter it holds
    (as it is, or transposed, as the exporter folds the linears' weights);
    the initializers of layer 1 get a copy per layer, and every matched
    initializer is written from the real model's parameter of the same name
    (`layers.1.` renamed to `layers.L.` in the copies);
  * every other initializer and node is kept as the exporter wrote it, and
    the dims of the twin's vocabulary become the real one's.

Anything that does not fit this picture is an error that says what, never a
silently different graph. The result is saved with all weights in one
external data file, each at a 4096-byte boundary.
"""

import hashlib
import os
import re

import numpy as np
import onnx
from onnx import helper, numpy_helper

LAYER_SCOPE = re.compile(r"\.layers\.(\d+)$")
ALIGNMENT = 4096


class GraftError(Exception):
    pass


def layer_of(node):
    """The layer index a node was exported from, or None (outside layers)."""
    for prop in node.metadata_props:
        if prop.key != "pkg.torch.onnx.name_scopes":
            continue
        for scope in re.findall(r"'([^']*)'", prop.value):
            match = LAYER_SCOPE.search(scope)
            if match:
                return int(match.group(1))
        return None
    return None


def digest(array):
    return hashlib.blake2b(np.ascontiguousarray(array).tobytes(),
                           digest_size=16).hexdigest()


def match_parameters(initializers, twin_params):
    """initializer name -> (parameter name, transposed) for each float
    initializer that holds a twin parameter. twin_params: name -> array in
    the export's dtype, distinct values."""
    by_digest = {}
    for name, array in twin_params.items():
        key = (array.dtype.str, array.shape, digest(array))
        if key in by_digest:
            raise GraftError("twin parameters %s and %s hold the same values; "
                             "make them distinct before the export"
                             % (by_digest[key][0], name))
        by_digest[key] = (name, False)
        if array.ndim == 2:
            t = array.T
            by_digest.setdefault((t.dtype.str, t.shape, digest(t)),
                                 (name, True))
    matched = {}
    for init in initializers:
        if init.data_type not in (onnx.TensorProto.FLOAT,
                                  onnx.TensorProto.FLOAT16,
                                  onnx.TensorProto.BFLOAT16):
            continue
        array = numpy_helper.to_array(init)
        hit = by_digest.get((array.dtype.str, array.shape, digest(array)))
        if hit:
            matched[init.name] = hit
    missing = set(twin_params) - {p for p, _ in matched.values()}
    if missing:
        raise GraftError("parameters not found among the initializers: %s"
                         % ", ".join(sorted(missing)))
    return matched


def rename_layer(param, layer):
    renamed, count = re.subn(r"\.layers\.1\.", ".layers.%d." % layer, param)
    if count != 1:
        raise GraftError("parameter %s is not one of layer 1" % param)
    return renamed


def graft(twin, twin_params, layers, twin_vocab, vocab):
    """Returns (model, sources): the twin grown to `layers` layers, and for
    each initializer to fill from the real model, name -> (parameter,
    transposed, numpy dtype, shape). Initializers not in `sources` keep
    their data (they must be inline, not external)."""
    graph = twin.graph
    if layers < 2:
        raise GraftError("the graft makes 2 or more layers, not %d" % layers)
    node_layers = [layer_of(node) for node in graph.node]
    if sorted(set(l for l in node_layers if l is not None)) != [0, 1]:
        raise GraftError("the twin must have exactly layers 0 and 1 (found "
                         "%s)" % sorted(set(node_layers) - {None}))
    producer = {}
    for index, node in enumerate(graph.node):
        for out in node.output:
            producer[out] = index
    for name, array in twin_params.items():
        if twin_vocab in array.shape and not re.search(
                r"(embed_tokens|lm_head)\.weight$", name):
            raise GraftError("the twin's vocabulary size %d is also a dim of "
                             "%s; choose another" % (twin_vocab, name))
    matched = match_parameters(graph.initializer, twin_params)
    param_inits = set(matched)

    # Which values depend on a parameter (the residual stream does; RoPE
    # tables, shapes and masks do not).
    depends = set()
    for node in graph.node:
        if any(x in param_inits or x in depends for x in node.input):
            depends.update(node.output)

    block = [i for i, l in enumerate(node_layers) if l == 1]
    produced = {out for i in block for out in graph.node[i].output}
    stream_in = set()
    block_inits = set()
    for i in block:
        for x in graph.node[i].input:
            if x in produced or not x:
                continue
            if x in producer and node_layers[producer[x]] == 0 and \
                    x in depends:
                stream_in.add(x)
            elif x in param_inits:
                block_inits.add(x)
    if len(stream_in) != 1:
        raise GraftError("layer 1 reads %d parameter-dependent values of "
                         "layer 0 (%s); expected the residual stream alone"
                         % (len(stream_in), ", ".join(sorted(stream_in))))
    stream_in = stream_in.pop()
    outside_users = {}
    for index, node in enumerate(graph.node):
        if node_layers[index] == 1:
            continue
        for x in node.input:
            if x in produced:
                if index < block[-1]:
                    raise GraftError("node %s outside layer 1 reads %s of "
                                     "layer 1 before the layer ends"
                                     % (node.name, x))
                outside_users.setdefault(x, []).append(node.name)
    outputs_read = set(outside_users) | \
        {o.name for o in graph.output if o.name in produced}
    if len(outputs_read) != 1:
        raise GraftError("after layer 1 the graph reads %d of its values "
                         "(%s); expected the residual stream alone"
                         % (len(outputs_read), ", ".join(sorted(outputs_read))))
    stream_out = outputs_read.pop()
    for init in block_inits:
        users = [node_layers[i] for i, node in enumerate(graph.node)
                 if init in node.input]
        if any(l != 1 for l in users):
            raise GraftError("parameter initializer %s is read outside "
                             "layer 1" % init)

    def copy_name(name, layer):
        return "%s__layer%d" % (name, layer)

    # Layer copies 2 .. layers-1.
    copies = []
    new_inits = []
    for layer in range(2, layers):
        previous = stream_out if layer == 2 else \
            copy_name(stream_out, layer - 1)
        for i in block:
            node = onnx.NodeProto()
            node.CopyFrom(graph.node[i])
            node.name = copy_name(node.name, layer)
            for k, x in enumerate(node.input):
                if x == stream_in:
                    node.input[k] = previous
                elif x in produced or x in block_inits:
                    node.input[k] = copy_name(x, layer)
            for k, x in enumerate(node.output):
                node.output[k] = copy_name(x, layer)
            copies.append(node)
    last_stream = stream_out if layers == 2 else \
        copy_name(stream_out, layers - 1)

    nodes = []
    for index, original in enumerate(graph.node):
        node = onnx.NodeProto()
        node.CopyFrom(original)
        if index > block[-1]:
            for k, x in enumerate(node.input):
                if x == stream_out:
                    node.input[k] = last_stream
        nodes.append(node)
        if index == block[-1]:
            nodes.extend(copies)
    del graph.node[:]
    graph.node.extend(nodes)
    for out in graph.output:
        if out.name == stream_out:
            out.name = last_stream

    # Initializers: the real model's parameters, and layer 1's copied.
    sources = {}
    by_name = {init.name: init for init in graph.initializer}
    for name, (param, transposed) in matched.items():
        init = by_name[name]
        dtype = numpy_helper.to_array(init).dtype
        shape = tuple(init.dims)
        if init.data_type not in (onnx.TensorProto.FLOAT16,
                                  onnx.TensorProto.FLOAT):
            raise GraftError("initializer %s: only f16 and f32 weights are "
                             "written" % name)
        sources[name] = (param, transposed, dtype, shape)
        if name in block_inits:
            for layer in range(2, layers):
                copy = onnx.TensorProto()
                copy.CopyFrom(init)
                copy.name = copy_name(name, layer)
                new_inits.append(copy)
                sources[copy.name] = (rename_layer(param, layer), transposed,
                                      dtype, shape)
    graph.initializer.extend(new_inits)

    # Shapes: the vocabulary's dims, and value_info of the copies.
    for init in graph.initializer:
        if init.name in sources or init.data_type not in (
                onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            continue
        if twin_vocab in numpy_helper.to_array(init).reshape(-1).tolist():
            raise GraftError("integer constant %s holds the twin's "
                             "vocabulary size %d" % (init.name, twin_vocab))
    value_infos = list(graph.value_info)
    for info in value_infos:
        if info.name in produced or info.name in block_inits:
            for layer in range(2, layers):
                copy = onnx.ValueInfoProto()
                copy.CopyFrom(info)
                copy.name = copy_name(info.name, layer)
                graph.value_info.append(copy)
    for info in list(graph.value_info) + list(graph.output) + \
            list(graph.input):
        for dim in info.type.tensor_type.shape.dim:
            if dim.HasField("dim_value") and dim.dim_value == twin_vocab:
                dim.dim_value = vocab
    for init in graph.initializer:
        if init.name in sources:
            param, transposed, dtype, shape = sources[init.name]
            dims = [vocab if d == twin_vocab else d for d in shape]
            sources[init.name] = (param, transposed, dtype, tuple(dims))
    return twin, sources


def from_arrays(fetch):
    """A fetch for save() from fetch(parameter) -> numpy array in the
    parameter's layout (transposed and cast here, on the CPU)."""
    def layout(param, transposed, dtype):
        array = np.asarray(fetch(param))
        return np.ascontiguousarray(array.T if transposed else array,
                                    dtype=dtype)
    return layout


def save(model, sources, fetch, folder, name="model.onnx"):
    """Writes `model` to folder/name with the weights of `sources`, each
    fetched as fetch(parameter, transposed, numpy dtype) -> a contiguous
    numpy array in the initializer's layout (from_arrays makes one from
    arrays), in one external data file; returns the bytes written."""
    os.makedirs(folder, exist_ok=True)
    data_name = name + ".data"
    data_path = os.path.join(folder, data_name)
    offset = 0
    with open(data_path, "wb") as data:
        for init in model.graph.initializer:
            if init.name not in sources:
                if init.data_location == onnx.TensorProto.EXTERNAL:
                    raise GraftError("initializer %s is external but not a "
                                     "parameter" % init.name)
                continue
            param, transposed, dtype, shape = sources[init.name]
            array = fetch(param, transposed, dtype)
            if tuple(array.shape) != tuple(shape) or array.dtype != dtype:
                raise GraftError("parameter %s came as %s %s, initializer %s "
                                 "needs %s %s" % (param, array.dtype,
                                                  array.shape, init.name,
                                                  np.dtype(dtype), shape))
            padding = (-offset) % ALIGNMENT
            data.write(b"\0" * padding)
            offset += padding
            raw = array.tobytes()
            data.write(raw)
            del init.dims[:]
            init.dims.extend(shape)
            init.ClearField("raw_data")
            init.ClearField("float_data")
            init.ClearField("int32_data")
            del init.external_data[:]
            init.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", data_name),
                               ("offset", str(offset)),
                               ("length", str(len(raw)))):
                entry = init.external_data.add()
                entry.key, entry.value = key, value
            offset += len(raw)
    onnx.save(model, os.path.join(folder, name))
    return offset
