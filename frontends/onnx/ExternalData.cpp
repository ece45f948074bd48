//===- ExternalData.cpp - External tensor data, confined to a folder ------===//
//
// ONNX lets a tensor's bytes live in another file, named by a `location`
// relative to the model. A hostile model could point that anywhere, so
// sits resolves it component by component with openat(O_NOFOLLOW) from the
// model's folder: absolute paths, `..`, symlinks (at any depth) and files
// with more than one hard link (which could be a file from outside the
// folder) are refused. Offsets and lengths are checked against the size of
// the file actually opened (fstat of that descriptor), and against the
// tensor's own size, before any buffer is allocated. Large tensors of a
// model are then mapped from the descriptor that was checked, not read.
//
//===----------------------------------------------------------------------===//

#include "dialects/sits/WeightView.h"
#include "frontends/onnx/OnnxLoader.h"

#include "sits_onnx/onnx.pb.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace sits;
using llvm::Expected;
using llvm::StringRef;

namespace {
/// A read-only mapping of a whole external data file, registered so that
/// the engine writer can drop the pages of each weight it is done with.
struct Mapping {
  void *base = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (!base)
      return;
    unregisterMappedRange(base);
    ::munmap(base, size);
  }
};
} // namespace

/// One external data file, opened once per reader (and mapped once).
struct TensorReader::ExternalFile {
  int fd = -1;
  int64_t size = 0;
  std::shared_ptr<Mapping> mapping;
  bool mapFailed = false;
  ~ExternalFile() {
    if (fd >= 0)
      ::close(fd);
  }
};

TensorReader::TensorReader(std::string file, std::string directory)
    : file(std::move(file)), directory(std::move(directory)) {}

TensorReader::~TensorReader() = default;

static llvm::Error makeError(StringRef file, const llvm::Twine &message) {
  return llvm::make_error<OnnxFileError>(file.str(), message.str());
}

/// Closes a descriptor when it goes out of scope.
namespace {
struct ScopedFd {
  int fd;
  explicit ScopedFd(int fd) : fd(fd) {}
  ~ScopedFd() {
    if (fd >= 0)
      ::close(fd);
  }
  int release() {
    int result = fd;
    fd = -1;
    return result;
  }
};
} // namespace

/// Splits `location` into path components after checking that it stays
/// inside the model's folder.
static llvm::Error
splitLocation(StringRef location, llvm::SmallVectorImpl<StringRef> &components,
              const std::function<llvm::Error(const llvm::Twine &)> &fail) {
  if (location.empty())
    return fail("external data location is empty");
  if (location.contains('\0'))
    return fail("external data location contains a NUL character");
  if (location.starts_with("/"))
    return fail("external data location '" + location +
                "' is an absolute path; it must be relative to the model's "
                "folder");
  if (location.contains('\\') ||
      (location.size() >= 2 && llvm::isAlpha(location[0]) &&
       location[1] == ':'))
    return fail("external data location '" + location +
                "' is not a relative path with '/' separators");
  llvm::SmallVector<StringRef> parts;
  location.split(parts, '/');
  for (StringRef part : parts) {
    if (part.empty() || part == ".")
      continue;
    if (part == "..")
      return fail("external data location '" + location +
                  "' escapes the model's folder ('..' is not allowed)");
    components.push_back(part);
  }
  if (components.empty())
    return fail("external data location '" + location + "' names no file");
  return llvm::Error::success();
}

Expected<TensorReader::ExternalFile *>
TensorReader::openExternal(StringRef location, StringRef what) {
  auto it = externalFiles.find(location);
  if (it != externalFiles.end())
    return it->second.get();
  std::function<llvm::Error(const llvm::Twine &)> fail =
      [&](const llvm::Twine &message) {
        return makeError(file, what + ": " + message);
      };
  llvm::SmallVector<StringRef> components;
  if (llvm::Error error = splitLocation(location, components, fail))
    return std::move(error);

  std::string folder = directory.empty() ? "." : directory;
  ScopedFd dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.fd < 0)
    return fail("cannot open the model's folder '" + folder +
                "': " + std::strerror(errno));
  auto describeFailure = [&](int parentFd, StringRef component,
                             int savedErrno) -> llvm::Error {
    struct stat st;
    std::string name = component.str();
    if (::fstatat(parentFd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode))
      return fail("external data location '" + location + "': '" + component +
                  "' is a symlink; sits refuses symlinks in "
                  "external data paths");
    if (savedErrno == ENOENT)
      return fail("external data file '" + location +
                  "' does not exist in the model's folder");
    return fail("cannot open external data file '" + location +
                "': " + std::strerror(savedErrno));
  };
  for (StringRef component : llvm::ArrayRef(components).drop_back()) {
    std::string name = component.str();
    int next = ::openat(dir.fd, name.c_str(),
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0)
      return describeFailure(dir.fd, component, errno);
    ::close(dir.release());
    dir.fd = next;
  }
  std::string last = components.back().str();
  ScopedFd fd(
      ::openat(dir.fd, last.c_str(),
               O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.fd < 0)
    return describeFailure(dir.fd, components.back(), errno);
  struct stat st;
  if (::fstat(fd.fd, &st) != 0)
    return fail("cannot stat external data file '" + location +
                "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return fail("external data '" + location + "' is not a regular file");
  if (st.st_nlink > 1)
    return fail("external data file '" + location + "' has " +
                llvm::Twine(static_cast<uint64_t>(st.st_nlink)) +
                " hard links; sits refuses hard-linked external data (the "
                "other link could be a file outside the model's folder)");
  auto opened = std::make_unique<ExternalFile>();
  opened->fd = fd.release();
  opened->size = st.st_size;
  ExternalFile *result = opened.get();
  externalFiles[location] = std::move(opened);
  return result;
}

/// Parses a non-negative decimal integer that fits int64.
static std::optional<int64_t> parseOffset(StringRef text) {
  if (text.empty() || text.size() > 19 ||
      !llvm::all_of(text, [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  uint64_t value = 0;
  if (text.getAsInteger(10, value) || value > static_cast<uint64_t>(INT64_MAX))
    return std::nullopt;
  return static_cast<int64_t>(value);
}

llvm::Error TensorReader::readExternal(const ::onnx::TensorProto &tensor,
                                       StringRef what, int64_t byteSize,
                                       TensorData &data) {
  auto fail = [&](const llvm::Twine &message) {
    return makeError(file, what + ": " + message);
  };
  std::optional<std::string> location;
  std::optional<int64_t> offset, length;
  for (const ::onnx::StringStringEntryProto &entry : tensor.external_data()) {
    StringRef key = entry.key();
    if (key == "location") {
      if (location)
        return fail("external_data names its location twice");
      location = entry.value();
    } else if (key == "offset" || key == "length") {
      std::optional<int64_t> &slot = key == "offset" ? offset : length;
      if (slot)
        return fail("external_data gives its " + key + " twice");
      slot = parseOffset(entry.value());
      if (!slot)
        return fail("external_data " + key + " '" + entry.value() +
                    "' is not a non-negative integer that fits int64");
    } else if (key != "checksum") {
      return fail("unknown external_data key '" + key +
                  "' (expected location, offset, length or checksum)");
    }
  }
  if (!location)
    return fail("has data_location EXTERNAL but no external_data location");

  Expected<ExternalFile *> opened = openExternal(*location, what);
  if (!opened)
    return opened.takeError();
  int64_t fileSize = (*opened)->size;
  int64_t start = offset.value_or(0);
  if (start > fileSize)
    return fail("external data offset " + llvm::Twine(start) +
                " is past the end of '" + *location + "' (" +
                llvm::Twine(fileSize) + " bytes)");
  int64_t size = length ? *length : fileSize - start;
  int64_t end;
  if (!addChecked(start, size, end) || end > fileSize)
    return fail("external data offset " + llvm::Twine(start) + " + length " +
                llvm::Twine(size) + " is past the end of '" + *location +
                "' (" + llvm::Twine(fileSize) + " bytes)");
  if (size != byteSize)
    return fail("external data length " + llvm::Twine(size) +
                " does not match the tensor's size: " +
                llvm::Twine(data.getNumElements()) + " elements x " +
                llvm::Twine(getElementSize(data.getElementType())) +
                " bytes = " + llvm::Twine(byteSize));

  // Sizes are proven consistent with the file. A large tensor is mapped:
  // its pages are read when used, and never copied.
  ExternalFile &external = **opened;
  int64_t elementSize = getElementSize(data.getElementType());
  if (mapMinBytes > 0 && byteSize >= mapMinBytes &&
      data.getElementType() != ::onnx::TensorProto::BOOL &&
      start % elementSize == 0 && !external.mapFailed) {
    if (!external.mapping) {
      void *base = ::mmap(nullptr, static_cast<size_t>(fileSize), PROT_READ,
                          MAP_PRIVATE, external.fd, 0);
      if (base == MAP_FAILED) {
        external.mapFailed = true; // read it instead
      } else {
        external.mapping = std::make_shared<Mapping>();
        external.mapping->base = base;
        external.mapping->size = static_cast<size_t>(fileSize);
        registerMappedRange(base, external.mapping->size);
      }
    }
    if (external.mapping) {
      data.bytes = llvm::ArrayRef<char>(
          static_cast<const char *>(external.mapping->base) + start,
          static_cast<size_t>(byteSize));
      data.mapping = external.mapping;
      return llvm::Error::success();
    }
  }

  // Otherwise allocate and read.
  data.owned.resize(byteSize);
  int64_t done = 0;
  while (done < byteSize) {
    ssize_t got = ::pread((*opened)->fd, data.owned.data() + done,
                          static_cast<size_t>(std::min<int64_t>(
                              byteSize - done, int64_t(1) << 30)),
                          start + done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return fail("cannot read external data from '" + *location + "'" +
                  (got < 0 ? ": " + std::string(std::strerror(errno))
                           : std::string(": the file is shorter than it "
                                         "was when opened")));
    done += got;
  }
  if (data.getElementType() == ::onnx::TensorProto::BOOL &&
      llvm::any_of(data.owned, [](char c) { return c != 0 && c != 1; }))
    return fail("external data of a BOOL tensor holds a byte other than 0 "
                "or 1");
  data.bytes = data.owned;
  return llvm::Error::success();
}
