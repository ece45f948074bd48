//===- Passes.td - Passes of the ONNX frontend -------------*- tablegen -*-===//

#ifndef SITS_FRONTENDS_ONNX_PASSES_TD
#define SITS_FRONTENDS_ONNX_PASSES_TD

include "mlir/Pass/PassBase.td"

def RaiseOnnx : Pass<"sits-raise-onnx", "mlir::ModuleOp"> {
  let summary = "Raise exporter idioms in the onnx dialect into sits ops";
  let description = [{
    Recognizes, by what the ops compute rather than by exact node sequences,
    the idioms ONNX exporters emit for decoder-only transformers and
    replaces them with `sits` ops: embeddings, RMS and layer norms, linear
    projections (with biases; weights transposed to `[out, in]` at compile
    time), the LM head (tied or not), rotary embeddings with their cos/sin
    computation and positions, attention (scale, mask, GQA head
    repetition, the opset-23 `Attention` op), gated MLPs and activations,
    residual adds. What is not recognized stays as `onnx` ops, correct, and
    is reported as a warning with the reason when one is known.

    Every raise is recorded in the audit log (counters and one change per
    raise with the source node names and the rule that made it safe); raised
    ops carry a fused location of the nodes they replace.
  }];
  let dependentDialects = ["::sits::SitsDialect", "::sits::onnx::OnnxDialect"];
  let options = [
    Option<"reportUnraised", "report-unraised", "bool", /*default=*/"true",
           "Warn about float compute ops left in the onnx dialect">
  ];
}

def PrintSymbolicShapes : Pass<"sits-print-symbolic-shapes", "mlir::ModuleOp"> {
  let summary = "Report what the symbolic shape analysis knows (for tests)";
  let description = [{
    Emits a remark on every op result that is a tensor: its dims as
    expressions over the named dims of the graph inputs, the values of
    small integer tensors, and the per-element index expression when known:
    `dims [batch, seq, 4, 32]`, `values [batch, seq, -1, 32]`,
    `element d1`. Changes nothing. For lit tests and for reviewers asking
    what the analysis proves.
  }];
  let dependentDialects = ["::sits::SitsDialect", "::sits::onnx::OnnxDialect"];
}

#endif // SITS_FRONTENDS_ONNX_PASSES_TD
