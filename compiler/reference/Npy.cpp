//===- Npy.cpp - NumPy .npy files for the reference executor --------------===//

#include "compiler/reference/Npy.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace sits::reference;

namespace {
struct DescrInfo {
  const char *descr;
  ElementType type;
  unsigned bytes;
};
} // namespace

// '<' little-endian, '|' not applicable (one byte).
static const DescrInfo kDescrs[] = {
    {"<f4", ElementType::F32, 4}, {"<f2", ElementType::F16, 2},
    {"<f8", ElementType::F64, 8}, {"<i8", ElementType::I64, 8},
    {"<i4", ElementType::I32, 4}, {"<u4", ElementType::U32, 4},
    {"<i2", ElementType::I16, 2}, {"<u2", ElementType::U16, 2},
    {"|i1", ElementType::I8, 1},  {"|u1", ElementType::U8, 1},
    {"|b1", ElementType::I1, 1},
};

static llvm::Error npyError(const llvm::Twine &message) {
  return llvm::createStringError(".npy: " + message.str());
}

/// The value text after `'key':` in a header dict, up to the next top-level
/// comma (a shape tuple's commas are inside parentheses).
static std::optional<llvm::StringRef> dictValue(llvm::StringRef header,
                                                llvm::StringRef key) {
  size_t at = header.find(("'" + key + "'").str());
  if (at == llvm::StringRef::npos)
    return std::nullopt;
  llvm::StringRef rest = header.drop_front(at + key.size() + 2).ltrim();
  if (!rest.consume_front(":"))
    return std::nullopt;
  rest = rest.ltrim();
  int depth = 0;
  size_t end = 0;
  for (; end < rest.size(); ++end) {
    char c = rest[end];
    if (c == '(')
      ++depth;
    else if (c == ')')
      --depth;
    else if ((c == ',' || c == '}') && depth == 0)
      break;
  }
  return rest.take_front(end).trim();
}

llvm::Expected<Tensor> sits::reference::parseNpy(llvm::StringRef bytes) {
  if (!bytes.starts_with("\x93NUMPY") || bytes.size() < 10)
    return npyError("not a .npy file (bad magic)");
  unsigned major = static_cast<unsigned char>(bytes[6]);
  size_t headerLength, headerStart;
  if (major == 1) {
    headerLength = static_cast<unsigned char>(bytes[8]) |
                   static_cast<unsigned char>(bytes[9]) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return npyError("truncated header");
    headerLength = 0;
    for (int i = 3; i >= 0; --i)
      headerLength =
          headerLength << 8 | static_cast<unsigned char>(bytes[8 + i]);
    headerStart = 12;
  } else {
    return npyError("unsupported version " + llvm::Twine(major));
  }
  if (bytes.size() < headerStart + headerLength)
    return npyError("truncated header");
  llvm::StringRef header = bytes.substr(headerStart, headerLength);

  std::optional<llvm::StringRef> descr = dictValue(header, "descr");
  std::optional<llvm::StringRef> fortran = dictValue(header, "fortran_order");
  std::optional<llvm::StringRef> shapeText = dictValue(header, "shape");
  if (!descr || !fortran || !shapeText)
    return npyError("header lacks descr, fortran_order or shape: " + header);
  if (*fortran != "False")
    return npyError("Fortran-order arrays are not supported");
  llvm::StringRef descrName = descr->trim("'\"");
  const DescrInfo *info = nullptr;
  for (const DescrInfo &candidate : kDescrs)
    if (descrName == candidate.descr ||
        (candidate.bytes == 1 && descrName == candidate.descr + 1))
      info = &candidate;
  if (!info)
    return npyError(
        "unsupported dtype '" + descrName +
        "' (f4, f2, f8, i8, i4, u4, i2, u2, i1, u1, b1, little-endian)");

  Shape shape;
  llvm::StringRef dims = shapeText->trim("() ");
  llvm::SmallVector<llvm::StringRef> parts;
  dims.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef part : parts) {
    part = part.trim();
    if (part.empty())
      continue;
    int64_t dim;
    if (part.getAsInteger(10, dim) || dim < 0)
      return npyError("bad shape " + *shapeText);
    shape.push_back(dim);
  }

  int64_t count = numElementsOf(shape);
  llvm::StringRef data = bytes.drop_front(headerStart + headerLength);
  if (data.size() != static_cast<size_t>(count) * info->bytes)
    return npyError("holds " + llvm::Twine(data.size()) + " data bytes, its " +
                    formatShape(shape) + " " + descrName + " header needs " +
                    llvm::Twine(count * info->bytes));
  return Tensor::fromLittleEndian(info->type, shape,
                                  llvm::ArrayRef(data.data(), data.size()));
}

llvm::Expected<Tensor> sits::reference::readNpyFile(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!buffer)
    return llvm::createStringError("cannot read '" + path.str() +
                                   "': " + buffer.getError().message());
  llvm::Expected<Tensor> tensor = parseNpy((*buffer)->getBuffer());
  if (!tensor)
    return llvm::createStringError(path.str() + ": " +
                                   llvm::toString(tensor.takeError()));
  return tensor;
}

std::string sits::reference::serializeNpy(const Tensor &tensor) {
  ElementType type = tensor.getElementType();
  if (type == ElementType::BF16)
    type = ElementType::F32;
  const DescrInfo *info = nullptr;
  for (const DescrInfo &candidate : kDescrs)
    if (candidate.type == type)
      info = &candidate;

  std::string dict = "{'descr': '" + std::string(info->descr) +
                     "', 'fortran_order': False, 'shape': (";
  for (int64_t i = 0; i < tensor.getRank(); ++i)
    dict += (i ? ", " : "") + std::to_string(tensor.getDim(i));
  // A one-element tuple needs its trailing comma: (3,).
  if (tensor.getRank() == 1)
    dict += ",";
  dict += "), }";
  // Pad with spaces so that the data starts 64-byte aligned, then '\n'.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';

  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  int64_t count = tensor.getNumElements();
  for (int64_t i = 0; i < count; ++i) {
    char bytes[8];
    switch (type) {
    case ElementType::F32:
      std::memcpy(bytes, &tensor.floats()[i], 4);
      break;
    case ElementType::F64: {
      double wide = tensor.floats()[i];
      std::memcpy(bytes, &wide, 8);
      break;
    }
    case ElementType::F16: {
      llvm::APFloat value(tensor.floats()[i]);
      bool lost;
      value.convert(llvm::APFloat::IEEEhalf(),
                    llvm::APFloat::rmNearestTiesToEven, &lost);
      uint16_t half = value.bitcastToAPInt().getZExtValue();
      std::memcpy(bytes, &half, 2);
      break;
    }
    default: {
      // The low bytes of the i64 (a little-endian host, as everywhere here).
      int64_t value = tensor.ints()[i];
      std::memcpy(bytes, &value, info->bytes);
      break;
    }
    }
    out.append(bytes, info->bytes);
  }
  return out;
}

llvm::Error sits::reference::writeNpyFile(llvm::StringRef path,
                                          const Tensor &tensor) {
  std::string bytes = serializeNpy(tensor);
  std::string temporary = path.str() + ".partial";
  {
    std::error_code code;
    llvm::raw_fd_ostream os(temporary, code, llvm::sys::fs::OF_None);
    if (code)
      return llvm::createStringError("cannot write '" + temporary +
                                     "': " + code.message());
    os << bytes;
    os.close();
    if (os.has_error()) {
      std::error_code writeError = os.error();
      os.clear_error();
      llvm::sys::fs::remove(temporary);
      return llvm::createStringError("cannot write '" + temporary +
                                     "': " + writeError.message());
    }
  }
  if (std::error_code code = llvm::sys::fs::rename(temporary, path)) {
    llvm::sys::fs::remove(temporary);
    return llvm::createStringError("cannot rename '" + temporary + "' to '" +
                                   path.str() + "': " + code.message());
  }
  return llvm::Error::success();
}
