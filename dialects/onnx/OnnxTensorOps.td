//===- OnnxTensorOps.td - Shape and data-movement ops ------*- tablegen -*-===//

#ifndef SITS_DIALECT_ONNX_ONNXTENSOROPS_TD
#define SITS_DIALECT_ONNX_ONNXTENSOROPS_TD

include "dialects/onnx/OnnxBase.td"

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Onnx_ConstantOp : Onnx_Op<"Constant", [ConstantLike]> {
  let summary = "a constant tensor given by one of its value attributes";
  let description = [{
    ONNX `Constant`. Exactly one of `value`, `value_float`, `value_floats`,
    `value_int` and `value_ints` is set (the string and sparse forms are not
    supported). `getValueAsElements()` returns the value as a tensor of the
    result type whichever attribute holds it.
  }];
  let arguments = (ins OptionalAttr<ElementsAttr>:$value,
                       OptionalAttr<F32Attr>:$value_float,
                       OptionalAttr<DenseF32ArrayAttr>:$value_floats,
                       OptionalAttr<I64Attr>:$value_int,
                       OptionalAttr<DenseI64ArrayAttr>:$value_ints);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = "attr-dict `:` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// The value as an elements attribute of the result type, whichever
    /// attribute holds it; null when the op is malformed.
    ::mlir::ElementsAttr getValueAsElements();
  }];
}

def Onnx_ConstantOfShapeOp : Onnx_Op<"ConstantOfShape"> {
  let summary = "a tensor of the shape given by an int64 tensor, filled";
  let description = [{
    ONNX `ConstantOfShape`: every element is the single element of `value`
    (a float 0 when absent).
  }];
  let arguments = (ins AnyTensor:$input, OptionalAttr<ElementsAttr>:$value);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def Onnx_RangeOp : Onnx_Op<"Range"> {
  let summary = "start, start + delta, ... up to limit (exclusive)";
  let arguments = (ins AnyTensor:$start, AnyTensor:$limit, AnyTensor:$delta);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

def Onnx_ShapeOp : Onnx_Op<"Shape"> {
  let summary = "the dims of the input, from start to end, as int64";
  let arguments = (ins AnyTensor:$data,
                       DefaultValuedAttr<I64Attr, "0">:$start,
                       OptionalAttr<I64Attr>:$end);
  let results = (outs AnyTensor:$shape);
  let hasVerifier = 1;
}

def Onnx_SizeOp : Onnx_Op<"Size"> {
  let summary = "the input's number of elements, as an int64 scalar";
  let arguments = (ins AnyTensor:$data);
  let results = (outs AnyTensor:$size);
}

def Onnx_ReshapeOp : Onnx_Op<"Reshape"> {
  let summary = "the input with another shape";
  let description = [{
    ONNX `Reshape`: a `0` in `shape` copies the input's dim (unless
    `allowzero`), one `-1` takes the remaining size.
  }];
  let arguments = (ins AnyTensor:$data, AnyTensor:$shape,
                       DefaultValuedAttr<I64Attr, "0">:$allowzero);
  let results = (outs AnyTensor:$reshaped);
  let hasVerifier = 1;
}

def Onnx_FlattenOp : Onnx_Op<"Flatten"> {
  let summary = "2-D view: dims before axis, dims from axis";
  let arguments = (ins AnyTensor:$input,
                       DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def Onnx_SqueezeOp : Onnx_Op<"Squeeze"> {
  let summary = "remove dims of size 1 (those in axes, or all)";
  let arguments = (ins AnyTensor:$data, Optional<AnyTensor>:$axes);
  let results = (outs AnyTensor:$squeezed);
  let hasVerifier = 1;
}

def Onnx_UnsqueezeOp : Onnx_Op<"Unsqueeze"> {
  let summary = "insert dims of size 1 at axes (of the result)";
  let arguments = (ins AnyTensor:$data, AnyTensor:$axes);
  let results = (outs AnyTensor:$expanded);
  let hasVerifier = 1;
}

def Onnx_ExpandOp : Onnx_Op<"Expand"> {
  let summary = "broadcast the input to a shape (numpy rules, both ways)";
  let arguments = (ins AnyTensor:$input, AnyTensor:$shape);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def Onnx_TileOp : Onnx_Op<"Tile"> {
  let summary = "repeat the input along each axis";
  let arguments = (ins AnyTensor:$input, AnyTensor:$repeats);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def Onnx_TransposeOp : Onnx_Op<"Transpose"> {
  let summary = "permute the dims (reverse them when perm is absent)";
  let arguments = (ins AnyTensor:$data, OptionalAttr<DenseI64ArrayAttr>:$perm);
  let results = (outs AnyTensor:$transposed);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// `perm`, or the reversal of the input's dims when it is absent; empty
    /// for an unranked input without `perm`.
    ::llvm::SmallVector<int64_t> getPermutation();
  }];
}

//===----------------------------------------------------------------------===//
// Slicing, joining, indexing
//===----------------------------------------------------------------------===//

def Onnx_ConcatOp : Onnx_Op<"Concat"> {
  let summary = "join tensors along an axis";
  let arguments = (ins Variadic<AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyTensor:$concat_result);
  let hasVerifier = 1;
}

def Onnx_SplitOp : Onnx_Op<"Split"> {
  let summary = "split a tensor along an axis";
  let description = [{
    ONNX `Split`: by the sizes in `split`, or into `num_outputs` (= the
    number of results) parts of ceil(dim / n), the last one smaller.
  }];
  let arguments = (ins AnyTensor:$input, Optional<AnyTensor>:$split,
                       DefaultValuedAttr<I64Attr, "0">:$axis,
                       OptionalAttr<I64Attr>:$num_outputs);
  let results = (outs Variadic<AnyTensor>:$outputs);
  let hasVerifier = 1;
}

def Onnx_SliceOp : Onnx_Op<"Slice", [AttrSizedOperandSegments]> {
  let summary = "strided slice along some axes";
  let arguments = (ins AnyTensor:$data, AnyTensor:$starts, AnyTensor:$ends,
                       Optional<AnyTensor>:$axes, Optional<AnyTensor>:$steps);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = [{
    $data `,` $starts `,` $ends (`axes` $axes^)? (`steps` $steps^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Onnx_GatherOp : Onnx_Op<"Gather"> {
  let summary = "take slices of data along axis at indices";
  let arguments = (ins AnyTensor:$data, AnyTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def Onnx_GatherNDOp : Onnx_Op<"GatherND"> {
  let summary = "gather slices of data by index tuples";
  let arguments = (ins AnyTensor:$data, AnyTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def Onnx_PadOp : Onnx_Op<"Pad", [AttrSizedOperandSegments]> {
  let summary = "pad (or crop, with negative pads) the input along axes";
  let description = [{
    ONNX `Pad`: `pads` holds the amounts before each axis, then after each
    (axes are `axes`, or all of them); `mode` is `constant` (with
    `constant_value`, 0 when absent), `reflect`, `edge` or `wrap`.
  }];
  let arguments = (ins AnyTensor:$data, AnyTensor:$pads,
                       Optional<AnyTensor>:$constant_value,
                       Optional<AnyTensor>:$axes,
                       DefaultValuedStrAttr<StrAttr, "constant">:$mode);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = [{
    $data `,` $pads (`value` $constant_value^)? (`axes` $axes^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Onnx_TriluOp : Onnx_Op<"Trilu"> {
  let summary = "upper or lower triangle of the last two dims";
  let arguments = (ins AnyTensor:$input, Optional<AnyTensor>:$k,
                       DefaultValuedAttr<I64Attr, "1">:$upper);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

#endif // SITS_DIALECT_ONNX_ONNXTENSOROPS_TD
