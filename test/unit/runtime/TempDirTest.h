//===- TempDirTest.h - A test fixture with a fresh directory ---*- C++ -*-===//
//
// For the tests that write engine files: each test gets its own directory
// under /tmp, removed with the files in it after the test.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_TEST_UNIT_RUNTIME_TEMPDIRTEST_H
#define SITS_TEST_UNIT_RUNTIME_TEMPDIRTEST_H

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace sits {
namespace test {

class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    char templ[] = "/tmp/sits-test.XXXXXX";
    ASSERT_NE(mkdtemp(templ), nullptr);
    dir = templ;
  }
  void TearDown() override {
    for (const std::string &name : listDir())
      std::remove((dir + "/" + name).c_str());
    rmdir(dir.c_str());
  }
  /// The names of the files in the directory.
  std::vector<std::string> listDir() const {
    std::vector<std::string> names;
    if (DIR *d = opendir(dir.c_str())) {
      while (dirent *entry = readdir(d))
        if (entry->d_name[0] != '.')
          names.push_back(entry->d_name);
      closedir(d);
    }
    return names;
  }
  std::string dir;
};

} // namespace test
} // namespace sits

#endif // SITS_TEST_UNIT_RUNTIME_TEMPDIRTEST_H
