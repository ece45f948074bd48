//===- FuzzOnnxLoader.cpp - Fuzzes ONNX loading with external data -------===//
//
// Input: see OnnxFuzzInput.h (a model and one external data file). Loads the
// model as `sitsc` does (protobuf parse, model-level checks) and reads every
// initializer and tensor attribute through TensorReader, external data
// mapped as for weights, then read as for test inputs. Errors are
// llvm::Error values that must name the file; a crash, a sanitizer report or
// an unchecked llvm::Error (which aborts) is a finding.
//
//===----------------------------------------------------------------------===//

#include "OnnxFuzzInput.h"

#include "frontends/onnx/OnnxLoader.h"

#include "sits_onnx/onnx.pb.h"

#include "llvm/Support/Error.h"

namespace {

void readTensor(sits::TensorReader &reader, const ::onnx::TensorProto &tensor,
                llvm::StringRef what) {
  llvm::Expected<sits::TensorData> data = reader.read(tensor, what);
  if (!data) {
    llvm::consumeError(data.takeError());
    return;
  }
  // Touch the first and last byte: a view past the file's end would fault.
  llvm::ArrayRef<char> bytes = data->getBytes();
  volatile char sink = 0;
  if (!bytes.empty())
    sink = bytes.front() ^ bytes.back();
  (void)sink;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static sits::fuzz::OnnxFuzzFolder folder;
  folder.write(data, size);
  auto model = sits::OnnxModel::load(folder.modelPath());
  if (!model) {
    std::string message = llvm::toString(model.takeError());
    if (message.find("model.onnx") == std::string::npos)
      __builtin_trap(); // every error names the file
    return 0;
  }
  const ::onnx::GraphProto &graph = (*model)->getProto().graph();
  for (bool mapped : {true, false}) {
    sits::TensorReader reader(
        folder.modelPath(),
        folder.modelPath().substr(0, folder.modelPath().rfind('/')));
    if (mapped)
      reader.mapExternalData(1);
    for (const ::onnx::TensorProto &tensor : graph.initializer())
      readTensor(reader, tensor, "initializer '" + tensor.name() + "'");
    for (const ::onnx::NodeProto &node : graph.node())
      for (const ::onnx::AttributeProto &attr : node.attribute())
        if (attr.has_t())
          readTensor(reader, attr.t(), "attribute '" + attr.name() + "'");
  }
  return 0;
}
