//===- AtomicOutput.cpp - Text outputs written whole or not at all --------===//

#include "compiler/pipeline/AtomicOutput.h"
#include "sits/AtomicFile.h"

#include "llvm/Support/FileSystem.h"

#include <cerrno>
#include <cstring>

using namespace sits;

llvm::Error sits::writeOutputAtomically(
    llvm::StringRef path,
    llvm::function_ref<llvm::Error(llvm::raw_ostream &)> print) {
  if (path == "-")
    return print(llvm::outs());
  auto failed = [&](const std::string &message) {
    return llvm::createStringError(std::errc::io_error, "%s", message.c_str());
  };
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status) &&
      !llvm::sys::fs::is_regular_file(status) &&
      !llvm::sys::fs::is_directory(status)) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return failed("cannot write '" + path.str() + "': " + ec.message());
    return print(os);
  }
  AtomicFile file;
  std::string error;
  if (!file.create(path.str(), &error))
    return failed(error);
  {
    llvm::raw_fd_ostream os(file.fd(), /*shouldClose=*/false);
    if (llvm::Error printError = print(os))
      return printError;
    os.flush();
    if (std::error_code ec = os.error()) {
      os.clear_error();
      return failed("cannot write '" + path.str() + "': " + ec.message());
    }
  }
  if (!file.commit(/*replace=*/true, &error))
    return failed(error);
  return llvm::Error::success();
}
