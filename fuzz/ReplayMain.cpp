//===- ReplayMain.cpp - Runs a fuzz target over files, without libFuzzer --===//
//
// The main() of the fuzz targets in builds without libFuzzer (gcc, or
// clang without SITS_BUILD_FUZZERS): every file argument, and every file in
// every folder argument, goes once through LLVMFuzzerTestOneInput. A crash
// or sanitizer report fails the test that runs it. Arguments starting with
// '-' are libFuzzer flags and are ignored, so that ctest runs both builds with
// the same command line.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

bool runFile(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  // A copy of exactly the input's size, so that ASan sees reads past it.
  std::vector<uint8_t> input(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(input.empty() ? nullptr : input.data(), input.size());
  return true;
}

} // namespace

int main(int argc, char **argv) {
  size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!arg.empty() && arg[0] == '-')
      continue;
    std::error_code ec;
    if (!std::filesystem::is_directory(arg, ec)) {
      if (!runFile(arg))
        return 1;
      ++count;
      continue;
    }
    std::vector<std::filesystem::path> files;
    for (const auto &entry : std::filesystem::directory_iterator(arg, ec))
      if (entry.is_regular_file())
        files.push_back(entry.path());
    if (ec) {
      std::fprintf(stderr, "replay: cannot list %s: %s\n", arg.c_str(),
                   ec.message().c_str());
      return 1;
    }
    std::sort(files.begin(), files.end());
    for (const auto &file : files) {
      if (!runFile(file))
        return 1;
      ++count;
    }
  }
  std::printf("replay: %zu inputs ran\n", count);
  return 0;
}
