//===- KernelOps.td - The kernel dialect's ops -------------*- tablegen -*-===//

#ifndef SITS_DIALECT_KERNEL_KERNELOPS_TD
#define SITS_DIALECT_KERNEL_KERNELOPS_TD

include "dialects/kernel/KernelBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Kernel_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kernel_Dialect, mnemonic, traits>;

def Kernel_LaunchOp : Kernel_Op<"launch", [
    SingleBlockImplicitTerminator<"YieldOp">,
    RecursiveMemoryEffects]> {
  let summary = "sits ops that run as one fused kernel launch";
  let description = [{
    The region's `sits` ops run in one launch of the fused kernel that
    `fusion` names; the results are the values of the region that the rest
    of the program reads, in `kernel.yield`'s order. The ops keep their
    locations, so the launch's sources are the model's nodes of its ops.
    The region uses values defined above it directly.

    | fusion | region | one launch of |
    |---|---|---|
    | `linear_group` | 1 to 4 `sits.linear` of one input, after an optional `sits.rms_norm` of it | a GEMV/GEMM with one output segment per linear (Q, K and V) |
    | `gated_linear` | the gate and up `sits.linear` of one input and their `sits.glu`, after an optional `sits.rms_norm` | a GEMV/GEMM whose epilogue is act(gate) * up |
    | `residual_linear` | a `sits.linear` and the `sits.add` of its result and a residual, after an optional `sits.rms_norm` | a GEMV/GEMM whose epilogue adds the residual |
    | `rope_kv_append` | a `sits.kv_cache.append`, after the `sits.rope` of its keys and/or of the query that attends to the layer | the append kernel, rotating on the way |
    | `lm_head` | a `sits.rms_norm` and the `sits.lm_head` reading it | the LM-head GEMV normalizing its input |
    | `norm` | one `sits.rms_norm` | the norm kernel (with `output_operand_bits`) |

    `output_operand_bits` (`gated_linear` and `norm` only): the result is
    written as the 16-bit operands, in the tensor-core order, of the
    tensor-core GEMVs over weights of this many bits that read it (and only
    they read it), so that they load half the bytes and convert nothing:
    16 (16-bit weights: the input order), 8 or 4 (int8/int4 levels over
    interleaved rows).

    Example:

    ```mlir
    %q, %k, %v = kernel.launch <linear_group> {
      %0 = sits.linear %x, %wq : ...
      %1 = sits.linear %x, %wk : ...
      %2 = sits.linear %x, %wv : ...
      kernel.yield %0, %1, %2 : ...
    } : tensor<?x?x128xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins Kernel_FusionKindAttr:$fusion,
                       OptionalAttr<I64Attr>:$output_operand_bits);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $fusion attr-dict-with-keyword $body (`:` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The yield of the region.
    YieldOp getYield();
    /// The result that carries `inner` (a value of the region) out, or a
    /// null value.
    mlir::Value getResultFor(mlir::Value inner);
    /// The region's value that result `outer` carries out.
    mlir::Value getInnerValue(mlir::OpResult outer);
    /// The region's ops of type OpTy, in order.
    template <typename OpTy>
    llvm::SmallVector<OpTy> getOpsOfType() {
      llvm::SmallVector<OpTy> ops;
      for (mlir::Operation &op : getBody().front())
        if (auto typed = llvm::dyn_cast<OpTy>(op))
          ops.push_back(typed);
      return ops;
    }
  }];
}

def Kernel_YieldOp : Kernel_Op<"yield", [
    Pure, Terminator, HasParent<"LaunchOp">]> {
  let summary = "The values a kernel.launch gives to the rest of the program";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
  let builders = [OpBuilder<(ins), [{ /* nothing */ }]>];
}

#endif // SITS_DIALECT_KERNEL_KERNELOPS_TD
