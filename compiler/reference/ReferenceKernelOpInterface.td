//===- ReferenceKernelOpInterface.td - Reference kernels -----*- tablegen -*-===//
//
// The op interface through which the reference executor runs an op.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_COMPILER_REFERENCE_REFERENCEKERNELOPINTERFACE_TD
#define SITS_COMPILER_REFERENCE_REFERENCEKERNELOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def ReferenceKernelOpInterface : OpInterface<"ReferenceKernelOpInterface"> {
  let description = [{
    The CPU reference kernel of an op: computes its results from its
    operands' runtime values, exactly as the op's description says.

    The dialects do not know the executor: it attaches its kernels to the
    sits and onnx ops as external models (`registerReferenceKernels` in
    Executor.h), so only programs that link the executor carry them.
  }];
  let cppNamespace = "::sits::reference";

  let methods = [
    InterfaceMethod<[{
        Runs the op on `context`'s operands and sets each result with
        `context.setResult`; returns `context.error(...)` on inputs the op
        does not accept at run time.
      }],
      "::llvm::Error", "runReferenceKernel",
      (ins "::sits::reference::KernelContext &":$context)>
  ];
}

#endif // SITS_COMPILER_REFERENCE_REFERENCEKERNELOPINTERFACE_TD
