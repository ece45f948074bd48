//===- CommandLine.h - Option parsing shared by the runtime tools -*- C++ -*-===//
//
// sits-run and sits-bench parse their options with these helpers, so that a
// bad value gets the same kind of message and exit code (2) in both.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_TOOLS_COMMANDLINE_H
#define SITS_RUNTIME_TOOLS_COMMANDLINE_H

#include <cstdint>
#include <string>
#include <vector>

namespace sits::tools {

/// Exit code for a bad command line.
constexpr int kExitUsage = 2;

class CommandLine {
public:
  CommandLine(const char *tool, const char *usage, int argc, char **argv)
      : tool(tool), usage(usage), argc(argc), argv(argv) {}

  /// Prints "TOOL: error: MESSAGE" and the usage, and exits with kExitUsage.
  [[noreturn]] void usageError(const std::string &message) const;
  /// Prints the usage and exits with 0 (for --help).
  [[noreturn]] void printUsage() const;

  /// The value after argv[i] (advancing i); a usage error when missing.
  const char *value(int &i) const;

  /// A non-negative integer no larger than `max`.
  uint64_t parseUnsigned(const std::string &option, const char *text,
                         uint64_t max) const;
  /// A finite number.
  double parseNumber(const std::string &option, const char *text) const;
  /// Comma-separated integers ("1,2,3").
  std::vector<int64_t> parseIntegers(const std::string &option,
                                     const char *text) const;
  /// Comma-separated non-negative integers in [min, max].
  std::vector<uint64_t> parseUnsignedList(const std::string &option,
                                          const char *text, uint64_t min,
                                          uint64_t max) const;

private:
  const char *tool;
  const char *usage;
  int argc;
  char **argv;
};

} // namespace sits::tools

#endif // SITS_RUNTIME_TOOLS_COMMANDLINE_H
