//===- OnnxMathOps.td - Elementwise, reduction and matmul ops -*- tablegen -*-===//

#ifndef SITS_DIALECT_ONNX_ONNXMATHOPS_TD
#define SITS_DIALECT_ONNX_ONNXMATHOPS_TD

include "dialects/onnx/OnnxBase.td"

//===----------------------------------------------------------------------===//
// Elementwise, one input
//===----------------------------------------------------------------------===//

def Onnx_AbsOp : Onnx_UnaryOp<"Abs", "absolute value">;
def Onnx_CosOp : Onnx_UnaryOp<"Cos", "cosine">;
def Onnx_ErfOp : Onnx_UnaryOp<"Erf", "Gauss error function">;
def Onnx_ExpOp : Onnx_UnaryOp<"Exp", "exponential">;
def Onnx_IdentityOp : Onnx_UnaryOp<"Identity", "the input, unchanged">;
def Onnx_IsNaNOp : Onnx_UnaryOp<"IsNaN", "true where the input is NaN">;
def Onnx_LogOp : Onnx_UnaryOp<"Log", "natural logarithm">;
def Onnx_NegOp : Onnx_UnaryOp<"Neg", "negation">;
def Onnx_NotOp : Onnx_UnaryOp<"Not", "logical not">;
def Onnx_ReciprocalOp : Onnx_UnaryOp<"Reciprocal", "1 / x">;
def Onnx_ReluOp : Onnx_UnaryOp<"Relu", "max(x, 0)">;
def Onnx_SigmoidOp : Onnx_UnaryOp<"Sigmoid", "1 / (1 + exp(-x))">;
def Onnx_SinOp : Onnx_UnaryOp<"Sin", "sine">;
def Onnx_SqrtOp : Onnx_UnaryOp<"Sqrt", "square root">;
def Onnx_TanhOp : Onnx_UnaryOp<"Tanh", "hyperbolic tangent">;

def Onnx_GeluOp : Onnx_Op<"Gelu"> {
  let summary = "Gaussian error linear unit";
  let description = [{
    ONNX `Gelu` (opset 20): `approximate = "none"` is
    `x/2 * (1 + erf(x / sqrt(2)))`, `"tanh"` the tanh approximation.
  }];
  let arguments = (ins AnyTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def Onnx_CastOp : Onnx_Op<"Cast"> {
  let summary = "element type conversion";
  let description = [{
    ONNX `Cast`: converts to the ONNX element type `to` (a `TensorProto`
    data type number: 1 float, 7 int64, 9 bool, 10 float16, 16 bfloat16,
    ...). The result's element type must be that type.
  }];
  let arguments = (ins AnyTensor:$input, I64Attr:$to,
                       DefaultValuedAttr<I64Attr, "1">:$saturate);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def Onnx_ClipOp : Onnx_Op<"Clip", [AttrSizedOperandSegments]> {
  let summary = "clamp to [min, max]";
  let description = "ONNX `Clip` with optional scalar `min` and `max`.";
  let arguments = (ins AnyTensor:$input, Optional<AnyTensor>:$min,
                       Optional<AnyTensor>:$max);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = [{
    $input (`min` $min^)? (`max` $max^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Onnx_DropoutOp : Onnx_Op<"Dropout", [AttrSizedOperandSegments]> {
  let summary = "dropout (the identity at inference)";
  let description = [{
    ONNX `Dropout`. Without `training_mode`, or with it false, the output is
    the input and the optional mask is all true; sits compiles for inference
    only, and shape inference treats it as the identity.
  }];
  let arguments = (ins AnyTensor:$data, Optional<AnyTensor>:$ratio,
                       Optional<AnyTensor>:$training_mode,
                       OptionalAttr<I64Attr>:$seed);
  let results = (outs AnyTensor:$output, Optional<AnyTensor>:$mask);
  let assemblyFormat = [{
    $data (`ratio` $ratio^)? (`training_mode` $training_mode^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Onnx_CumSumOp : Onnx_Op<"CumSum"> {
  let summary = "cumulative sum along an axis";
  let arguments = (ins AnyTensor:$x, AnyTensor:$axis,
                       DefaultValuedAttr<I64Attr, "0">:$exclusive,
                       DefaultValuedAttr<I64Attr, "0">:$reverse);
  let results = (outs AnyTensor:$y);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise, broadcasting
//===----------------------------------------------------------------------===//

def Onnx_AddOp : Onnx_BroadcastBinaryOp<"Add", "A + B">;
def Onnx_SubOp : Onnx_BroadcastBinaryOp<"Sub", "A - B">;
def Onnx_MulOp : Onnx_BroadcastBinaryOp<"Mul", "A * B">;
def Onnx_DivOp : Onnx_BroadcastBinaryOp<"Div", "A / B">;
def Onnx_PowOp : Onnx_BroadcastBinaryOp<"Pow", "A raised to the power B">;
def Onnx_EqualOp : Onnx_BroadcastBinaryOp<"Equal", "A == B">;
def Onnx_LessOp : Onnx_BroadcastBinaryOp<"Less", "A < B">;
def Onnx_LessOrEqualOp : Onnx_BroadcastBinaryOp<"LessOrEqual", "A <= B">;
def Onnx_GreaterOp : Onnx_BroadcastBinaryOp<"Greater", "A > B">;
def Onnx_GreaterOrEqualOp
    : Onnx_BroadcastBinaryOp<"GreaterOrEqual", "A >= B">;
def Onnx_AndOp : Onnx_BroadcastBinaryOp<"And", "logical and">;
def Onnx_OrOp : Onnx_BroadcastBinaryOp<"Or", "logical or">;

def Onnx_ModOp : Onnx_Op<"Mod"> {
  let summary = "remainder of A / B (broadcasting)";
  let description = [{
    ONNX `Mod`: with `fmod = 0` (integers only) the remainder has the sign
    of the divisor, as Python's `%`; with `fmod = 1` that of the dividend,
    as C's `fmod` (required for floats).
  }];
  let arguments = (ins AnyTensor:$A, AnyTensor:$B,
                       DefaultValuedAttr<I64Attr, "0">:$fmod);
  let results = (outs AnyTensor:$C);
  let hasVerifier = 1;
}

def Onnx_MaxOp : Onnx_Op<"Max"> {
  let summary = "elementwise maximum of one or more inputs (broadcasting)";
  let arguments = (ins Variadic<AnyTensor>:$data);
  let results = (outs AnyTensor:$max);
  let hasVerifier = 1;
}

def Onnx_MinOp : Onnx_Op<"Min"> {
  let summary = "elementwise minimum of one or more inputs (broadcasting)";
  let arguments = (ins Variadic<AnyTensor>:$data);
  let results = (outs AnyTensor:$min);
  let hasVerifier = 1;
}

def Onnx_SumOp : Onnx_Op<"Sum"> {
  let summary = "elementwise sum of one or more inputs (broadcasting)";
  let arguments = (ins Variadic<AnyTensor>:$data_0);
  let results = (outs AnyTensor:$sum);
  let hasVerifier = 1;
}

def Onnx_WhereOp : Onnx_Op<"Where"> {
  let summary = "select X where condition, else Y (broadcasting)";
  let arguments = (ins AnyTensor:$condition, AnyTensor:$X, AnyTensor:$Y);
  let results = (outs AnyTensor:$output);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

def Onnx_ReduceMeanOp : Onnx_ReduceOp<"ReduceMean", "mean over axes">;
def Onnx_ReduceSumOp : Onnx_ReduceOp<"ReduceSum", "sum over axes">;
def Onnx_ReduceMaxOp : Onnx_ReduceOp<"ReduceMax", "maximum over axes">;

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

def Onnx_MatMulOp : Onnx_Op<"MatMul"> {
  let summary = "numpy matmul (batched, broadcasting)";
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$Y);
}

def Onnx_GemmOp : Onnx_Op<"Gemm"> {
  let summary = "alpha * op(A) op(B) + beta * C";
  let description = [{
    ONNX `Gemm` on 2-D `A` and `B`, transposed when `transA` / `transB`,
    plus the optional `C` broadcast to the result.
  }];
  let arguments = (ins AnyTensor:$A, AnyTensor:$B, Optional<AnyTensor>:$C,
                       DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                       DefaultValuedAttr<F32Attr, "1.0">:$beta,
                       DefaultValuedAttr<I64Attr, "0">:$transA,
                       DefaultValuedAttr<I64Attr, "0">:$transB);
  let results = (outs AnyTensor:$Y);
  let hasVerifier = 1;
}

#endif // SITS_DIALECT_ONNX_ONNXMATHOPS_TD
