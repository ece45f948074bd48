//===- Codec.h - Binary encoding of the engine sections --------*- C++ -*-===//

#ifndef SITS_RUNTIME_FORMAT_CODEC_H
#define SITS_RUNTIME_FORMAT_CODEC_H

#include "format/Bytes.h"
#include "sits/EngineFormat.h"

#include <string>
#include <vector>

namespace sits {
namespace format {

std::vector<uint8_t> encodeKernels(const EngineContents &contents);
std::vector<uint8_t> encodePlan(const EngineContents &contents);
std::vector<uint8_t> encodeTokenizer(const EngineContents &contents);
std::vector<uint8_t> encodePersistent(const EngineContents &contents);

/// Decode into `contents` (appending); false with a message naming the
/// section and the field on malformed input.
bool decodeKernels(const uint8_t *data, uint64_t size, EngineContents *contents,
                   std::string *error);
bool decodePlan(const uint8_t *data, uint64_t size, EngineContents *contents,
                std::string *error);
bool decodeTokenizer(const uint8_t *data, uint64_t size,
                     EngineContents *contents, std::string *error);
bool decodePersistent(const uint8_t *data, uint64_t size,
                      EngineContents *contents, std::string *error);

/// The persistent decode section's rules (Persistent.cpp), for
/// validateContents.
bool validatePersistent(const EngineContents &contents,
                        const RuntimeConfig &config, std::string *error);

/// The fixed 128-byte header (section table excluded).
std::vector<uint8_t> encodeHeader(const Header &header);

/// The file up to its weights section: header (content hash zero), section
/// table, metadata, kernels, plan, (when the contents have tokenizer
/// files) tokenizer and (when they have one) persistent decode sections and
/// the padding after them,
/// for a weights section of `weightBytes` bytes (the contents' own weights
/// are not read).
bool encodePrefix(const EngineContents &contents, uint64_t weightBytes,
                  std::vector<uint8_t> *prefix, std::string *error);

} // namespace format
} // namespace sits

#endif // SITS_RUNTIME_FORMAT_CODEC_H
