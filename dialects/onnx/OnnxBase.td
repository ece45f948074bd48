//===- OnnxBase.td - The onnx import dialect ---------------*- tablegen -*-===//
//
// The `onnx` dialect mirrors ONNX operators one to one: op names are the ONNX
// op_type, attributes keep their ONNX names, optional inputs are optional
// operands. It is what the importer produces; raising rewrites it into `sits`.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_ONNX_ONNXBASE_TD
#define SITS_DIALECT_ONNX_ONNXBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Onnx_Dialect : Dialect {
  let name = "onnx";
  let cppNamespace = "::sits::onnx";
  let summary = "ONNX operators as imported from a model";
  let description = [{
    One op per ONNX operator of the default domain (opset 17 to 25), named
    exactly like its `op_type`: `onnx.MatMul`, `onnx.Softmax`. The importer
    (`frontends/onnx/`) creates one op per graph node, with the node name as
    its location, and infers every result type with the symbolic shape
    analysis (`sits::onnx::SymbolicShapes`): dimensions that depend on the
    graph's dynamic inputs print as `?` in types, and the analysis knows them
    as affine expressions over the inputs' named dims (`batch`, `seq`).

    Conventions:
    * Attributes keep their ONNX names and types: INT is `i64`, INTS a
      `array<i64>`, FLOAT `f32`, FLOATS `array<f32>`, STRING a string and
      TENSOR an elements attribute. ONNX defaults are the attributes'
      defaults, so an absent attribute means the ONNX default.
    * Optional inputs are optional operands; an optional input left empty in
      the middle of the list (`Slice(x, s, e, "", steps)`) is simply absent.
    * Ops whose ONNX form changed between opset 17 and 25 use the newest
      form: the importer turns the `axes` attribute of `ReduceMean-13` and
      `ReduceMax-13` into a constant `axes` operand, and `CastLike` into the
      `Cast` to its second input's element type.
    * Initializers are not ops of this dialect: they become `sits.weight`.
  }];
  let dependentDialects = ["::sits::SitsDialect"];
}

class Onnx_Op<string mnemonic, list<Trait> traits = []>
    : Op<Onnx_Dialect, mnemonic, !listconcat([Pure], traits)> {
  // Operands in ONNX order, then the types as a function type. Ops with
  // several optional operands spell them with keywords instead.
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
}

// Elementwise ops of one input. Operands are named `input` and `output`
// whatever ONNX calls them (`X`/`Y` or `input`/`output`).
class Onnx_UnaryOp<string mnemonic, string opSummary, list<Trait> traits = []>
    : Onnx_Op<mnemonic, traits> {
  let summary = opSummary;
  let arguments = (ins AnyTensor:$input);
  let results = (outs AnyTensor:$output);
  let description = "ONNX `" # mnemonic # "`, elementwise; the result has "
                    "the input's shape.";
}

// Elementwise ops of two inputs with numpy (multidirectional) broadcasting.
class Onnx_BroadcastBinaryOp<string mnemonic, string opSummary,
                             list<Trait> traits = []>
    : Onnx_Op<mnemonic, traits> {
  let summary = opSummary;
  let arguments = (ins AnyTensor:$A, AnyTensor:$B);
  let results = (outs AnyTensor:$C);
  let description = "ONNX `" # mnemonic # "`: elementwise with numpy "
                    "broadcasting of `A` and `B`.";
}

// Reductions over `axes` (an operand since opset 18).
class Onnx_ReduceOp<string mnemonic, string opSummary>
    : Onnx_Op<mnemonic, []> {
  let summary = opSummary;
  let description = "ONNX `" # mnemonic # "` over `axes` (all axes when "
    "absent, unless `noop_with_empty_axes`), keeping reduced dims as 1 when "
    "`keepdims`.";
  let arguments = (ins AnyTensor:$data, Optional<AnyTensor>:$axes,
                       DefaultValuedAttr<I64Attr, "1">:$keepdims,
                       DefaultValuedAttr<I64Attr, "0">:$noop_with_empty_axes);
  let results = (outs AnyTensor:$reduced);
  let hasVerifier = 1;
}

#endif // SITS_DIALECT_ONNX_ONNXBASE_TD
