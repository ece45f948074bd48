//===- CommandLine.cpp - Option parsing shared by the runtime tools -------===//

#include "CommandLine.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace sits::tools;

void CommandLine::usageError(const std::string &message) const {
  std::fprintf(stderr, "%s: error: %s\n%s", tool, message.c_str(), usage);
  std::exit(kExitUsage);
}

void CommandLine::printUsage() const {
  std::fputs(usage, stdout);
  std::exit(0);
}

const char *CommandLine::value(int &i) const {
  if (i + 1 >= argc)
    usageError(std::string(argv[i]) + " needs a value");
  return argv[++i];
}

uint64_t CommandLine::parseUnsigned(const std::string &option,
                                    const char *text, uint64_t max) const {
  char *end = nullptr;
  errno = 0;
  if (!*text || *text == '-' || *text == '+')
    usageError(option + " expects a non-negative integer, got '" + text + "'");
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno || *end || v > max)
    usageError(option + " expects an integer from 0 to " + std::to_string(max) +
               ", got '" + text + "'");
  return v;
}

double CommandLine::parseNumber(const std::string &option,
                                const char *text) const {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno || !*text || *end || !std::isfinite(v))
    usageError(option + " expects a number, got '" + text + "'");
  return v;
}

/// The comma-separated items of `text`; a usage error for an empty item.
static std::vector<std::string> splitItems(const CommandLine &cl,
                                           const std::string &option,
                                           const std::string &text) {
  std::vector<std::string> items;
  size_t pos = 0;
  while (true) {
    size_t comma = text.find(',', pos);
    std::string item =
        text.substr(pos, comma == std::string::npos ? comma : comma - pos);
    if (item.empty())
      cl.usageError(option + " expects comma-separated integers, got '' in '" +
                    text + "'");
    items.push_back(item);
    if (comma == std::string::npos)
      return items;
    pos = comma + 1;
  }
}

std::vector<int64_t> CommandLine::parseIntegers(const std::string &option,
                                                const char *text) const {
  std::vector<int64_t> values;
  for (const std::string &item : splitItems(*this, option, text)) {
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (errno || *end)
      usageError(option + " expects comma-separated integers, got '" + item +
                 "' in '" + text + "'");
    values.push_back(v);
  }
  return values;
}

std::vector<uint64_t> CommandLine::parseUnsignedList(const std::string &option,
                                                     const char *text,
                                                     uint64_t min,
                                                     uint64_t max) const {
  std::vector<uint64_t> values;
  for (const std::string &item : splitItems(*this, option, text)) {
    uint64_t v = parseUnsigned(option, item.c_str(), max);
    if (v < min)
      usageError(option + " values must be at least " + std::to_string(min) +
                 ", got " + std::to_string(v));
    values.push_back(v);
  }
  return values;
}
