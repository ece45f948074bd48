//===- ServeOptions.cpp - The serving options, declared once --------------===//
//
// Every sits-serve tool takes these; each is named, defaulted and explained
// here only (the defaults are ServeOptions' member initializers).
//
//===----------------------------------------------------------------------===//

#include "Server.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

using namespace sits;
using namespace sits::serve;

namespace {
struct OptionSpec {
  const char *name;
  const char *help;
  /// Stores `value`; an error message or "".
  std::function<std::string(const std::string &value, ServeOptions &)> set;
  std::function<std::string(const ServeOptions &)> show;
};
} // namespace

/// A whole decimal number in [min, max], or an error message.
static std::string parseNumber(const std::string &name, const std::string &text,
                               uint64_t min, uint64_t max, uint64_t &out) {
  char *end = nullptr;
  errno = 0;
  unsigned long long value = text.empty() || text[0] == '-' || text[0] == '+'
                                 ? 0
                                 : std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || text[0] == '+' || errno || *end ||
      value < min || value > max)
    return "--" + name + " expects an integer from " + std::to_string(min) +
           " to " + std::to_string(max) + ", got '" + text + "'";
  out = value;
  return "";
}

template <typename T>
static OptionSpec numberOption(const char *name, const char *help,
                               T ServeOptions::*member, uint64_t min,
                               uint64_t max) {
  return {name, help,
          [=](const std::string &value, ServeOptions &options) {
            uint64_t number = 0;
            std::string error = parseNumber(name, value, min, max, number);
            if (error.empty())
              options.*member = static_cast<T>(number);
            return error;
          },
          [=](const ServeOptions &options) {
            return std::to_string(options.*member);
          }};
}

/// A decimal number of milliseconds in [0, max].
static OptionSpec millisecondsOption(const char *name, const char *help,
                                     double ServeOptions::*member, double max) {
  return {name, help,
          [=](const std::string &value, ServeOptions &options) {
            char *end = nullptr;
            errno = 0;
            double number =
                value.empty() ? -1 : std::strtod(value.c_str(), &end);
            if (value.empty() || errno || *end || !std::isfinite(number) ||
                number < 0 || number > max)
              return "--" + std::string(name) +
                     " expects a number of milliseconds from 0 to " +
                     std::to_string(int64_t(max)) + ", got '" + value + "'";
            options.*member = number;
            return std::string();
          },
          [=](const ServeOptions &options) {
            char text[32];
            std::snprintf(text, sizeof(text), "%g", options.*member);
            return std::string(text);
          }};
}

/// A fraction strictly between 0 and `max` (< 1).
static OptionSpec fractionOption(const char *name, const char *help,
                                 double ServeOptions::*member, double max) {
  return {name, help,
          [=](const std::string &value, ServeOptions &options) {
            char *end = nullptr;
            errno = 0;
            double number =
                value.empty() ? -1 : std::strtod(value.c_str(), &end);
            if (value.empty() || errno || *end || !std::isfinite(number) ||
                number <= 0 || number >= max) {
              char bound[32];
              std::snprintf(bound, sizeof(bound), "%g", max);
              return "--" + std::string(name) +
                     " expects a number greater than 0 and less than " + bound +
                     ", got '" + value + "'";
            }
            options.*member = number;
            return std::string();
          },
          [=](const ServeOptions &options) {
            char text[32];
            std::snprintf(text, sizeof(text), "%g", options.*member);
            return std::string(text);
          }};
}

static OptionSpec textOption(const char *name, const char *help,
                             std::string ServeOptions::*member) {
  return {name, help,
          [=](const std::string &value, ServeOptions &options) {
            if (value.empty())
              return "--" + std::string(name) + " expects a non-empty value";
            options.*member = value;
            return std::string();
          },
          [=](const ServeOptions &options) {
            const std::string &value = options.*member;
            // Only the model name is empty by default.
            return value.empty() ? std::string("the model file's stem") : value;
          }};
}

static const std::vector<OptionSpec> &specs() {
  static const std::vector<OptionSpec> all = {
      textOption("host", "Address to listen on", &ServeOptions::host),
      numberOption("port", "Port to listen on (0: a free one, printed)",
                   &ServeOptions::port, 0, 65535),
      textOption("model-name", "The model's id in the API",
                 &ServeOptions::modelName),
      numberOption("max-queue",
                   "Requests waiting for a slot at most; more get HTTP 429",
                   &ServeOptions::maxQueue, 0, 1u << 20),
      numberOption(
          "max-prefill-chunk",
          "Prompt tokens fed per request per step at most (longer "
          "prompts are prefilled over several steps, between the "
          "decode steps of running requests), at most the engine's "
          "prefill chunk; 0: 512, or the engine's chunk if that is smaller",
          &ServeOptions::maxPrefillChunk, 0, 1u << 20),
      numberOption("max-step-prefill-tokens",
                   "Prompt tokens fed per step at most, over all requests, "
                   "oldest first (bounds how long a step of new prompts "
                   "stalls the running streams); 0: no limit",
                   &ServeOptions::maxStepPrefillTokens, 0, 1u << 20),
      numberOption("retry-after",
                   "Least seconds a 429 response asks the client to wait "
                   "(more when the waiting requests take longer to start at "
                   "the recent completion rate; 60 at most)",
                   &ServeOptions::retryAfter, 1, 60),
      millisecondsOption("sla-p99-token-ms",
                         "Keep the p99 inter-token latency (per 100 ms "
                         "window) under this many ms by limiting the "
                         "requests running at once (AIMD between 1 and every "
                         "slot; 0: off)",
                         &ServeOptions::slaP99TokenMs, 600000),
      fractionOption("sla-tail-share",
                     "With --sla-p99-token-ms: the share of recent inter-token "
                     "gaps that rare bulk steps may make slow, prefilling "
                     "waiting prompts past the SLA budget up to "
                     "--max-step-prefill-tokens (keep it under the 1 % a "
                     "p99 allows)",
                     &ServeOptions::slaTailShare, 1),
      numberOption("prefix-cache-blocks",
                   "Blocks of prompt KV kept for reuse by requests sharing a "
                   "prompt prefix (0: no prefix caching)",
                   &ServeOptions::prefixCacheBlocks, 0, 1u << 20),
      numberOption("prefix-block-tokens",
                   "Tokens per prefix cache block (a prompt reuses whole "
                   "blocks)",
                   &ServeOptions::prefixBlockTokens, 1, 4096),
      numberOption("max-body-bytes",
                   "Largest request body accepted (HTTP 413 beyond)",
                   &ServeOptions::maxBodyBytes, 1024, uint64_t(1) << 32),
  };
  return all;
}

std::string serve::parseServeOptions(int argc, char **argv,
                                     ServeOptions &options,
                                     std::vector<char *> &rest) {
  if (argc > 0)
    rest.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const OptionSpec *match = nullptr;
    std::string value;
    bool hasValue = false;
    for (const OptionSpec &spec : specs()) {
      std::string flag = std::string("--") + spec.name;
      if (arg == flag) {
        match = &spec;
      } else if (arg.rfind(flag + "=", 0) == 0) {
        match = &spec;
        value = arg.substr(flag.size() + 1);
        hasValue = true;
      }
      if (match)
        break;
    }
    if (!match) {
      rest.push_back(argv[i]);
      continue;
    }
    if (!hasValue) {
      if (i + 1 >= argc)
        return arg + " needs a value";
      value = argv[++i];
    }
    std::string error = match->set(value, options);
    if (!error.empty())
      return error;
  }
  return "";
}

std::string serve::serveOptionsHelp() {
  ServeOptions defaults;
  std::string out;
  for (const OptionSpec &spec : specs()) {
    std::string flag = std::string("  --") + spec.name + "=<value>";
    flag.resize(std::max<size_t>(flag.size() + 1, 28), ' ');
    out += flag + spec.help + " (default: " + spec.show(defaults) + ")\n";
  }
  return out;
}
