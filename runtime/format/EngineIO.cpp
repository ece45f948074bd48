//===- EngineIO.cpp - Writing, mapping and reading engine files -----------===//

#include "format/Codec.h"
#include "format/EngineWriter.h"
#include "format/Hash.h"
#include "sits/EngineFormat.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sits {
namespace format {

//===----------------------------------------------------------------------===//
// Serialization
//===----------------------------------------------------------------------===//

std::vector<uint8_t> encodeHeader(const Header &header) {
  ByteWriter w;
  w.raw(kMagic.data(), kMagic.size());
  w.u16(header.formatMajor);
  w.u16(header.formatMinor);
  w.u32(static_cast<uint32_t>(kHeaderBytes));
  w.u32(header.targetSm);
  w.u32(header.cudaVersion);
  w.u32(static_cast<uint32_t>(header.sections.size()));
  w.u32(header.flags);
  w.u64(header.fileBytes);
  w.u64(header.sectionTableOffset);
  w.raw(header.sourceModelHash.data(), kHashBytes);
  w.raw(header.contentHash.data(), kHashBytes);
  w.zeros(kHeaderBytes - w.size());
  return std::move(w.bytes());
}

bool encodePrefix(const EngineContents &contents, uint64_t weightBytes,
                  std::vector<uint8_t> *prefix, std::string *error) {
  std::vector<uint8_t> kernels = encodeKernels(contents);
  std::vector<uint8_t> plan = encodePlan(contents);
  std::vector<uint8_t> tokenizer;
  struct Piece {
    SectionKind kind;
    const uint8_t *data;
    uint64_t size;
  };
  std::vector<Piece> pieces = {
      {SectionKind::Metadata,
       reinterpret_cast<const uint8_t *>(contents.metadataJson.data()),
       contents.metadataJson.size()},
      {SectionKind::Kernels, kernels.data(), kernels.size()},
      {SectionKind::Plan, plan.data(), plan.size()}};
  if (!contents.tokenizerFiles.empty()) {
    tokenizer = encodeTokenizer(contents);
    pieces.push_back(
        {SectionKind::Tokenizer, tokenizer.data(), tokenizer.size()});
  }
  std::vector<uint8_t> persistent;
  if (!contents.persistentDecode.empty()) {
    persistent = encodePersistent(contents);
    pieces.push_back(
        {SectionKind::PersistentDecode, persistent.data(), persistent.size()});
  }
  // The weights come last: the writer streams them after the prefix.
  pieces.push_back({SectionKind::Weights, nullptr, weightBytes});

  Header header;
  header.formatMinor = contents.formatMinor;
  header.targetSm = contents.targetSm;
  header.cudaVersion = contents.cudaVersion;
  header.sourceModelHash = contents.sourceModelHash;
  header.sectionTableOffset = kHeaderBytes;
  uint64_t cursor = kHeaderBytes + kSectionEntryBytes * pieces.size();
  for (const Piece &piece : pieces) {
    SectionEntry entry;
    entry.kind = static_cast<uint32_t>(piece.kind);
    if (!checkedAlignUp(cursor, kSectionAlignment, &entry.offset) ||
        !checkedAdd(entry.offset, piece.size, &cursor)) {
      *error = "engine is too large to address";
      return false;
    }
    entry.bytes = piece.size;
    header.sections.push_back(entry);
  }
  header.fileBytes = cursor;

  ByteWriter w;
  w.raw(encodeHeader(header).data(), kHeaderBytes);
  for (const SectionEntry &entry : header.sections) {
    w.u32(entry.kind);
    w.u32(entry.flags);
    w.u64(entry.offset);
    w.u64(entry.bytes);
    w.u64(0);
  }
  // Everything but the weights goes to the prefix.
  for (size_t i = 0; i + 1 < header.sections.size(); ++i) {
    w.zeros(header.sections[i].offset - w.size());
    w.raw(pieces[i].data, pieces[i].size);
  }
  w.zeros(header.sections.back().offset - w.size());
  *prefix = std::move(w.bytes());
  return true;
}

bool serializeEngine(const EngineContents &contents,
                     std::vector<uint8_t> *bytes, std::string *error) {
  if (!encodePrefix(contents, contents.weightSize(), bytes, error))
    return false;
  bytes->insert(bytes->end(), contents.weightBytes(),
                contents.weightBytes() + contents.weightSize());
  Hash hash = computeContentHash(bytes->data(), bytes->size());
  std::memcpy(bytes->data() + kContentHashOffset, hash.data(), kHashBytes);
  return true;
}

bool writeEngine(const EngineContents &contents, const std::string &path,
                 const WriteOptions &options, std::string *error) {
  const uint8_t *weights = contents.weightBytes();
  WeightSectionFill copy = [weights](uint64_t offset, uint8_t *out,
                                     uint64_t size, std::string *) {
    std::memcpy(out, weights + offset, size);
    return true;
  };
  return writeEngineWithFill(contents, contents.weightSize(), copy, path,
                             options, 0, error);
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

EngineFile::~EngineFile() {
  if (mapping)
    ::munmap(mapping, length);
}

std::unique_ptr<EngineFile> EngineFile::open(const std::string &path,
                                             std::string *error) {
  // O_NONBLOCK: opening a FIFO without a writer would otherwise block for
  // ever before fstat could refuse it; it changes nothing for regular files.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    *error = "cannot open engine '" + path + "': " + std::strerror(errno);
    return nullptr;
  }
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    *error = "engine '" + path + "' is not a regular file";
    return nullptr;
  }
  std::unique_ptr<EngineFile> file(new EngineFile());
  file->length = static_cast<uint64_t>(info.st_size);
  if (file->length > 0) {
    void *p = ::mmap(nullptr, file->length, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      *error = "cannot map engine '" + path + "': " + std::strerror(errno);
      ::close(fd);
      return nullptr;
    }
    file->mapping = p;
    file->base = static_cast<const uint8_t *>(p);
  }
  ::close(fd);
  return file;
}

std::unique_ptr<EngineFile> EngineFile::fromBytes(std::vector<uint8_t> bytes) {
  std::unique_ptr<EngineFile> file(new EngineFile());
  file->owned = std::move(bytes);
  file->base = file->owned.data();
  file->length = file->owned.size();
  return file;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

bool readHeader(const uint8_t *data, uint64_t size, Header *header,
                std::string *error) {
  if (size < kMagic.size() ||
      std::memcmp(data, kMagic.data(), kMagic.size()) != 0) {
    *error = "not a sits engine: wrong magic bytes at the start of the file";
    return false;
  }
  if (size < kHeaderBytes) {
    *error = "engine is truncated: " + std::to_string(size) +
             " bytes, less than its " + std::to_string(kHeaderBytes) +
             "-byte header";
    return false;
  }
  ByteReader r(data + kMagic.size(), kHeaderBytes - kMagic.size());
  header->formatMajor = r.u16();
  header->formatMinor = r.u16();
  std::string version = std::to_string(header->formatMajor) + "." +
                        std::to_string(header->formatMinor);
  std::string ours =
      std::to_string(kFormatMajor) + "." + std::to_string(kFormatMinor);
  if (header->formatMajor != kFormatMajor) {
    *error = "engine format " + version + " has major version " +
             std::to_string(header->formatMajor) + ", this runtime reads " +
             std::to_string(kFormatMajor) + ".x only (" +
             (header->formatMajor > kFormatMajor ? "update the runtime"
                                                 : "recompile the model") +
             ")";
    return false;
  }
  if (header->formatMinor > kFormatMinor) {
    *error = "engine format " + version + " is newer than this runtime's " +
             ours + ": update the runtime";
    return false;
  }
  uint32_t headerBytes = r.u32();
  header->targetSm = r.u32();
  header->cudaVersion = r.u32();
  uint32_t sectionCount = r.u32();
  header->flags = r.u32();
  header->fileBytes = r.u64();
  header->sectionTableOffset = r.u64();
  std::memcpy(header->sourceModelHash.data(), data + 48, kHashBytes);
  std::memcpy(header->contentHash.data(), data + kContentHashOffset,
              kHashBytes);
  if (headerBytes != kHeaderBytes) {
    *error = "engine header declares " + std::to_string(headerBytes) +
             " bytes, format 1 headers are " + std::to_string(kHeaderBytes);
    return false;
  }
  if (size < header->fileBytes) {
    *error = "engine is truncated: " + std::to_string(size) +
             " bytes, its header says " + std::to_string(header->fileBytes);
    return false;
  }
  if (size > header->fileBytes) {
    *error = "engine has " + std::to_string(size - header->fileBytes) +
             " unexpected bytes after its end (" +
             std::to_string(header->fileBytes) + " bytes)";
    return false;
  }
  if (sectionCount == 0 || sectionCount > kMaxSections) {
    *error = "engine declares " + std::to_string(sectionCount) +
             " sections (1 to " + std::to_string(kMaxSections) + " allowed)";
    return false;
  }
  uint64_t tableEnd =
      header->sectionTableOffset + kSectionEntryBytes * sectionCount;
  if (header->sectionTableOffset < kHeaderBytes ||
      header->sectionTableOffset > size || tableEnd > size) {
    *error = "engine section table (offset " +
             std::to_string(header->sectionTableOffset) +
             ") lies outside the file";
    return false;
  }
  ByteReader table(data + header->sectionTableOffset,
                   kSectionEntryBytes * sectionCount);
  for (uint32_t i = 0; i < sectionCount; ++i) {
    SectionEntry entry;
    entry.kind = table.u32();
    entry.flags = table.u32();
    entry.offset = table.u64();
    entry.bytes = table.u64();
    table.u64(); // reserved
    std::string name = std::string("section ") + std::to_string(i) + " (" +
                       sectionKindName(entry.kind) + ")";
    uint64_t end;
    if (!checkedAdd(entry.offset, entry.bytes, &end) || end > size ||
        entry.offset < tableEnd) {
      *error = name + " is out of bounds: offset " +
               std::to_string(entry.offset) + ", " +
               std::to_string(entry.bytes) + " bytes, in a file of " +
               std::to_string(size) + " bytes";
      return false;
    }
    if (entry.offset % kSectionAlignment != 0) {
      *error = name + " starts at offset " + std::to_string(entry.offset) +
               ", not a multiple of " + std::to_string(kSectionAlignment);
      return false;
    }
    for (const SectionEntry &other : header->sections) {
      if (other.kind == entry.kind) {
        *error = name + " appears twice";
        return false;
      }
      if (entry.offset < other.offset + other.bytes && other.offset < end) {
        *error =
            name + " overlaps the " + sectionKindName(other.kind) + " section";
        return false;
      }
    }
    header->sections.push_back(entry);
  }
  return true;
}

const SectionEntry *findSection(const Header &header, SectionKind kind) {
  for (const SectionEntry &entry : header.sections)
    if (entry.kind == static_cast<uint32_t>(kind))
      return &entry;
  return nullptr;
}

} // namespace

bool readEngine(const EngineFile &file, const ReadOptions &options,
                Header *header, EngineContents *contents, RuntimeConfig *config,
                std::string *error) {
  const uint8_t *data = file.data();
  uint64_t size = file.size();
  *header = Header();
  *contents = EngineContents();
  if (size == 0) {
    *error = "engine file is empty";
    return false;
  }
  if (!readHeader(data, size, header, error))
    return false;
  for (SectionKind kind : {SectionKind::Metadata, SectionKind::Kernels,
                           SectionKind::Plan, SectionKind::Weights}) {
    if (!findSection(*header, kind)) {
      *error = std::string("engine has no ") +
               sectionKindName(static_cast<uint32_t>(kind)) + " section";
      return false;
    }
  }
  if (options.verifyContentHash) {
    Hash actual = computeContentHash(data, size);
    if (actual != header->contentHash) {
      *error = "engine content hash mismatch: the file is corrupted (header "
               "says " +
               hashToHex(header->contentHash).substr(0, 16) +
               "..., contents hash to " + hashToHex(actual).substr(0, 16) +
               "...)";
      return false;
    }
  }
  contents->formatMinor = header->formatMinor;
  contents->targetSm = header->targetSm;
  contents->cudaVersion = header->cudaVersion;
  contents->sourceModelHash = header->sourceModelHash;

  const SectionEntry *meta = findSection(*header, SectionKind::Metadata);
  contents->metadataJson.assign(
      reinterpret_cast<const char *>(data + meta->offset), meta->bytes);
  if (!parseRuntimeConfig(contents->metadataJson, config, error))
    return false;
  if (config->kvCache.paged() && header->formatMinor < kPagedKVCacheMinor) {
    *error = "a paged KV cache needs format 1." +
             std::to_string(kPagedKVCacheMinor) + ", and the header says 1." +
             std::to_string(header->formatMinor);
    return false;
  }
  const SectionEntry *kernels = findSection(*header, SectionKind::Kernels);
  if (!decodeKernels(data + kernels->offset, kernels->bytes, contents, error))
    return false;
  const SectionEntry *plan = findSection(*header, SectionKind::Plan);
  if (!decodePlan(data + plan->offset, plan->bytes, contents, error))
    return false;
  if (const SectionEntry *tokenizer =
          findSection(*header, SectionKind::Tokenizer))
    if (!decodeTokenizer(data + tokenizer->offset, tokenizer->bytes, contents,
                         error))
      return false;
  const bool hasTokenizerJson =
      contents->findTokenizerFile("tokenizer.json") != nullptr;
  if ((config->tokenizer == TokenizerKind::HuggingFace) != hasTokenizerJson) {
    *error = hasTokenizerJson
                 ? "engine holds a tokenizer.json but its metadata's "
                   "\"tokenizer.kind\" is not \"huggingface\""
                 : "metadata \"tokenizer.kind\" is \"huggingface\" but the "
                   "engine holds no tokenizer.json in a tokenizer section";
    return false;
  }
  if (const SectionEntry *persistent =
          findSection(*header, SectionKind::PersistentDecode))
    if (!decodePersistent(data + persistent->offset, persistent->bytes,
                          contents, error))
      return false;
  const SectionEntry *weights = findSection(*header, SectionKind::Weights);
  contents->weightsData = data + weights->offset;
  contents->weightsBytes = weights->bytes;
  return validateContents(*contents, *config, error);
}

} // namespace format
} // namespace sits
