//===- KernelBase.td - The kernel dialect ------------------*- tablegen -*-===//
//
// The `kernel` dialect records what the CUDA backend decided about a
// program: which `sits` ops run together in one kernel launch, and how.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_KERNEL_KERNELBASE_TD
#define SITS_DIALECT_KERNEL_KERNELBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Kernel_Dialect : Dialect {
  let name = "kernel";
  let cppNamespace = "::sits::kernel";
  let summary = "The CUDA backend's launches: which ops run fused, and how";
  let description = [{
    The `kernel` dialect is the level after `--emit=optimized`: the decisions
    the CUDA backend makes about the optimized `sits` program, as IR that
    `sitsc --emit=kernels` prints, `sits-opt` runs pass by pass, and the
    audit report counts. The code generator plans one kernel launch per
    `kernel.launch` (and one per remaining `sits` op), so every fusion a
    reviewer sees here is one launch in the engine, and none happens
    anywhere else.

    A `kernel.launch` holds the `sits` ops it fuses, unchanged, in its
    region; the values they compute for the rest of the program leave
    through `kernel.yield`. Its `fusion` says which fused kernel runs them.
    The passes that form launches (`--kernel-fuse-*`, `--kernel-group-*`,
    `--kernel-choose-*`) each make one kind of decision, and are described
    in the kernel pass reference.
  }];
  let useDefaultAttributePrinterParser = 1;
}

def Kernel_FusionKind : I32EnumAttr<"FusionKind",
    "what one fused launch computes", [
  I32EnumAttrCase<"LinearGroup", 0, "linear_group">,
  I32EnumAttrCase<"GatedLinear", 1, "gated_linear">,
  I32EnumAttrCase<"ResidualLinear", 2, "residual_linear">,
  I32EnumAttrCase<"RopeKVAppend", 3, "rope_kv_append">,
  I32EnumAttrCase<"LMHead", 4, "lm_head">,
  I32EnumAttrCase<"Norm", 5, "norm">
]> {
  let cppNamespace = "::sits::kernel";
  let genSpecializedAttr = 0;
}

def Kernel_FusionKindAttr : EnumAttr<Kernel_Dialect, Kernel_FusionKind,
                                     "fusion"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // SITS_DIALECT_KERNEL_KERNELBASE_TD
