//===- OnnxLoader.h - Safe loading of ONNX files ----------------*- C++ -*-===//
//
// Parses ONNX protobuf files and reads tensor data with every check a
// malicious or broken file needs: external data confined to the model's
// folder (no absolute paths, `..`, symlinks or hard links), offsets and
// lengths checked against the file and the tensor's size with
// overflow-checked arithmetic before anything is allocated, dims that are
// non-negative and whose product fits, opsets sits supports. Every error
// names the file and the tensor, node or field at fault.
//
// The protobuf classes are in the global `::onnx` namespace (generated from
// libonnx-dev's onnx.proto); this header only forward-declares them.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_FRONTENDS_ONNX_ONNXLOADER_H
#define SITS_FRONTENDS_ONNX_ONNXLOADER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
class TensorProto;
} // namespace onnx

namespace sits {

/// An error about an ONNX file: `file` is the file at fault, `message` says
/// what is wrong (naming the tensor, node or field). Logs as
/// "FILE: MESSAGE".
class OnnxFileError : public llvm::ErrorInfo<OnnxFileError> {
public:
  static char ID;
  OnnxFileError(std::string file, std::string message)
      : file(std::move(file)), message(std::move(message)) {}
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  llvm::StringRef getFile() const { return file; }
  llvm::StringRef getMessage() const { return message; }

private:
  std::string file;
  std::string message;
};

/// Opsets of the default ONNX domain sits imports. Opsets 24 and 25 changed
/// the ops sits imports only by new element types (float8e8m0, 2-bit
/// integers, which sits refuses), except Attention, whose opset-24 input and
/// opset-25 attributes the schema dates (OnnxSchema.cpp).
constexpr int64_t kMinOnnxOpset = 17;
constexpr int64_t kMaxOnnxOpset = 25;

/// A tensor read from a file (`test_data_set_0/input_0.pb`): its bytes are
/// little-endian, in ONNX's raw layout (bool: one byte per element).
struct LoadedTensor {
  std::string name;
  /// ONNX element type (TensorProto.DataType).
  int64_t elementType = 0;
  llvm::SmallVector<int64_t, 4> dims;
  std::vector<char> data;
};

/// Reads one serialized TensorProto file with the same checks as model
/// weights (external data resolved in the file's folder).
llvm::Expected<LoadedTensor> readTensorProtoFile(llvm::StringRef path);

/// The bytes of one tensor, without a copy where possible (a view into the
/// model's raw_data or into a mapped external data file) or owning them
/// (external data read, typed fields).
class TensorData {
public:
  TensorData() = default;
  TensorData(TensorData &&) = default;
  TensorData &operator=(TensorData &&) = default;
  // `bytes` may point into `owned`: copies would dangle.
  TensorData(const TensorData &) = delete;
  TensorData &operator=(const TensorData &) = delete;

  int64_t getElementType() const { return elementType; }
  llvm::ArrayRef<int64_t> getDims() const { return dims; }
  int64_t getNumElements() const { return numElements; }
  /// Little-endian bytes in ONNX's raw layout; size = elements x element
  /// size.
  llvm::ArrayRef<char> getBytes() const { return bytes; }
  /// The mapping of the external data file the bytes lie in (it stays
  /// mapped while a copy of this pointer lives), or null when they do not.
  const std::shared_ptr<const void> &getMapping() const { return mapping; }

private:
  friend class TensorReader;
  int64_t elementType = 0;
  llvm::SmallVector<int64_t, 4> dims;
  int64_t numElements = 0;
  llvm::ArrayRef<char> bytes;
  std::vector<char> owned;
  std::shared_ptr<const void> mapping;
};

/// Reads tensor data of one model (or tensor file), resolving external data
/// in `directory`. Keeps external files open while it lives.
class TensorReader {
public:
  /// `file` is the ONNX file the tensors come from, for messages.
  TensorReader(std::string file, std::string directory);
  ~TensorReader();

  /// Checks and reads `tensor`; `what` describes it for messages
  /// ("initializer 'w'", "attribute 'value' of node 'n'").
  llvm::Expected<TensorData> read(const ::onnx::TensorProto &tensor,
                                  llvm::StringRef what);

  /// External data of at least `minBytes` is then mapped (read-only) rather
  /// than read, after the same checks, when its offset is aligned to its
  /// element size (BOOL data, which is checked byte by byte, is read).
  /// A file changed while mapped can crash the process (SIGBUS) where a read
  /// would fail; the model's weights are mapped, test inputs are read.
  void mapExternalData(int64_t minBytes) { mapMinBytes = minBytes; }

  /// Size in bytes of one element of ONNX type `elementType`, 0 when sits
  /// does not read that type.
  static int64_t getElementSize(int64_t elementType);

private:
  struct ExternalFile;
  llvm::Expected<ExternalFile *> openExternal(llvm::StringRef location,
                                              llvm::StringRef what);
  llvm::Error readExternal(const ::onnx::TensorProto &tensor,
                           llvm::StringRef what, int64_t byteSize,
                           TensorData &data);
  llvm::Error readTypedFields(const ::onnx::TensorProto &tensor,
                              llvm::StringRef what, TensorData &data);

  std::string file;
  std::string directory;
  llvm::StringMap<std::unique_ptr<ExternalFile>> externalFiles;
  /// 0: external data is read, never mapped.
  int64_t mapMinBytes = 0;
};

/// What the loader did with a merged decoder (Optimum's
/// decoder_model_merged.onnx): its If became its then_branch, the decoder
/// with past key/values, and the boolean condition input went.
struct UnmergedDecoder {
  /// The If node and its condition (the graph input dropped).
  std::string node;
  std::string condition;
  /// Nodes of the then_branch (kept) and the else_branch (dropped).
  int64_t keptNodes = 0;
  int64_t droppedNodes = 0;
};

/// Replaces a merged decoder's If by its then_branch in `model`'s graph and
/// sets `result`; leaves a graph without If alone. Any other If (a condition
/// that is not a boolean graph input, branches returning other values or
/// not the graph's outputs, a then_branch that does not read every input,
/// more than one If, nested subgraphs, names the branch shares with the
/// outer graph) is an error naming the node. `path` names the file.
llvm::Error unmergeDecoder(::onnx::ModelProto &model, llvm::StringRef path,
                           std::optional<UnmergedDecoder> &result);

/// A parsed ONNX model, checked at the model level (opsets, IR version,
/// initializer names).
class OnnxModel {
public:
  static llvm::Expected<std::unique_ptr<OnnxModel>> load(llvm::StringRef path);
  ~OnnxModel();

  const ::onnx::ModelProto &getProto() const { return *proto; }
  llvm::StringRef getPath() const { return path; }
  /// Version of the default ONNX domain.
  int64_t getOpsetVersion() const { return opsetVersion; }
  TensorReader &getTensorReader() { return *reader; }
  /// Set when the file was a merged decoder, now its then_branch.
  const std::optional<UnmergedDecoder> &getUnmergedDecoder() const {
    return unmerged;
  }

private:
  OnnxModel() = default;
  std::unique_ptr<::onnx::ModelProto> proto;
  std::string path;
  int64_t opsetVersion = 0;
  std::unique_ptr<TensorReader> reader;
  std::optional<UnmergedDecoder> unmerged;
};

/// Checked `a * b` and `a + b` on non-negative int64 values.
bool multiplyChecked(int64_t a, int64_t b, int64_t &result);
bool addChecked(int64_t a, int64_t b, int64_t &result);

} // namespace sits

#endif // SITS_FRONTENDS_ONNX_ONNXLOADER_H
