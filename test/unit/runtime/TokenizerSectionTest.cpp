//===- TokenizerSectionTest.cpp - The engine's tokenizer section ----------===//
//
// The files round-trip byte for byte; the section and the metadata's
// "tokenizer.kind" must agree; hostile file names, duplicates and sizes are
// refused with a message naming the cause.
//
//===----------------------------------------------------------------------===//

#include "TestEngines.h"
#include "sits/Json.h"

#include <gtest/gtest.h>

using namespace sits;
using namespace sits::format;

namespace {

class TokenizerSectionTest : public ::testing::Test {
protected:
  void SetUp() override {
    contents = test::buildToyEngine(config, test::makeToyWeights(config),
                                    test::placeholderModule(config));
  }

  void setKind(const char *kind) {
    json::Value root;
    std::string error;
    ASSERT_TRUE(json::parse(contents.metadataJson, &root, &error)) << error;
    json::Value tokenizer = *root.find("tokenizer");
    tokenizer.set("kind", kind);
    root.set("tokenizer", tokenizer);
    contents.metadataJson = root.write();
  }

  /// Serializes and reads back; "" or the error.
  std::string roundTrip(EngineContents *read = nullptr,
                        Header *header = nullptr) {
    std::vector<uint8_t> bytes;
    std::string error;
    if (!serializeEngine(contents, &bytes, &error))
      return "serialize: " + error;
    // The contents read point into the file's bytes: keep them alive.
    readFile = EngineFile::fromBytes(std::move(bytes));
    Header h;
    EngineContents c;
    RuntimeConfig rc;
    if (!readEngine(*readFile, {}, &h, &c, &rc, &error))
      return error;
    if (read)
      *read = std::move(c);
    if (header)
      *header = h;
    return "";
  }

  test::ToyConfig config;
  EngineContents contents;
  std::unique_ptr<EngineFile> readFile;
};

TEST_F(TokenizerSectionTest, FilesRoundTripVerbatim) {
  setKind("huggingface");
  std::string binary("{\"a\": \"\\u00e9\"}\n\0tail", 19);
  contents.tokenizerFiles = {{"tokenizer.json", binary},
                             {"tokenizer_config.json", "{}"},
                             {"chat_template.jinja", ""}};
  EngineContents read;
  Header header;
  ASSERT_EQ(roundTrip(&read, &header), "");
  ASSERT_EQ(read.tokenizerFiles.size(), 3u);
  EXPECT_EQ(read.tokenizerFiles[0].name, "tokenizer.json");
  EXPECT_EQ(read.tokenizerFiles[0].content, binary);
  EXPECT_EQ(read.findTokenizerFile("chat_template.jinja")->content, "");
  EXPECT_EQ(read.findTokenizerFile("missing.json"), nullptr);
  // The section sits between the plan and the weights, which stay last.
  ASSERT_EQ(header.sections.size(), 5u);
  EXPECT_EQ(header.sections[3].kind, uint32_t(SectionKind::Tokenizer));
  EXPECT_EQ(header.sections[4].kind, uint32_t(SectionKind::Weights));
  EXPECT_EQ(header.formatMinor, 1u);
  // Serializing what was read gives the same bytes.
  std::vector<uint8_t> first, second;
  std::string error;
  ASSERT_TRUE(serializeEngine(contents, &first, &error));
  ASSERT_TRUE(serializeEngine(read, &second, &error));
  EXPECT_EQ(first, second);
}

TEST_F(TokenizerSectionTest, NoFilesNoSection) {
  Header header;
  ASSERT_EQ(roundTrip(nullptr, &header), "");
  EXPECT_EQ(header.sections.size(), 4u);
}

TEST_F(TokenizerSectionTest, KindAndSectionMustAgree) {
  setKind("huggingface");
  EXPECT_NE(roundTrip().find("\"tokenizer.kind\" is \"huggingface\" but the "
                             "engine holds no tokenizer.json"),
            std::string::npos)
      << roundTrip();
  setKind("none");
  contents.tokenizerFiles = {{"tokenizer.json", "{}"}};
  EXPECT_NE(roundTrip().find("holds a tokenizer.json but its metadata's "
                             "\"tokenizer.kind\" is not \"huggingface\""),
            std::string::npos)
      << roundTrip();
  setKind("sentencepiece");
  EXPECT_NE(roundTrip().find("\"tokenizer.kind\" must be \"bytes\", "
                             "\"huggingface\" or \"none\""),
            std::string::npos)
      << roundTrip();
}

TEST_F(TokenizerSectionTest, RefusesHostileNamesAndDuplicates) {
  setKind("huggingface");
  for (const char *name : {"../tokenizer.json", "a/b", "", "..", "x y"}) {
    contents.tokenizerFiles = {{"tokenizer.json", "{}"}, {name, "{}"}};
    EXPECT_NE(roundTrip().find("has a name that is not a plain file name"),
              std::string::npos)
        << name << ": " << roundTrip();
  }
  contents.tokenizerFiles = {{"tokenizer.json", "{}"},
                             {"tokenizer.json", "{}"}};
  EXPECT_NE(roundTrip().find("tokenizer file \"tokenizer.json\" appears twice"),
            std::string::npos)
      << roundTrip();
  contents.tokenizerFiles.assign(kMaxTokenizerFiles + 1,
                                 {"tokenizer.json", "{}"});
  EXPECT_NE(roundTrip().find("the number of tokenizer files (9) exceeds"),
            std::string::npos)
      << roundTrip();
}

TEST_F(TokenizerSectionTest, TruncatedSectionIsRefused) {
  setKind("huggingface");
  contents.tokenizerFiles = {{"tokenizer.json", std::string(100, 'x')}};
  std::vector<uint8_t> bytes = test::serializeOrDie(contents);
  // Claim a longer file than the section holds, then fix the hash so that
  // the section's own check must catch it.
  uint64_t offset = test::sectionOffset(bytes, SectionKind::Tokenizer);
  uint64_t blobLength = offset + 4 + 4 + std::string("tokenizer.json").size();
  bytes[blobLength] = 0xff;
  test::rehash(bytes);
  auto file = EngineFile::fromBytes(std::move(bytes));
  Header header;
  EngineContents read;
  RuntimeConfig rc;
  std::string error;
  EXPECT_FALSE(readEngine(*file, {}, &header, &read, &rc, &error));
  EXPECT_NE(error.find("tokenizer section: a tokenizer file runs past the end "
                       "of its section"),
            std::string::npos)
      << error;
}

} // namespace
