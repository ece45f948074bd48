//===- OnnxFuzzInput.h - ONNX fuzz inputs as files in a private folder -*- C++
//-*-===//
//
// The ONNX loader reads a path (external data is resolved in the model's
// folder, with its symlink and hard-link checks), so a fuzz input becomes
// files: `u32 little-endian model size, model bytes, external data bytes`
// is written as `model.onnx` and `model.onnx.data` in a folder made with
// mkdtemp (mode 0700) once per process, and removed at exit.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_FUZZ_ONNXFUZZINPUT_H
#define SITS_FUZZ_ONNXFUZZINPUT_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace sits::fuzz {

class OnnxFuzzFolder {
public:
  OnnxFuzzFolder() {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/sits-fuzz-onnx-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    folder = pattern;
  }
  ~OnnxFuzzFolder() {
    std::remove(modelPath().c_str());
    std::remove(dataPath().c_str());
    rmdir(folder.c_str());
  }

  std::string modelPath() const { return folder + "/model.onnx"; }
  std::string dataPath() const { return folder + "/model.onnx.data"; }

  /// Writes the input's files; the data file exists only when the input
  /// holds external data bytes.
  void write(const uint8_t *data, size_t size) {
    size_t modelSize = size;
    if (size >= 4) {
      uint32_t prefix;
      std::memcpy(&prefix, data, 4);
      data += 4;
      size -= 4;
      modelSize = prefix < size ? prefix : size;
    }
    writeFile(modelPath(), data, modelSize);
    std::remove(dataPath().c_str());
    if (size > modelSize)
      writeFile(dataPath(), data + modelSize, size - modelSize);
  }

private:
  static void writeFile(const std::string &path, const uint8_t *data,
                        size_t size) {
    FILE *file = std::fopen(path.c_str(), "wb");
    if (!file || (size && std::fwrite(data, 1, size, file) != size) ||
        std::fclose(file) != 0) {
      std::perror(path.c_str());
      std::abort();
    }
  }

  std::string folder;
};

} // namespace sits::fuzz

#endif // SITS_FUZZ_ONNXFUZZINPUT_H
