//===- OnnxLoader.cpp - Safe loading of ONNX files ------------------------===//

#include "frontends/onnx/OnnxLoader.h"

#include "sits_onnx/onnx.pb.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SwapByteOrder.h"
#include "llvm/Support/raw_ostream.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/logging.h>

#include <climits>
#include <cstring>
#include <mutex>

using namespace sits;
using llvm::Expected;
using llvm::StringRef;

char OnnxFileError::ID = 0;

void OnnxFileError::log(llvm::raw_ostream &os) const {
  os << file << ": " << message;
}

bool sits::multiplyChecked(int64_t a, int64_t b, int64_t &result) {
  return !__builtin_mul_overflow(a, b, &result);
}

bool sits::addChecked(int64_t a, int64_t b, int64_t &result) {
  return !__builtin_add_overflow(a, b, &result);
}

static llvm::Error makeError(StringRef file, const llvm::Twine &message) {
  return llvm::make_error<OnnxFileError>(file.str(), message.str());
}

/// Protobuf logs some parse problems to stderr on its own; sits reports
/// every problem itself, once, with the file name.
static void silenceProtobufLogging() {
  static std::once_flag once;
  std::call_once(once, [] {
    google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char *,
                                       int, const std::string &) {});
  });
}

/// "[2, 3, 4]"
static std::string formatDims(llvm::ArrayRef<int64_t> dims) {
  std::string text = "[";
  for (auto [i, dim] : llvm::enumerate(dims))
    text += (i ? ", " : "") + std::to_string(dim);
  return text + "]";
}

static std::string elementTypeName(int64_t type) {
  static const char *const names[] = {
      "UNDEFINED",      "FLOAT",        "UINT8",          "INT8",
      "UINT16",         "INT16",        "INT32",          "INT64",
      "STRING",         "BOOL",         "FLOAT16",        "DOUBLE",
      "UINT32",         "UINT64",       "COMPLEX64",      "COMPLEX128",
      "BFLOAT16",       "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
      "FLOAT8E5M2FNUZ", "UINT4",        "INT4",           "FLOAT4E2M1"};
  if (type >= 0 && type < static_cast<int64_t>(std::size(names)))
    return names[type];
  return "type " + std::to_string(type);
}

/// Reads a whole file into memory (not mapped: a file truncated while we
/// read it must give an error, never a SIGBUS).
static Expected<std::unique_ptr<llvm::MemoryBuffer>>
readWholeFile(StringRef path, StringRef kind) {
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return makeError(path, "cannot open " + kind + ": " + ec.message());
  if (!llvm::sys::fs::is_regular_file(status))
    return makeError(path, "cannot open " + kind + ": not a regular file");
  if (status.getSize() > static_cast<uint64_t>(INT_MAX))
    return makeError(
        path, kind + " is larger than 2 GiB, which "
                     "protobuf cannot parse; store the weights as external "
                     "data");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false,
                                  /*IsVolatile=*/true);
  if (!buffer)
    return makeError(path, "cannot read " + kind + ": " +
                               buffer.getError().message());
  return std::move(*buffer);
}

/// Parses a protobuf message from `buffer`, requiring the whole buffer to
/// be consumed.
static bool parseMessage(google::protobuf::MessageLite &message,
                         const llvm::MemoryBuffer &buffer) {
  silenceProtobufLogging();
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(buffer.getBufferStart()),
      static_cast<int>(buffer.getBufferSize()));
  return message.ParseFromCodedStream(&stream) &&
         stream.ConsumedEntireMessage();
}

//===----------------------------------------------------------------------===//
// TensorReader: inline data
//===----------------------------------------------------------------------===//

int64_t TensorReader::getElementSize(int64_t elementType) {
  switch (static_cast<::onnx::TensorProto::DataType>(elementType)) {
  case ::onnx::TensorProto::FLOAT:
  case ::onnx::TensorProto::INT32:
  case ::onnx::TensorProto::UINT32:
    return 4;
  case ::onnx::TensorProto::DOUBLE:
  case ::onnx::TensorProto::INT64:
  case ::onnx::TensorProto::UINT64:
    return 8;
  case ::onnx::TensorProto::FLOAT16:
  case ::onnx::TensorProto::BFLOAT16:
  case ::onnx::TensorProto::INT16:
  case ::onnx::TensorProto::UINT16:
    return 2;
  case ::onnx::TensorProto::INT8:
  case ::onnx::TensorProto::UINT8:
  case ::onnx::TensorProto::BOOL:
    return 1;
  default:
    return 0;
  }
}

template <typename T>
static void appendLittleEndian(std::vector<char> &out, T value) {
  if (!llvm::sys::IsLittleEndianHost)
    llvm::sys::swapByteOrder(value);
  const char *bytes = reinterpret_cast<const char *>(&value);
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

llvm::Error TensorReader::readTypedFields(const ::onnx::TensorProto &tensor,
                                          StringRef what, TensorData &data) {
  auto fail = [&](const llvm::Twine &message) {
    return makeError(file, what + ": " + message);
  };
  int64_t type = data.elementType;
  int64_t count = data.numElements;
  // The field each element type stores its values in.
  struct Field {
    const char *name;
    int size;
  };
  Field fields[] = {{"float_data", tensor.float_data_size()},
                    {"int32_data", tensor.int32_data_size()},
                    {"int64_data", tensor.int64_data_size()},
                    {"double_data", tensor.double_data_size()},
                    {"uint64_data", tensor.uint64_data_size()},
                    {"string_data", tensor.string_data_size()}};
  const char *expected = nullptr;
  switch (static_cast<::onnx::TensorProto::DataType>(type)) {
  case ::onnx::TensorProto::FLOAT:
    expected = "float_data";
    break;
  case ::onnx::TensorProto::INT64:
    expected = "int64_data";
    break;
  case ::onnx::TensorProto::DOUBLE:
    expected = "double_data";
    break;
  case ::onnx::TensorProto::UINT32:
  case ::onnx::TensorProto::UINT64:
    expected = "uint64_data";
    break;
  default:
    expected = "int32_data";
    break;
  }
  int used = 0;
  for (const Field &field : fields) {
    if (field.size == 0)
      continue;
    if (StringRef(field.name) != expected)
      return fail(llvm::Twine("stores its values in ") + field.name +
                  ", but element type " + elementTypeName(type) + " uses " +
                  expected);
    used = field.size;
  }
  if (used == 0) {
    if (count == 0)
      return llvm::Error::success();
    return fail("has no data (no raw_data, " + llvm::Twine(expected) +
                " or external data) for " + llvm::Twine(count) + " elements");
  }
  if (used != count)
    return fail(llvm::Twine(expected) + " holds " + llvm::Twine(used) +
                " values, but dims " + formatDims(data.dims) + " need " +
                llvm::Twine(count));

  std::vector<char> &out = data.owned;
  int64_t byteSize = count * getElementSize(type); // Checked by the caller.
  out.reserve(byteSize);
  switch (static_cast<::onnx::TensorProto::DataType>(type)) {
  case ::onnx::TensorProto::FLOAT:
    for (float v : tensor.float_data())
      appendLittleEndian(out, v);
    break;
  case ::onnx::TensorProto::INT64:
    for (int64_t v : tensor.int64_data())
      appendLittleEndian(out, v);
    break;
  case ::onnx::TensorProto::DOUBLE:
    for (double v : tensor.double_data())
      appendLittleEndian(out, v);
    break;
  case ::onnx::TensorProto::UINT64:
    for (uint64_t v : tensor.uint64_data())
      appendLittleEndian(out, v);
    break;
  case ::onnx::TensorProto::UINT32:
    for (uint64_t v : tensor.uint64_data()) {
      if (v > UINT32_MAX)
        return fail("uint64_data value " + llvm::Twine(v) +
                    " does not fit UINT32");
      appendLittleEndian(out, static_cast<uint32_t>(v));
    }
    break;
  default: {
    // int32_data holds INT32, and the narrower types one value per entry
    // (FLOAT16/BFLOAT16 as their bit patterns).
    int64_t size = getElementSize(type);
    int64_t low = INT32_MIN, high = INT32_MAX;
    switch (static_cast<::onnx::TensorProto::DataType>(type)) {
    case ::onnx::TensorProto::INT8:
      low = INT8_MIN, high = INT8_MAX;
      break;
    case ::onnx::TensorProto::INT16:
      low = INT16_MIN, high = INT16_MAX;
      break;
    case ::onnx::TensorProto::UINT8:
      low = 0, high = UINT8_MAX;
      break;
    case ::onnx::TensorProto::UINT16:
    case ::onnx::TensorProto::FLOAT16:
    case ::onnx::TensorProto::BFLOAT16:
      low = 0, high = UINT16_MAX;
      break;
    case ::onnx::TensorProto::BOOL:
      low = 0, high = 1;
      break;
    default:
      break;
    }
    for (int32_t v : tensor.int32_data()) {
      if (v < low || v > high)
        return fail("int32_data value " + llvm::Twine(v) + " does not fit " +
                    elementTypeName(type));
      if (size == 4)
        appendLittleEndian(out, v);
      else if (size == 2)
        appendLittleEndian(out, static_cast<uint16_t>(v));
      else
        out.push_back(static_cast<char>(v));
    }
    break;
  }
  }
  data.bytes = out;
  return llvm::Error::success();
}

Expected<TensorData> TensorReader::read(const ::onnx::TensorProto &tensor,
                                        StringRef what) {
  auto fail = [&](const llvm::Twine &message) {
    return makeError(file, what + ": " + message);
  };
  if (!llvm::sys::IsLittleEndianHost)
    return fail("sits reads tensor data on little-endian hosts only");
  TensorData data;
  data.elementType = tensor.data_type();
  int64_t elementSize = getElementSize(data.elementType);
  if (elementSize == 0)
    return fail("has element type " + elementTypeName(data.elementType) +
                ", which sits does not support");
  if (tensor.has_segment())
    return fail("is a segmented tensor, which sits does not support");
  data.dims.assign(tensor.dims().begin(), tensor.dims().end());
  int64_t count = 1;
  for (auto [i, dim] : llvm::enumerate(data.dims)) {
    if (dim < 0)
      return fail("has negative dimension " + llvm::Twine(dim) + " at index " +
                  llvm::Twine(i) + " (dims " + formatDims(data.dims) + ")");
    if (!multiplyChecked(count, dim, count))
      return fail("dims " + formatDims(data.dims) +
                  " overflow the element count");
  }
  int64_t byteSize;
  if (!multiplyChecked(count, elementSize, byteSize))
    return fail("dims " + formatDims(data.dims) + " of " +
                elementTypeName(data.elementType) +
                " overflow the size in bytes");
  data.numElements = count;

  bool external = tensor.data_location() == ::onnx::TensorProto::EXTERNAL;
  bool hasTypedData = tensor.float_data_size() || tensor.int32_data_size() ||
                      tensor.int64_data_size() || tensor.double_data_size() ||
                      tensor.uint64_data_size() || tensor.string_data_size();
  if (external) {
    if (tensor.has_raw_data() || hasTypedData)
      return fail("has both external data and data in the file");
    if (llvm::Error error = readExternal(tensor, what, byteSize, data))
      return std::move(error);
    return std::move(data);
  }
  if (tensor.external_data_size() > 0)
    return fail("has external_data entries, but its data_location is not "
                "EXTERNAL");
  if (tensor.has_raw_data()) {
    if (hasTypedData)
      return fail("has both raw_data and typed data fields");
    const std::string &raw = tensor.raw_data();
    if (static_cast<int64_t>(raw.size()) != byteSize)
      return fail("raw_data holds " + llvm::Twine(raw.size()) +
                  " bytes, but dims " + formatDims(data.dims) + " of " +
                  elementTypeName(data.elementType) + " need " +
                  llvm::Twine(byteSize) + " (" + llvm::Twine(count) +
                  " elements x " + llvm::Twine(elementSize) + " bytes)");
    data.bytes = llvm::ArrayRef<char>(raw.data(), raw.size());
    if (data.elementType == ::onnx::TensorProto::BOOL &&
        llvm::any_of(data.bytes, [](char c) { return c != 0 && c != 1; }))
      return fail("raw_data of a BOOL tensor holds a byte other than 0 or 1");
    return std::move(data);
  }
  if (llvm::Error error = readTypedFields(tensor, what, data))
    return std::move(error);
  return std::move(data);
}

//===----------------------------------------------------------------------===//
// OnnxModel
//===----------------------------------------------------------------------===//

OnnxModel::~OnnxModel() = default;

Expected<std::unique_ptr<OnnxModel>> OnnxModel::load(StringRef path) {
  Expected<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      readWholeFile(path, "model");
  if (!buffer)
    return buffer.takeError();
  auto fail = [&](const llvm::Twine &message) {
    return makeError(path, message);
  };
  std::unique_ptr<OnnxModel> model(new OnnxModel());
  model->path = path.str();
  model->proto = std::make_unique<::onnx::ModelProto>();
  if ((*buffer)->getBufferSize() == 0)
    return fail("empty file, not an ONNX model");
  if (!parseMessage(*model->proto, **buffer))
    return fail("not a valid ONNX model: the protobuf data is truncated "
                "or corrupt");
  const ::onnx::ModelProto &proto = *model->proto;
  if (!proto.has_graph())
    return fail("not an ONNX model: it has no graph");
  if (proto.ir_version() <= 0)
    return fail("no ir_version: an ONNX model must state its IR version");

  // Opsets: the default domain ("" or its alias "ai.onnx"), once.
  bool found = false;
  for (const ::onnx::OperatorSetIdProto &opset : proto.opset_import()) {
    StringRef domain = opset.domain();
    if (domain != "" && domain != "ai.onnx")
      continue;
    if (found)
      return fail("opset_import lists the default ONNX domain more than once");
    found = true;
    model->opsetVersion = opset.version();
    if (opset.version() < kMinOnnxOpset || opset.version() > kMaxOnnxOpset)
      return fail("opset_import: domain '" + domain + "' (ai.onnx) version " +
                  llvm::Twine(opset.version()) +
                  " is not supported; sits supports the default ONNX domain "
                  "from opset " +
                  llvm::Twine(kMinOnnxOpset) + " to " +
                  llvm::Twine(kMaxOnnxOpset));
  }
  if (!found)
    return fail("no opset_import for the default ONNX domain ('' or "
                "'ai.onnx'); sits supports opset " +
                llvm::Twine(kMinOnnxOpset) + " to " +
                llvm::Twine(kMaxOnnxOpset));

  // A merged decoder's branch joins the graph first, so that its
  // initializers get every check below.
  if (llvm::Error error =
          unmergeDecoder(*model->proto, model->path, model->unmerged))
    return std::move(error);
  const ::onnx::GraphProto &graph = proto.graph();
  if (graph.sparse_initializer_size() > 0)
    return fail("sparse initializer '" +
                graph.sparse_initializer(0).values().name() +
                "' is not supported");
  llvm::StringMap<int> initializerNames;
  for (const ::onnx::TensorProto &tensor : graph.initializer()) {
    if (tensor.name().empty())
      return fail("has an initializer without a name");
    if (!initializerNames.try_emplace(tensor.name(), 0).second)
      return fail("initializer '" + tensor.name() + "' is defined twice");
  }
  model->reader = std::make_unique<TensorReader>(
      model->path, llvm::sys::path::parent_path(path).str());
  return std::move(model);
}

//===----------------------------------------------------------------------===//
// Tensor files
//===----------------------------------------------------------------------===//

Expected<LoadedTensor> sits::readTensorProtoFile(StringRef path) {
  Expected<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      readWholeFile(path, "tensor file");
  if (!buffer)
    return buffer.takeError();
  ::onnx::TensorProto tensor;
  if (!parseMessage(tensor, **buffer))
    return makeError(path, "not a valid ONNX TensorProto: the protobuf "
                           "data is truncated or corrupt");
  if (!tensor.has_data_type())
    return makeError(path, "not an ONNX TensorProto: it has no "
                           "data_type");
  TensorReader reader(path.str(), llvm::sys::path::parent_path(path).str());
  std::string what = tensor.name().empty() ? std::string("tensor")
                                           : "tensor '" + tensor.name() + "'";
  Expected<TensorData> data = reader.read(tensor, what);
  if (!data)
    return data.takeError();
  LoadedTensor loaded;
  loaded.name = tensor.name();
  loaded.elementType = data->getElementType();
  loaded.dims.assign(data->getDims().begin(), data->getDims().end());
  loaded.data.assign(data->getBytes().begin(), data->getBytes().end());
  return std::move(loaded);
}
