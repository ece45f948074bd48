//===- AtomicFileTest.cpp - Outputs appear complete or not at all ---------===//
//
// The signal tests fork: the child writes and is then killed (or kills
// itself), and the parent checks what is left in the folder.
//
//===----------------------------------------------------------------------===//

#include "sits/AtomicFile.h"
#include "TempDirTest.h"

#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace sits;

namespace {

class AtomicFileTest : public test::TempDirTest {
protected:
  std::string read(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static void writeAll(const AtomicFile &file, const std::string &text) {
    ASSERT_EQ(::write(file.fd(), text.data(), text.size()),
              ssize_t(text.size()));
  }
  /// Runs `child` in a forked process; returns its wait status.
  template <typename Fn> int inChild(Fn child) {
    pid_t pid = ::fork();
    if (pid == 0) {
      child();
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }
};

TEST_F(AtomicFileTest, AppearsOnlyWhenCommitted) {
  for (bool anonymous : {true, false}) {
    std::string path = dir + "/out.txt", error;
    {
      AtomicFile file;
      ASSERT_TRUE(file.create(path, &error, anonymous)) << error;
      EXPECT_EQ(file.isAnonymous(), anonymous);
      writeAll(file, "new");
      EXPECT_EQ(listDir().size(), anonymous ? 0u : 1u);
      ASSERT_TRUE(file.commit(false, &error)) << error;
    }
    EXPECT_EQ(read(path), "new");
    EXPECT_EQ(listDir(), std::vector<std::string>{"out.txt"});
    {
      AtomicFile file; // not committed: the old file stays
      ASSERT_TRUE(file.create(path, &error, anonymous)) << error;
      writeAll(file, "discarded");
    }
    {
      AtomicFile file;
      ASSERT_TRUE(file.create(path, &error, anonymous)) << error;
      writeAll(file, "refused");
      EXPECT_FALSE(file.commit(false, &error));
      EXPECT_EQ(error, "'" + path +
                           "' already exists (use --force to "
                           "replace it)");
    }
    {
      AtomicFile file;
      ASSERT_TRUE(file.create(path, &error, anonymous)) << error;
      writeAll(file, "replaced");
      ASSERT_TRUE(file.commit(true, &error)) << error;
    }
    EXPECT_EQ(read(path), "replaced");
    EXPECT_EQ(listDir(), std::vector<std::string>{"out.txt"});
    std::remove(path.c_str());
  }
}

TEST_F(AtomicFileTest, MissingFolderIsAnError) {
  AtomicFile file;
  std::string error;
  EXPECT_FALSE(file.create(dir + "/missing/out.txt", &error));
  EXPECT_NE(error.find("No such file or directory"), std::string::npos)
      << error;
  EXPECT_TRUE(writeFileAtomic(dir + "/a.txt", "text", &error)) << error;
  EXPECT_EQ(read(dir + "/a.txt"), "text");
}

TEST_F(AtomicFileTest, SigkillLeavesNothingOfAnUnnamedFile) {
  std::string path = dir + "/out.txt";
  int status = inChild([&] {
    AtomicFile file;
    std::string error;
    if (!file.create(path, &error) || !file.isAnonymous())
      ::_exit(3);
    writeAll(file, std::string(1 << 20, 'x'));
    ::raise(SIGKILL);
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_TRUE(listDir().empty());
}

TEST_F(AtomicFileTest, SigtermRemovesANamedTemporary) {
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) {
    std::string path = dir + "/out.txt";
    int status = inChild([&] {
      AtomicFile file;
      std::string error;
      if (!file.create(path, &error, /*anonymous=*/false) ||
          file.temporaryPath().find("/out.txt.tmp.") == std::string::npos)
        ::_exit(3);
      writeAll(file, "partial");
      ::raise(signal);
      ::_exit(4); // not reached: the default action ends the process
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << status;
    EXPECT_EQ(WTERMSIG(status), signal);
    EXPECT_TRUE(listDir().empty());
  }
}

int exitCode = 0;
void exitFromHandler(int) { ::_exit(exitCode); }

TEST_F(AtomicFileTest, TheHandlerBeforeOursStillRuns) {
  std::string path = dir + "/out.txt";
  int status = inChild([&] {
    exitCode = 42;
    std::signal(SIGTERM, exitFromHandler);
    AtomicFile file;
    std::string error;
    if (!file.create(path, &error, /*anonymous=*/false))
      ::_exit(3);
    writeAll(file, "partial");
    ::raise(SIGTERM);
    ::_exit(4);
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 42);
  EXPECT_TRUE(listDir().empty());
}

} // namespace

// With the signals taken by a thread, a handler installed later (as NVRTC
// installs one that calls exit()) never runs: the process ends by the
// signal, and the named temporary is removed.
TEST_F(AtomicFileTest, SignalThreadEndsTheProcessBeforeOtherHandlers) {
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) {
    std::string path = dir + "/out.txt";
    int status = inChild([&] {
      terminateOnSignalsFromAThread();
      exitCode = 42;
      std::signal(signal, exitFromHandler);
      AtomicFile file;
      std::string error;
      if (!file.create(path, &error, /*anonymous=*/false))
        ::_exit(3);
      writeAll(file, "partial");
      // Process-directed, as from `kill`: the waiting thread takes it.
      ::kill(::getpid(), signal);
      for (int i = 0; i < 100; ++i)
        ::usleep(100000);
      ::_exit(4); // not reached
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << status;
    EXPECT_EQ(WTERMSIG(status), signal);
    EXPECT_TRUE(listDir().empty());
  }
}
