//===- ShapeRuleOpInterface.td - Symbolic shape rules of ops -*- tablegen -*-===//
//
// The op interface through which `SymbolicShapes` asks an op for the facts
// (symbolic dims, tracked values) of its results.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_SHAPES_SHAPERULEOPINTERFACE_TD
#define SITS_DIALECT_SHAPES_SHAPERULEOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def ShapeRuleOpInterface : OpInterface<"ShapeRuleOpInterface"> {
  let description = [{
    The symbolic shape rule of an op: computes the facts of the op's results
    (dims as affine expressions over named symbols, and the element values
    of small integer tensors) from the facts of its operands. Ops without it
    fall back to their static result types in `SymbolicShapes`.

    Each dialect attaches the rules of its own ops as external models when
    it loads (`attachShapeRule` in ShapeRuleOpInterface.h), so that one rule
    function serves several ops.
  }];
  let cppNamespace = "::sits::onnx";

  let methods = [
    InterfaceMethod<[{
        Fills `ctx.result(i)` from `ctx.operand(j)`; on inconsistent
        operands returns `ctx.fail() << "why"`.
      }],
      "::mlir::LogicalResult", "inferShapeFacts",
      (ins "::sits::onnx::ShapeRuleContext &":$ctx)>
  ];
}

#endif // SITS_DIALECT_SHAPES_SHAPERULEOPINTERFACE_TD
