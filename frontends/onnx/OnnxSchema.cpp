//===- OnnxSchema.cpp - What the importer accepts of each ONNX op ---------===//

#include "frontends/onnx/OnnxSchema.h"

#include "llvm/ADT/StringMap.h"

using namespace sits::onnx;

llvm::StringRef sits::onnx::getAttrKindName(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return "INT";
  case AttrKind::Ints:
    return "INTS";
  case AttrKind::Float:
    return "FLOAT";
  case AttrKind::Floats:
    return "FLOATS";
  case AttrKind::String:
    return "STRING";
  case AttrKind::Tensor:
    return "TENSOR";
  }
  return "?";
}

const AttrSchema *OpSchema::findAttribute(llvm::StringRef name) const {
  for (const AttrSchema &attr : attributes)
    if (name == attr.name)
      return &attr;
  return nullptr;
}

namespace {
constexpr AttrKind Int = AttrKind::Int, Ints = AttrKind::Ints,
                   Float = AttrKind::Float, Floats = AttrKind::Floats,
                   String = AttrKind::String, Tensor = AttrKind::Tensor;

const AttrSchema kGelu[] = {{"approximate", String}};
const AttrSchema kCast[] = {{"to", Int, true}, {"saturate", Int}};
const AttrSchema kCastLike[] = {{"saturate", Int}};
const AttrSchema kMod[] = {{"fmod", Int}};
const AttrSchema kPad[] = {{"mode", String}};
const AttrSchema kDropout[] = {{"seed", Int}};
const AttrSchema kCumSum[] = {{"exclusive", Int}, {"reverse", Int}};
// `axes` as an attribute is the opset-13 form of ReduceMean/ReduceMax; the
// importer turns it into the `axes` operand of the newer form.
const AttrSchema kReduce[] = {
    {"keepdims", Int}, {"noop_with_empty_axes", Int}, {"axes", Ints}};
const AttrSchema kGemm[] = {
    {"alpha", Float}, {"beta", Float}, {"transA", Int}, {"transB", Int}};
const AttrSchema kConstant[] = {{"value", Tensor},
                                {"value_float", Float},
                                {"value_floats", Floats},
                                {"value_int", Int},
                                {"value_ints", Ints}};
const AttrSchema kConstantOfShape[] = {{"value", Tensor}};
const AttrSchema kShape[] = {{"start", Int}, {"end", Int}};
const AttrSchema kReshape[] = {{"allowzero", Int}};
const AttrSchema kAxis[] = {{"axis", Int}};
const AttrSchema kConcat[] = {{"axis", Int, true}};
const AttrSchema kTranspose[] = {{"perm", Ints}};
const AttrSchema kSplit[] = {{"axis", Int}, {"num_outputs", Int}};
const AttrSchema kGatherND[] = {{"batch_dims", Int}};
const AttrSchema kTrilu[] = {{"upper", Int}};
const AttrSchema kNorm[] = {
    {"axis", Int}, {"epsilon", Float}, {"stash_type", Int}};
const AttrSchema kRotary[] = {
    {"interleaved", Int}, {"num_heads", Int}, {"rotary_embedding_dim", Int}};
const AttrSchema kAttention[] = {{"is_causal", Int},
                                 {"kv_num_heads", Int},
                                 {"q_num_heads", Int},
                                 {"qk_matmul_output_mode", Int},
                                 {"scale", Float},
                                 {"softcap", Float},
                                 {"softmax_precision", Int},
                                 {"left_window_size", Int, false, 25},
                                 {"right_window_size", Int, false, 25}};

/// An empty attribute list.
const llvm::ArrayRef<AttrSchema> none = {};

const OpSchema kSchemas[] = {
    // Elementwise, one input.
    {"Abs", 13, 1, 1, 1, 1, false, none},
    {"Cos", 7, 1, 1, 1, 1, false, none},
    {"Erf", 13, 1, 1, 1, 1, false, none},
    {"Exp", 13, 1, 1, 1, 1, false, none},
    {"Identity", 1, 1, 1, 1, 1, false, none},
    {"IsNaN", 13, 1, 1, 1, 1, false, none},
    {"Log", 13, 1, 1, 1, 1, false, none},
    {"Neg", 13, 1, 1, 1, 1, false, none},
    {"Not", 1, 1, 1, 1, 1, false, none},
    {"Reciprocal", 13, 1, 1, 1, 1, false, none},
    {"Relu", 14, 1, 1, 1, 1, false, none},
    {"Sigmoid", 13, 1, 1, 1, 1, false, none},
    {"Sin", 7, 1, 1, 1, 1, false, none},
    {"Sqrt", 13, 1, 1, 1, 1, false, none},
    {"Tanh", 13, 1, 1, 1, 1, false, none},
    {"Gelu", 20, 1, 1, 1, 1, false, kGelu},
    {"Cast", 13, 1, 1, 1, 1, false, kCast},
    // Imported as the Cast to the second input's element type.
    {"CastLike", 15, 2, 2, 1, 1, false, kCastLike},
    {"Clip", 13, 1, 3, 1, 1, true, none},
    {"Dropout", 13, 1, 3, 1, 2, true, kDropout},
    {"CumSum", 14, 2, 2, 1, 1, false, kCumSum},
    // Elementwise, broadcasting.
    {"Add", 14, 2, 2, 1, 1, false, none},
    {"Sub", 14, 2, 2, 1, 1, false, none},
    {"Mul", 14, 2, 2, 1, 1, false, none},
    {"Div", 14, 2, 2, 1, 1, false, none},
    {"Pow", 15, 2, 2, 1, 1, false, none},
    {"Equal", 13, 2, 2, 1, 1, false, none},
    {"Less", 13, 2, 2, 1, 1, false, none},
    {"LessOrEqual", 16, 2, 2, 1, 1, false, none},
    {"Greater", 13, 2, 2, 1, 1, false, none},
    {"GreaterOrEqual", 16, 2, 2, 1, 1, false, none},
    {"And", 7, 2, 2, 1, 1, false, none},
    {"Or", 7, 2, 2, 1, 1, false, none},
    {"Mod", 13, 2, 2, 1, 1, false, kMod},
    {"Max", 13, 1, -1, 1, 1, false, none},
    {"Min", 13, 1, -1, 1, 1, false, none},
    {"Sum", 13, 1, -1, 1, 1, false, none},
    {"Where", 16, 3, 3, 1, 1, false, none},
    // Reductions and matrix products.
    {"ReduceMean", 13, 1, 2, 1, 1, false, kReduce},
    {"ReduceSum", 13, 1, 2, 1, 1, false, kReduce},
    {"ReduceMax", 13, 1, 2, 1, 1, false, kReduce},
    {"MatMul", 13, 2, 2, 1, 1, false, none},
    {"Gemm", 13, 2, 3, 1, 1, false, kGemm},
    // Constants and shapes.
    {"Constant", 13, 0, 0, 1, 1, false, kConstant},
    {"ConstantOfShape", 9, 1, 1, 1, 1, false, kConstantOfShape},
    {"Range", 11, 3, 3, 1, 1, false, none},
    {"Shape", 15, 1, 1, 1, 1, false, kShape},
    {"Size", 13, 1, 1, 1, 1, false, none},
    {"Reshape", 14, 2, 2, 1, 1, false, kReshape},
    {"Flatten", 13, 1, 1, 1, 1, false, kAxis},
    {"Squeeze", 13, 1, 2, 1, 1, false, none},
    {"Unsqueeze", 13, 2, 2, 1, 1, false, none},
    {"Expand", 13, 2, 2, 1, 1, false, none},
    {"Tile", 13, 2, 2, 1, 1, false, none},
    {"Transpose", 13, 1, 1, 1, 1, false, kTranspose},
    // Slicing, joining, indexing.
    {"Concat", 13, 1, -1, 1, 1, false, kConcat},
    {"Split", 13, 1, 2, 1, -1, false, kSplit},
    {"Slice", 13, 3, 5, 1, 1, true, none},
    {"Gather", 13, 2, 2, 1, 1, false, kAxis},
    {"GatherND", 13, 2, 2, 1, 1, false, kGatherND},
    {"Trilu", 14, 1, 2, 1, 1, false, kTrilu},
    // Pad-13's inputs; axes since Pad-18.
    {"Pad", 13, 2, 4, 1, 1, true, kPad, 0, 18},
    // Softmax, norms, rotary embedding, attention.
    {"Softmax", 13, 1, 1, 1, 1, false, kAxis},
    {"LayerNormalization", 17, 2, 3, 1, 3, false, kNorm},
    {"RMSNormalization", 23, 2, 2, 1, 1, false, kNorm},
    {"RotaryEmbedding", 23, 3, 4, 1, 1, false, kRotary},
    {"Attention", 23, 3, 7, 1, 4, true, kAttention, 0, 24},
    // ONNX Runtime registers this one in the default domain.
    {"SimplifiedLayerNormalization", 1, 2, 2, 1, 2, false, kNorm},
};

// com.microsoft (ONNX Runtime contrib ops), as the GenAI builder uses them.
const AttrSchema kSkipNorm[] = {{"epsilon", Float}};
const AttrSchema kMatMulNBits[] = {{"K", Int, true},
                                   {"N", Int, true},
                                   {"bits", Int},
                                   {"block_size", Int, true},
                                   {"accuracy_level", Int}};
const AttrSchema kGatherBlockQuantized[] = {{"gather_axis", Int},
                                            {"quantize_axis", Int},
                                            {"block_size", Int},
                                            {"bits", Int}};
const AttrSchema kMsRotary[] = {{"interleaved", Int},
                                {"is_packed_batching", Int},
                                {"num_heads", Int},
                                {"rotary_embedding_dim", Int},
                                {"scale", Float}};
const AttrSchema kGroupQueryAttention[] = {{"num_heads", Int, true},
                                           {"kv_num_heads", Int, true},
                                           {"scale", Float},
                                           {"local_window_size", Int},
                                           {"softcap", Float},
                                           {"do_rotary", Int},
                                           {"rotary_interleaved", Int},
                                           {"smooth_softmax", Int},
                                           {"qk_output", Int}};

const OpSchema kMicrosoftSchemas[] = {
    {"SkipSimplifiedLayerNormalization", 1, 3, 4, 1, 4, false, kSkipNorm},
    {"MatMulNBits", 1, 3, 6, 1, 1, true, kMatMulNBits},
    {"GatherBlockQuantized", 1, 3, 4, 1, 1, false, kGatherBlockQuantized},
    {"RotaryEmbedding", 1, 4, 4, 1, 1, false, kMsRotary},
    {"GroupQueryAttention", 1, 7, 12, 3, 4, true, kGroupQueryAttention,
     0b11110},
};
} // namespace

const OpSchema *sits::onnx::lookupMicrosoftOpSchema(llvm::StringRef opType) {
  for (const OpSchema &schema : kMicrosoftSchemas)
    if (opType == schema.opType)
      return &schema;
  return nullptr;
}

const OpSchema *sits::onnx::lookupOpSchema(llvm::StringRef opType) {
  static const llvm::StringMap<const OpSchema *> table = [] {
    llvm::StringMap<const OpSchema *> map;
    for (const OpSchema &schema : kSchemas)
      map[schema.opType] = &schema;
    return map;
  }();
  auto it = table.find(opType);
  return it == table.end() ? nullptr : it->second;
}
