//===- SitsBase.td - The sits dialect and its attributes ---*- tablegen -*-===//
//
// The `sits` dialect describes transformer decoders at the level a decode
// engine works at: embeddings, norms, linears, RoPE, attention with its
// causal rule, gated MLPs, the LM head, and explicit KV-cache state.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_SITS_SITSBASE_TD
#define SITS_DIALECT_SITS_SITSBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Sits_Dialect : Dialect {
  let name = "sits";
  let cppNamespace = "::sits";
  let summary = "Transformer-decoder operations for the sits compiler";
  let description = [{
    The `sits` dialect is the level at which the sits compiler optimizes a
    decoder-only language model. Each op is one step a decode engine
    implements with one kernel or one fused epilogue: `sits.embedding`,
    `sits.rms_norm`, `sits.linear`, `sits.rope`, `sits.attention`,
    `sits.glu`, `sits.add`, `sits.lm_head`, and the KV-cache state ops.

    Conventions:
    * Activations are ranked tensors of `f32`, `f16` or `bf16`; token ids and
      positions are `i64` (or `i32`) tensors.
    * Linear and LM-head weights are `[out_features, in_features]`, so that a
      decode GEMV reads each output row contiguously.
    * Attention operands are head-major, `[batch, heads, seq, head_dim]`;
      `sits.split_heads` and `sits.merge_heads` convert from and to the
      `[batch, seq, heads * head_dim]` layout of the projections.
    * KV-cache state is an SSA value of type `!sits.kv_cache<...>` that is
      threaded through the program: each update consumes one state value and
      produces the next, so the order of cache writes is explicit dataflow.
    * A tensor-parallel program is one program that every rank runs; the
      module says how many with `sits.tensor_parallel = N`. `sits.shard`
      gives each rank its part of a weight, `sits.all_reduce` and
      `sits.all_gather` join the ranks' values.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  // `sits.tensor_parallel = N` on a module: its ranks (ParallelOps.cpp).
  let hasOperationAttrVerify = 1;
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::tensor::TensorDialect"
  ];
  let extraClassDeclaration = [{
    /// What the passes that ran in this context changed (passes/Audit.h).
    AuditLog &getAuditLog() { return *auditLog; }

  private:
    std::unique_ptr<AuditLog> auditLog;
  }];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Sits_Activation : I32EnumAttr<"Activation", "elementwise activation", [
    I32EnumAttrCase<"silu", 0>,
    I32EnumAttrCase<"gelu", 1>,
    I32EnumAttrCase<"gelu_tanh", 2>,
    I32EnumAttrCase<"relu", 3>,
    I32EnumAttrCase<"sigmoid", 4>
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::sits";
}
def Sits_ActivationAttr : EnumAttr<Sits_Dialect, Sits_Activation, "activation"> {
  let assemblyFormat = "`<` $value `>`";
}

def Sits_CausalMode : I32EnumAttr<"CausalMode", "causal rule of an attention", [
    // No causal restriction (a mask operand may still restrict).
    I32EnumAttrCase<"none", 0>,
    // Query i sees key j iff j <= i (the rule before the ONNX 1.23 errata).
    I32EnumAttrCase<"top_left", 1>,
    // Query i sees key j iff j <= i + offset, offset = past_len (or
    // seq_k - seq_q without a past_len operand).
    I32EnumAttrCase<"bottom_right", 2>
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::sits";
}
def Sits_CausalModeAttr : EnumAttr<Sits_Dialect, Sits_CausalMode, "causal"> {
  let assemblyFormat = "`<` $value `>`";
}

def Sits_RopeStyle : I32EnumAttr<"RopeStyle", "pairing of rotated dimensions", [
    // Dimension k pairs with k + rotary_dim/2 (Llama, Qwen, GPT-NeoX).
    I32EnumAttrCase<"rotate_half", 0>,
    // Dimension 2k pairs with 2k+1 (GPT-J, the original RoFormer).
    I32EnumAttrCase<"interleaved", 1>
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::sits";
}
def Sits_RopeStyleAttr : EnumAttr<Sits_Dialect, Sits_RopeStyle, "rope_style"> {
  let assemblyFormat = "`<` $value `>`";
}

def Sits_KVCacheLayout : I32EnumAttr<"KVCacheLayout", "memory layout of a KV cache", [
    // One allocation, [layer, batch, kv_head, seq, head_dim], K and V apart.
    I32EnumAttrCase<"contiguous", 0>
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::sits";
}
def Sits_KVCacheLayoutAttr
    : EnumAttr<Sits_Dialect, Sits_KVCacheLayout, "kv_layout"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

class Sits_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sits_Dialect, mnemonic, traits>;

// Floating-point tensors an activation can hold.
def Sits_FloatTensor : TensorOf<[F32, F16, BF16]>;
// Token ids and positions.
def Sits_IndexTensor : TensorOf<[I32, I64]>;

#endif // SITS_DIALECT_SITS_SITSBASE_TD
