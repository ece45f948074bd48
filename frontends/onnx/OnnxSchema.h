//===- OnnxSchema.h - What the importer accepts of each ONNX op -*- C++ -*-===//
//
// For every ONNX operator sits imports: how many inputs and outputs it takes,
// which attributes it has (name, kind, required), and the opset it appeared
// in. The importer checks each node against this before it creates an op,
// so that ops reaching shape inference and raising are well formed, and a
// malformed node gets an error naming it and what was expected.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_FRONTENDS_ONNX_ONNXSCHEMA_H
#define SITS_FRONTENDS_ONNX_ONNXSCHEMA_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace sits::onnx {

/// ONNX attribute kinds (AttributeProto.AttributeType) sits imports.
enum class AttrKind { Int, Ints, Float, Floats, String, Tensor };

llvm::StringRef getAttrKindName(AttrKind kind);

struct AttrSchema {
  const char *name;
  AttrKind kind;
  bool required = false;
  /// First opset that has the attribute, when it came after the op
  /// (Attention's window sizes: 25); 0 otherwise.
  int sinceOpset = 0;
};

struct OpSchema {
  const char *opType;
  /// First opset of the default domain that has this operator.
  int sinceOpset;
  int minInputs;
  /// -1: variadic.
  int maxInputs;
  int minOutputs;
  /// -1: variadic.
  int maxOutputs;
  /// Whether the op spells absent optional inputs with operand segments
  /// (any of them may be absent); otherwise only trailing ones may be.
  bool segmentedInputs;
  llvm::ArrayRef<AttrSchema> attributes;
  /// Inputs before `minInputs` that may still be empty (bit i: input i),
  /// as GroupQueryAttention's key and value before its required lengths.
  unsigned optionalInputs = 0;
  /// First opset that has the last input, when it came after the op
  /// (Attention's nonpad_kv_seqlen: 24); 0 otherwise.
  int lastInputSinceOpset = 0;

  const AttrSchema *findAttribute(llvm::StringRef name) const;
};

/// The schema of `opType` in the default domain, or null when sits does
/// not import it.
const OpSchema *lookupOpSchema(llvm::StringRef opType);

/// ONNX Runtime's contrib-op domain.
inline constexpr llvm::StringLiteral kMicrosoftDomain = "com.microsoft";
/// The schema of `opType` in `com.microsoft` (imported as
/// `onnx.ms.<opType>`), or null when sits does not import it.
const OpSchema *lookupMicrosoftOpSchema(llvm::StringRef opType);

} // namespace sits::onnx

#endif // SITS_FRONTENDS_ONNX_ONNXSCHEMA_H
