//===- LoaderTest.cpp - Reading ONNX tensors and models safely ------------===//

#include "frontends/onnx/OnnxLoader.h"

#include "sits_onnx/onnx.pb.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <unistd.h>

using namespace sits;

namespace {

/// A fresh folder per test, removed afterwards.
class TempDir {
public:
  TempDir() {
    llvm::SmallString<128> path;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("sits-loader", path));
    dir = std::string(path);
  }
  ~TempDir() { llvm::sys::fs::remove_directories(dir); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, name);
    return std::string(path);
  }
  std::string dir;
};

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string serialize(const ::onnx::TensorProto &tensor) {
  std::string bytes;
  EXPECT_TRUE(tensor.SerializeToString(&bytes));
  return bytes;
}

::onnx::TensorProto floatTensor(std::vector<int64_t> dims) {
  ::onnx::TensorProto tensor;
  tensor.set_name("t");
  tensor.set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t dim : dims)
    tensor.add_dims(dim);
  return tensor;
}

/// The error message of `expected` (which must fail).
template <typename T> std::string errorOf(llvm::Expected<T> expected) {
  if (expected)
    return "<no error>";
  return llvm::toString(expected.takeError());
}

TEST(ReadTensorProtoFile, ReadsACommittedTestInput) {
  std::string path = std::string(SITS_SOURCE_DIR) +
                     "/test/models/llama_gqa/test_data_set_0/input_0.pb";
  llvm::Expected<LoadedTensor> tensor = readTensorProtoFile(path);
  ASSERT_TRUE(static_cast<bool>(tensor)) << llvm::toString(tensor.takeError());
  EXPECT_EQ(tensor->name, "input_ids");
  EXPECT_EQ(tensor->elementType, ::onnx::TensorProto::INT64);
  EXPECT_EQ(tensor->dims, (llvm::SmallVector<int64_t, 4>{2, 12}));
  EXPECT_EQ(tensor->data.size(), 2u * 12u * 8u);
}

TEST(ReadTensorProtoFile, TypedFieldsBecomeLittleEndianBytes) {
  TempDir dir;
  ::onnx::TensorProto tensor = floatTensor({2});
  tensor.add_float_data(1.0f);
  tensor.add_float_data(-2.5f);
  writeFile(dir.file("t.pb"), serialize(tensor));
  llvm::Expected<LoadedTensor> loaded = readTensorProtoFile(dir.file("t.pb"));
  ASSERT_TRUE(static_cast<bool>(loaded)) << llvm::toString(loaded.takeError());
  ASSERT_EQ(loaded->data.size(), 8u);
  float values[2];
  std::memcpy(values, loaded->data.data(), 8);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], -2.5f);
}

TEST(ReadTensorProtoFile, Float16FromInt32DataBitPatterns) {
  TempDir dir;
  ::onnx::TensorProto tensor;
  tensor.set_data_type(::onnx::TensorProto::FLOAT16);
  tensor.add_dims(1);
  tensor.add_int32_data(0x3C00); // 1.0 in f16
  writeFile(dir.file("t.pb"), serialize(tensor));
  llvm::Expected<LoadedTensor> loaded = readTensorProtoFile(dir.file("t.pb"));
  ASSERT_TRUE(static_cast<bool>(loaded)) << llvm::toString(loaded.takeError());
  ASSERT_EQ(loaded->data.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(loaded->data[0]), 0x00);
  EXPECT_EQ(static_cast<unsigned char>(loaded->data[1]), 0x3C);
}

TEST(ReadTensorProtoFile, ExternalDataInTheSameFolder) {
  TempDir dir;
  float values[3] = {4.0f, 5.0f, 6.0f};
  std::string data(8, '\0');
  data.append(reinterpret_cast<const char *>(values), sizeof(values));
  writeFile(dir.file("data.bin"), data);
  ::onnx::TensorProto tensor = floatTensor({3});
  tensor.set_data_location(::onnx::TensorProto::EXTERNAL);
  auto *location = tensor.add_external_data();
  location->set_key("location");
  location->set_value("data.bin");
  auto *offset = tensor.add_external_data();
  offset->set_key("offset");
  offset->set_value("8");
  writeFile(dir.file("t.pb"), serialize(tensor));
  llvm::Expected<LoadedTensor> loaded = readTensorProtoFile(dir.file("t.pb"));
  ASSERT_TRUE(static_cast<bool>(loaded)) << llvm::toString(loaded.takeError());
  ASSERT_EQ(loaded->data.size(), 12u);
  EXPECT_EQ(std::memcmp(loaded->data.data(), values, 12), 0);
}

/// A tensor of `type` and `dims` in `location` at `offset` (with its
/// length).
::onnx::TensorProto externalTensor(int type, std::vector<int64_t> dims,
                                   const std::string &location,
                                   int64_t offset) {
  ::onnx::TensorProto tensor;
  tensor.set_name("t");
  tensor.set_data_type(type);
  for (int64_t dim : dims)
    tensor.add_dims(dim);
  tensor.set_data_location(::onnx::TensorProto::EXTERNAL);
  auto *entry = tensor.add_external_data();
  entry->set_key("location");
  entry->set_value(location);
  entry = tensor.add_external_data();
  entry->set_key("offset");
  entry->set_value(std::to_string(offset));
  int64_t length = TensorReader::getElementSize(type);
  for (int64_t dim : dims)
    length *= dim;
  entry = tensor.add_external_data();
  entry->set_key("length");
  entry->set_value(std::to_string(length));
  return tensor;
}

TEST(TensorReader, MapsLargeExternalDataAndReadsTheRest) {
  TempDir dir;
  std::string data(2 + 4 * 20000, '\0');
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<char>(i * 7);
  writeFile(dir.file("w.bin"), data);
  auto reader = std::make_unique<TensorReader>(dir.file("model.onnx"), dir.dir);
  reader->mapExternalData(4 * 16384);
  auto read = [&](const ::onnx::TensorProto &tensor) {
    llvm::Expected<TensorData> result = reader->read(tensor, "initializer 't'");
    EXPECT_TRUE(static_cast<bool>(result)) << toString(result.takeError());
    return result ? std::move(*result) : TensorData();
  };
  auto same = [&](const TensorData &tensor, size_t offset) {
    return std::memcmp(tensor.getBytes().data(), data.data() + offset,
                       tensor.getBytes().size()) == 0;
  };
  // 64 KiB at an aligned offset: mapped.
  TensorData large =
      read(externalTensor(::onnx::TensorProto::FLOAT, {16384}, "w.bin", 4));
  EXPECT_TRUE(large.getMapping());
  EXPECT_TRUE(same(large, 4));
  // Smaller, or at an offset that is not a multiple of its element size,
  // or BOOL (checked byte by byte): read.
  TensorData small =
      read(externalTensor(::onnx::TensorProto::FLOAT, {16383}, "w.bin", 4));
  EXPECT_FALSE(small.getMapping());
  EXPECT_TRUE(same(small, 4));
  TensorData unaligned =
      read(externalTensor(::onnx::TensorProto::FLOAT, {16384}, "w.bin", 2));
  EXPECT_FALSE(unaligned.getMapping());
  EXPECT_TRUE(same(unaligned, 2));
  writeFile(dir.file("b.bin"), std::string(1 << 17, '\1'));
  TensorData flags =
      read(externalTensor(::onnx::TensorProto::BOOL, {1 << 17}, "b.bin", 0));
  EXPECT_FALSE(flags.getMapping());
  // The checks come first: past the end is refused, mapped or not.
  std::string error = errorOf(reader->read(
      externalTensor(::onnx::TensorProto::FLOAT, {20000}, "w.bin", 4),
      "initializer 't'"));
  EXPECT_NE(error.find("is past the end of 'w.bin'"), std::string::npos)
      << error;
  // The mapping lives as long as the tensors that point into it.
  reader.reset();
  EXPECT_TRUE(same(large, 4));
}

TEST(TensorReader, ReadsExternalDataUnlessAskedToMap) {
  TempDir dir;
  writeFile(dir.file("w.bin"), std::string(1 << 17, '\3'));
  TensorReader reader(dir.file("model.onnx"), dir.dir);
  llvm::Expected<TensorData> tensor = reader.read(
      externalTensor(::onnx::TensorProto::FLOAT, {1 << 15}, "w.bin", 0),
      "initializer 't'");
  ASSERT_TRUE(static_cast<bool>(tensor)) << toString(tensor.takeError());
  EXPECT_FALSE(tensor->getMapping());
  EXPECT_EQ(tensor->getBytes().size(), 1u << 17);
}

TEST(ReadTensorProtoFile, RefusesMalformedTensors) {
  TempDir dir;
  auto check = [&](const ::onnx::TensorProto &tensor,
                   llvm::StringRef expected) {
    writeFile(dir.file("t.pb"), serialize(tensor));
    std::string error = errorOf(readTensorProtoFile(dir.file("t.pb")));
    EXPECT_NE(error.find(expected.str()), std::string::npos)
        << "got: " << error;
    EXPECT_NE(error.find("t.pb: tensor 't'"), std::string::npos)
        << "got: " << error;
  };
  ::onnx::TensorProto negative = floatTensor({-2});
  check(negative, "has negative dimension -2 at index 0");
  ::onnx::TensorProto overflow = floatTensor({1ll << 40, 1ll << 40});
  check(overflow, "overflow the element count");
  ::onnx::TensorProto raw = floatTensor({4});
  raw.set_raw_data(std::string(15, '\0'));
  check(raw, "raw_data holds 15 bytes, but dims [4] of FLOAT need 16");
  ::onnx::TensorProto wrongField = floatTensor({1});
  wrongField.add_int64_data(1);
  check(wrongField, "stores its values in int64_data, but element type FLOAT "
                    "uses float_data");
  ::onnx::TensorProto absolute = floatTensor({1});
  absolute.set_data_location(::onnx::TensorProto::EXTERNAL);
  auto *entry = absolute.add_external_data();
  entry->set_key("location");
  entry->set_value("/etc/passwd");
  check(absolute, "is an absolute path");
  entry->set_value("../escape.bin");
  check(absolute, "escapes the model's folder");
  entry->set_value("missing.bin");
  check(absolute, "does not exist in the model's folder");
}

TEST(ReadTensorProtoFile, RefusesSymlinkedExternalData) {
  TempDir dir;
  TempDir outside;
  writeFile(outside.file("secret.bin"), std::string(4, '\1'));
  ASSERT_EQ(::symlink(outside.file("secret.bin").c_str(),
                      dir.file("data.bin").c_str()),
            0);
  ::onnx::TensorProto tensor = floatTensor({1});
  tensor.set_data_location(::onnx::TensorProto::EXTERNAL);
  auto *entry = tensor.add_external_data();
  entry->set_key("location");
  entry->set_value("data.bin");
  writeFile(dir.file("t.pb"), serialize(tensor));
  std::string error = errorOf(readTensorProtoFile(dir.file("t.pb")));
  EXPECT_NE(error.find("'data.bin' is a symlink"), std::string::npos) << error;
}

TEST(ReadTensorProtoFile, RefusesFilesThatAreNotTensors) {
  TempDir dir;
  writeFile(dir.file("garbage.pb"), "\xff\xff\xff\xff not protobuf");
  EXPECT_NE(errorOf(readTensorProtoFile(dir.file("garbage.pb")))
                .find("not a valid ONNX TensorProto"),
            std::string::npos);
  writeFile(dir.file("empty.pb"), "");
  EXPECT_NE(errorOf(readTensorProtoFile(dir.file("empty.pb")))
                .find("not an ONNX TensorProto: it has no data_type"),
            std::string::npos);
  EXPECT_NE(errorOf(readTensorProtoFile(dir.file("missing.pb")))
                .find("cannot open tensor file"),
            std::string::npos);
}

TEST(OnnxModel, LoadsACommittedModel) {
  std::string path =
      std::string(SITS_SOURCE_DIR) + "/test/models/llama_gqa/model.onnx";
  llvm::Expected<std::unique_ptr<OnnxModel>> model = OnnxModel::load(path);
  ASSERT_TRUE(static_cast<bool>(model)) << llvm::toString(model.takeError());
  EXPECT_EQ((*model)->getOpsetVersion(), 20);
  EXPECT_EQ((*model)->getProto().graph().node_size(), 211);
}

TEST(OnnxModel, ErrorsNameTheFile) {
  TempDir dir;
  ::onnx::ModelProto model;
  model.set_ir_version(8);
  model.mutable_graph()->set_name("g");
  auto *opset = model.add_opset_import();
  opset->set_version(26);
  std::string bytes;
  ASSERT_TRUE(model.SerializeToString(&bytes));
  writeFile(dir.file("m.onnx"), bytes);
  llvm::Expected<std::unique_ptr<OnnxModel>> loaded =
      OnnxModel::load(dir.file("m.onnx"));
  ASSERT_FALSE(static_cast<bool>(loaded));
  std::string file, message;
  llvm::handleAllErrors(loaded.takeError(), [&](const OnnxFileError &error) {
    file = error.getFile().str();
    message = error.getMessage().str();
  });
  EXPECT_EQ(file, dir.file("m.onnx"));
  EXPECT_EQ(message, "opset_import: domain '' (ai.onnx) version 26 is not "
                     "supported; sits supports the default ONNX domain from "
                     "opset 17 to 25");
}

TEST(CheckedArithmetic, DetectsOverflow) {
  int64_t result = 0;
  EXPECT_TRUE(multiplyChecked(1ll << 31, 1ll << 31, result));
  EXPECT_EQ(result, 1ll << 62);
  EXPECT_FALSE(multiplyChecked(1ll << 32, 1ll << 32, result));
  EXPECT_FALSE(addChecked(INT64_MAX, 1, result));
}

} // namespace
