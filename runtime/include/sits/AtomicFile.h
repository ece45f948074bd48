//===- AtomicFile.h - Files that appear complete or not at all -*- C++ -*-===//
//
// Every file sits writes (engines, IR, reports, logs) is written in full
// before it appears at its path, so that a failure, a signal or a kill never
// leaves a half-written output or harms an existing one.
//
// Where the file system supports it (Linux O_TMPFILE: ext4, xfs, btrfs,
// tmpfs), the data goes to an unnamed file in the target's folder that is
// linked into place at the end: a process killed even by SIGKILL leaves
// nothing. Elsewhere a named temporary (`PATH.tmp.XXXXXX`) is used, removed
// on failure and, by a handler chained before the previous one, on SIGINT,
// SIGTERM and SIGHUP.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_ATOMICFILE_H
#define SITS_ATOMICFILE_H

#include <string>

namespace sits {

class AtomicFile {
public:
  AtomicFile() = default;
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;
  /// Discards the data unless committed.
  ~AtomicFile();

  /// Starts writing `path`: false with `*error` naming the cause. With
  /// `anonymous` false the named temporary is used even where an unnamed
  /// file would work (for tests of that path).
  bool create(const std::string &path, std::string *error,
              bool anonymous = true);

  /// The descriptor to write to (read-write, at offset 0).
  int fd() const { return descriptor; }
  /// Whether the data is in an unnamed file (nothing to clean up).
  bool isAnonymous() const { return temporary.empty(); }
  /// The named temporary, empty for an unnamed file.
  const std::string &temporaryPath() const { return temporary; }

  /// fsyncs the data, makes it 0644, closes it and puts it at the path.
  /// Without `replace`, an existing file is never replaced (even one that
  /// appeared meanwhile): the error says to use --force.
  bool commit(bool replace, std::string *error);

  /// The message for a failed write of the data (with errno).
  std::string writeError() const;

private:
  bool link(const std::string &from, bool replace, std::string *error);
  bool linkUnnamed(const std::string &self, bool replace, std::string *error);

  int descriptor = -1;
  std::string target;
  std::string temporary;
  int signalSlot = -1;
};

/// Writes `text` to `path` through an AtomicFile, replacing an existing
/// file; false with `*error` naming the cause.
bool writeFileAtomic(const std::string &path, const std::string &text,
                     std::string *error);

/// Ends the process on SIGINT, SIGTERM and SIGHUP from a thread of its own
/// rather than from a signal handler: blocks them in the calling thread and
/// starts a thread that waits for one, removes the named temporaries of the
/// AtomicFiles being written and ends the process with the signal's default
/// action. Call it first in main, before any other thread starts, so that
/// every thread inherits the mask. For programs that call a library whose
/// own handler is not async-signal-safe: NVRTC installs one that calls
/// exit(), which deadlocks in free() when the signal interrupted a malloc.
/// An ignored signal stays ignored (blocked, never waited for). Processes
/// the program starts would inherit the blocked signals: sitsc starts none.
void terminateOnSignalsFromAThread();

} // namespace sits

#endif // SITS_ATOMICFILE_H
