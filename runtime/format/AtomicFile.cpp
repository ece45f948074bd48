//===- AtomicFile.cpp - Files that appear complete or not at all ----------===//

#include "sits/AtomicFile.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <pthread.h>
#include <random>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace sits {

namespace {

//===----------------------------------------------------------------------===//
// Removing named temporaries on SIGINT, SIGTERM and SIGHUP
//===----------------------------------------------------------------------===//

// Fixed slots, so that the handler only reads static memory and calls
// unlink (both async-signal-safe). More files at once than slots only lose
// the cleanup on a signal.
constexpr int kSlots = 16;
char slotPaths[kSlots][PATH_MAX];
std::atomic<bool> slotUsed[kSlots];

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction previousActions[3];

void unlinkTemporaries() {
  for (int i = 0; i < kSlots; ++i)
    if (slotUsed[i].load(std::memory_order_acquire))
      ::unlink(slotPaths[i]);
}

void removeTemporaries(int signal) {
  unlinkTemporaries();
  // Then whatever would have happened without us: the previous handler, or
  // the default action, once this handler returns.
  for (int i = 0; i < 3; ++i)
    if (kSignals[i] == signal)
      ::sigaction(signal, &previousActions[i], nullptr);
  ::raise(signal);
}

/// Puts our handler in front of the current one, unless it is there
/// already or the signal is ignored (then it ends nothing: keep the file).
/// Checked at each registration, so that a handler installed after ours
/// (by an embedding program) gets chained too.
void installHandlers() {
  for (int i = 0; i < 3; ++i) {
    struct sigaction current;
    if (::sigaction(kSignals[i], nullptr, &current) != 0 ||
        current.sa_handler == removeTemporaries ||
        current.sa_handler == SIG_IGN)
      continue;
    previousActions[i] = current;
    struct sigaction action = {};
    action.sa_handler = removeTemporaries;
    ::sigemptyset(&action.sa_mask);
    ::sigaction(kSignals[i], &action, nullptr);
  }
}

int registerTemporary(const std::string &path) {
  if (path.size() >= PATH_MAX)
    return -1;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  installHandlers();
  for (int i = 0; i < kSlots; ++i) {
    if (slotUsed[i].load(std::memory_order_relaxed))
      continue;
    std::memcpy(slotPaths[i], path.c_str(), path.size() + 1);
    slotUsed[i].store(true, std::memory_order_release);
    return i;
  }
  return -1;
}

void unregisterTemporary(int &slot) {
  if (slot >= 0)
    slotUsed[slot].store(false, std::memory_order_release);
  slot = -1;
}

std::string folderOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

void terminateOnSignalsFromAThread() {
  // All three are blocked, so that no library's handler ever runs for
  // them; an ignored one (nohup, a background job) is not waited for and
  // so stays ignored.
  sigset_t blocked, waited;
  ::sigemptyset(&blocked);
  ::sigemptyset(&waited);
  bool any = false;
  for (int signal : kSignals) {
    ::sigaddset(&blocked, signal);
    struct sigaction current;
    if (::sigaction(signal, nullptr, &current) == 0 &&
        current.sa_handler != SIG_IGN) {
      ::sigaddset(&waited, signal);
      any = true;
    }
  }
  if (::pthread_sigmask(SIG_BLOCK, &blocked, nullptr) != 0 || !any)
    return;
  std::thread([waited] {
    int signal = 0;
    while (::sigwait(&waited, &signal) != 0) {
    }
    unlinkTemporaries();
    // End as the signal's default action ends the process (its exit status
    // names the signal); _Exit only if that action somehow returns.
    ::signal(signal, SIG_DFL);
    sigset_t one;
    ::sigemptyset(&one);
    ::sigaddset(&one, signal);
    ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(signal);
    std::_Exit(128 + signal);
  }).detach();
}

//===----------------------------------------------------------------------===//
// AtomicFile
//===----------------------------------------------------------------------===//

AtomicFile::~AtomicFile() {
  if (descriptor >= 0)
    ::close(descriptor);
  if (!temporary.empty())
    ::unlink(temporary.c_str());
  unregisterTemporary(signalSlot);
}

bool AtomicFile::create(const std::string &path, std::string *error,
                        bool anonymous) {
  target = path;
#ifdef O_TMPFILE
  if (anonymous) {
    descriptor =
        ::open(folderOf(path).c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (descriptor >= 0)
      return true;
    // Only a file system without unnamed files falls back; other errors
    // (a missing or read-only folder) are the same for a named file.
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
      *error = "cannot create a temporary file next to '" + path +
               "': " + std::strerror(errno);
      return false;
    }
  }
#else
  (void)anonymous;
#endif
  std::string pattern = path + ".tmp.XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  descriptor = ::mkostemp(name.data(), O_CLOEXEC);
  if (descriptor < 0) {
    *error = "cannot create a temporary file next to '" + path +
             "': " + std::strerror(errno);
    return false;
  }
  temporary = name.data();
  signalSlot = registerTemporary(temporary);
  return true;
}

std::string AtomicFile::writeError() const {
  return "cannot write '" + target + "': " + std::strerror(errno);
}

bool AtomicFile::link(const std::string &from, bool replace,
                      std::string *error) {
  // Without replace, link() fails if the target appeared meanwhile, so an
  // existing file is never replaced.
  int rc = replace ? ::rename(from.c_str(), target.c_str())
                   : ::link(from.c_str(), target.c_str());
  if (rc == 0)
    return true;
  *error = errno == EEXIST
               ? "'" + target + "' already exists (use --force to replace it)"
               : "cannot create '" + target + "': " + std::strerror(errno);
  return false;
}

bool AtomicFile::commit(bool replace, std::string *error) {
  if (::fsync(descriptor) != 0 || ::fchmod(descriptor, 0644) != 0) {
    *error = writeError();
    return false;
  }
  if (!temporary.empty()) {
    int closing = descriptor;
    descriptor = -1;
    if (::close(closing) != 0) {
      *error = writeError();
      return false;
    }
    if (!link(temporary, replace, error))
      return false;
    if (replace) { // renamed: nothing left to remove
      temporary.clear();
      unregisterTemporary(signalSlot);
    }
    return true;
  }
  // An unnamed file gets its name through /proc (linkat with AT_EMPTY_PATH
  // would need CAP_DAC_READ_SEARCH). The data is on disk: closing it can no
  // longer fail in a way that matters.
  std::string self = "/proc/self/fd/" + std::to_string(descriptor);
  bool ok = linkUnnamed(self, replace, error);
  ::close(descriptor);
  descriptor = -1;
  return ok;
}

bool AtomicFile::linkUnnamed(const std::string &self, bool replace,
                             std::string *error) {
  auto linkTo = [&](const std::string &name) {
    return ::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, name.c_str(),
                    AT_SYMLINK_FOLLOW) == 0;
  };
  if (!replace) {
    if (linkTo(target))
      return true;
    *error = errno == EEXIST
                 ? "'" + target + "' already exists (use --force to replace it)"
                 : "cannot create '" + target + "': " + std::strerror(errno);
    return false;
  }
  // rename() needs a name to move: a fresh one beside the target, for the
  // instant between the two calls (removed on a signal).
  std::random_device random;
  for (int attempt = 0; attempt < 100; ++attempt) {
    char suffix[16];
    std::snprintf(suffix, sizeof(suffix), "%08x", unsigned(random()));
    std::string name = target + ".tmp." + suffix;
    if (!linkTo(name)) {
      if (errno == EEXIST)
        continue;
      *error = "cannot create '" + target + "': " + std::strerror(errno);
      return false;
    }
    temporary = name;
    signalSlot = registerTemporary(temporary);
    if (!link(temporary, /*replace=*/true, error))
      return false; // the destructor removes the name
    temporary.clear();
    unregisterTemporary(signalSlot);
    return true;
  }
  *error = "cannot create '" + target + "': no free temporary name beside it";
  return false;
}

bool writeFileAtomic(const std::string &path, const std::string &text,
                     std::string *error) {
  AtomicFile file;
  if (!file.create(path, error))
    return false;
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(file.fd(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      *error = file.writeError();
      return false;
    }
    done += size_t(n);
  }
  return file.commit(/*replace=*/true, error);
}

} // namespace sits
