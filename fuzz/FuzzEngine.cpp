//===- FuzzEngine.cpp - Fuzzes the engine reader and validator ------------===//
//
// Input: the bytes of an engine file. Runs what `sits-run --check` and
// `--inspect` run on a file copied from elsewhere: readEngine (header,
// sections, metadata JSON, plan, validateContents), describeEngine, and the
// tokenizer stored in the engine. The content hash is not verified: a
// mutated file would almost never get past it, and the hash check itself
// is a few lines the unit tests cover.
//
//===----------------------------------------------------------------------===//

#include "sits/EngineFormat.h"
#include "sits/Error.h"
#include "sits/ModelTokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace sits::format;
  std::unique_ptr<EngineFile> file =
      EngineFile::fromBytes(std::vector<uint8_t>(data, data + size));
  ReadOptions options;
  options.verifyContentHash = false;
  Header header;
  EngineContents contents;
  RuntimeConfig config;
  std::string error;
  if (!readEngine(*file, options, &header, &contents, &config, &error)) {
    // Every refusal says why.
    if (error.empty())
      __builtin_trap();
    return 0;
  }
  (void)describeEngine(header, contents, config, /*verbose=*/true);
  try {
    auto tokenizer = sits::ModelTokenizer::fromEngine(contents, config);
    if (tokenizer)
      (void)tokenizer->encode("Hello, world!");
  } catch (const sits::Error &) {
    // A clear refusal of the stored tokenizer files.
  }
  return 0;
}
