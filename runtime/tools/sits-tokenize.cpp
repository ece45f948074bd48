//===- sits-tokenize.cpp - Encode and decode with a tokenizer.json --------===//
//
//   sits-tokenize TOKENIZER.json (--text TEXT | --file FILE) [--no-special]
//                 [--ids-only]
//   sits-tokenize TOKENIZER.json --decode 1,2,3 [--keep-special] [--stream]
//                 [--json]
//   sits-tokenize TOKENIZER.json --bench [--file FILE] [--repeats N]
//   sits-tokenize TOKENIZER.json --info
//   sits-tokenize TOKENIZER.json --batch REQUESTS.jsonl
//
// Encoding prints the ids as a JSON array (--ids-only: comma-separated, the
// form --decode reads). --decode prints the text and a newline (--json: the
// text as a JSON string); --stream decodes token by token through
// sits::TokenStreamDecoder, printing each piece as it becomes final (--json:
// the pieces as a JSON array, the last one what finish() returned).
// --bench times encode and decode of the text on one thread (wall time) and
// prints MB/s (10^6 bytes of text per second). --batch reads one JSON request
// per line ({"encode": TEXT} or {"encode_hex": HEX} with "special": BOOL;
// {"decode": [IDS]} or {"stream": [IDS]} with "skip_special": BOOL) and
// writes one JSON answer per line; the test suite compares it with the
// `tokenizers` package.
//
// Exit codes: 0 success, 1 a bad tokenizer, text or id (the message says
// which), 2 a bad command line.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"
#include "sits/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

using sits::Error;
using sits::Tokenizer;
using sits::TokenStreamDecoder;

namespace {

constexpr int kExitBadInput = 1;

const char *kUsage =
    "usage: sits-tokenize TOKENIZER.json (--text TEXT | --file FILE) "
    "[--no-special] [--ids-only]\n"
    "       sits-tokenize TOKENIZER.json --decode 1,2,3 [--keep-special] "
    "[--stream] [--json]\n"
    "       sits-tokenize TOKENIZER.json --bench [--file FILE] [--repeats N]\n"
    "       sits-tokenize TOKENIZER.json --info\n"
    "       sits-tokenize TOKENIZER.json --batch REQUESTS.jsonl\n";

struct Options {
  std::string tokenizerPath;
  enum class Mode {
    None,
    Encode,
    Decode,
    Bench,
    Info,
    Batch
  } mode = Mode::None;
  std::string text, file, batchFile;
  bool haveText = false;
  bool addSpecial = true, idsOnly = false;
  std::vector<int32_t> decodeIds;
  bool keepSpecial = false, stream = false, json = false;
  unsigned repeats = 5;
};

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "sits-tokenize: error: %s\n", message.c_str());
  std::exit(kExitBadInput);
}

std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    fail("cannot read '" + path + "'");
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string toJson(const nlohmann::json &value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Options parseOptions(int argc, char **argv) {
  sits::tools::CommandLine cl("sits-tokenize", kUsage, argc, argv);
  Options options;
  auto setMode = [&](Options::Mode mode, const char *option) {
    if (options.mode != Options::Mode::None && options.mode != mode)
      cl.usageError(std::string(option) +
                    " cannot be combined with the other modes (--text/--file, "
                    "--decode, --bench, --info, --batch)");
    options.mode = mode;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      cl.printUsage();
    } else if (arg == "--text") {
      options.text = cl.value(i);
      options.haveText = true;
    } else if (arg == "--file") {
      options.file = cl.value(i);
    } else if (arg == "--no-special") {
      options.addSpecial = false;
    } else if (arg == "--ids-only") {
      options.idsOnly = true;
    } else if (arg == "--decode") {
      setMode(Options::Mode::Decode, "--decode");
      const char *list = cl.value(i);
      for (int64_t id : cl.parseIntegers("--decode", list)) {
        if (id < std::numeric_limits<int32_t>::min() ||
            id > std::numeric_limits<int32_t>::max())
          cl.usageError("--decode: " + std::to_string(id) +
                        " does not fit a token id");
        options.decodeIds.push_back(static_cast<int32_t>(id));
      }
    } else if (arg == "--keep-special") {
      options.keepSpecial = true;
    } else if (arg == "--stream") {
      options.stream = true;
    } else if (arg == "--json") {
      options.json = true;
    } else if (arg == "--bench") {
      setMode(Options::Mode::Bench, "--bench");
    } else if (arg == "--repeats") {
      options.repeats = static_cast<unsigned>(
          cl.parseUnsigned("--repeats", cl.value(i), 1000));
      if (options.repeats == 0)
        cl.usageError("--repeats must be at least 1");
    } else if (arg == "--info") {
      setMode(Options::Mode::Info, "--info");
    } else if (arg == "--batch") {
      setMode(Options::Mode::Batch, "--batch");
      options.batchFile = cl.value(i);
    } else if (!arg.empty() && arg[0] == '-') {
      cl.usageError("unknown option '" + arg + "'");
    } else if (options.tokenizerPath.empty()) {
      options.tokenizerPath = arg;
    } else {
      cl.usageError("unexpected argument '" + arg + "'");
    }
  }
  if (options.tokenizerPath.empty())
    cl.usageError("no tokenizer file given");
  if (options.haveText && !options.file.empty())
    cl.usageError("give only one of --text and --file");
  bool haveInput = options.haveText || !options.file.empty();
  if (options.mode == Options::Mode::None) {
    if (!haveInput)
      cl.usageError("give --text or --file to encode, or --decode, --bench, "
                    "--info or --batch");
    options.mode = Options::Mode::Encode;
  } else if (haveInput && options.mode != Options::Mode::Bench) {
    cl.usageError("--text and --file encode: they cannot be combined with "
                  "--decode, --info or --batch");
  }
  if (options.mode == Options::Mode::Bench && options.haveText)
    cl.usageError("--bench reads its text with --file");
  if ((options.stream || options.keepSpecial || options.json) &&
      options.mode != Options::Mode::Decode)
    cl.usageError("--stream, --keep-special and --json go with --decode");
  if ((options.idsOnly || !options.addSpecial) &&
      options.mode != Options::Mode::Encode)
    cl.usageError("--ids-only and --no-special go with --text or --file");
  return options;
}

/// The tokenizer of `path` (a tokenizer.json).
std::shared_ptr<const Tokenizer> loadTokenizer(const std::string &path) {
  return Tokenizer::fromFile(path);
}

void printIds(const std::vector<int32_t> &ids, bool idsOnly) {
  std::string out = idsOnly ? "" : "[";
  for (size_t i = 0; i < ids.size(); ++i)
    out += (i ? (idsOnly ? "," : ", ") : "") + std::to_string(ids[i]);
  out += idsOnly ? "\n" : "]\n";
  std::fputs(out.c_str(), stdout);
}

std::vector<std::string> streamPieces(std::shared_ptr<const Tokenizer> tok,
                                      const std::vector<int32_t> &ids,
                                      bool skipSpecial, bool print) {
  TokenStreamDecoder stream(std::move(tok), skipSpecial);
  std::vector<std::string> pieces;
  for (int32_t id : ids) {
    pieces.push_back(stream.push(id));
    if (print) {
      std::fwrite(pieces.back().data(), 1, pieces.back().size(), stdout);
      std::fflush(stdout);
    }
  }
  pieces.push_back(stream.finish());
  if (print)
    std::fwrite(pieces.back().data(), 1, pieces.back().size(), stdout);
  return pieces;
}

int runBatch(const std::shared_ptr<const Tokenizer> &tok,
             const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    fail("cannot read '" + path + "'");
  std::string line;
  size_t lineNumber = 0;
  while (std::getline(file, line)) {
    ++lineNumber;
    if (line.empty())
      continue;
    nlohmann::json request, answer;
    try {
      request = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception &error) {
      fail(path + ":" + std::to_string(lineNumber) +
           ": not a JSON request: " + error.what());
    }
    try {
      if (request.contains("encode") || request.contains("encode_hex")) {
        std::string text;
        if (request.contains("encode")) {
          text = request["encode"].get<std::string>();
        } else {
          std::string hex = request["encode_hex"].get<std::string>();
          for (size_t i = 0; i + 1 < hex.size(); i += 2)
            text.push_back(
                static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
        }
        answer["ids"] = tok->encode(text, request.value("special", true));
      } else if (request.contains("decode") || request.contains("stream")) {
        bool isStream = request.contains("stream");
        auto ids =
            request[isStream ? "stream" : "decode"].get<std::vector<int32_t>>();
        bool skip = request.value("skip_special", true);
        if (isStream)
          answer["pieces"] = streamPieces(tok, ids, skip, false);
        else
          answer["text"] = tok->decode(ids, skip);
      } else {
        fail(path + ":" + std::to_string(lineNumber) +
             ": expected encode, encode_hex, decode or stream");
      }
    } catch (const Error &error) {
      answer = {{"error", sits::errorCodeName(error.code())},
                {"message", error.what()}};
    } catch (const nlohmann::json::exception &error) {
      fail(path + ":" + std::to_string(lineNumber) +
           ": bad request: " + error.what());
    }
    std::string out = toJson(answer) + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return 0;
}

/// A multi-script sample for --bench without --file.
std::string builtinBenchText() {
  static const char *paragraphs[] = {
      "The quick brown fox jumps over the lazy dog; it's 3.14159 miles "
      "away, isn't it? Numbers: 1234567890, 42, 2024-06-01.\n",
      "Le cœur a ses raisons que la raison ne connaît point. Ça déçoit.\n",
      "Быстрая коричневая лиса перепрыгивает через ленивую собаку.\n",
      "Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο.\n",
      "敏捷的棕色狐狸跳过了懒狗。日本語のテキストも少し。\n",
      "الثعلب البني السريع يقفز فوق الكلب الكسول.\n",
      "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।\n",
      "def main(argv):\n\tif len(argv) > 1:\n\t\treturn 0  # done\n"
      "    print('hello, world')\n",
      "Emoji: 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ — and   runs"
      "   of   spaces.\r\n",
  };
  std::string text;
  unsigned counter = 0;
  while (text.size() < (1u << 20)) {
    for (const char *paragraph : paragraphs)
      text += paragraph;
    // Vary the words so that the word cache is not all that is measured.
    text += "Item " + std::to_string(counter * 7919 % 100003) + " of " +
            std::to_string(counter) + ".\n";
    ++counter;
  }
  return text;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

int runBench(const std::string &tokenizerPath, const Options &options) {
  auto start = std::chrono::steady_clock::now();
  auto tok = loadTokenizer(tokenizerPath);
  double loadSeconds = secondsSince(start);
  std::string text =
      options.file.empty() ? builtinBenchText() : readFile(options.file);
  std::printf("tokenizer: %s, %u ids, loaded in %.1f ms\n", tok->kind().c_str(),
              tok->vocabSize(), loadSeconds * 1e3);

  std::vector<double> encodeSeconds, decodeSeconds;
  std::vector<int32_t> ids;
  std::string decoded;
  for (unsigned r = 0; r < options.repeats; ++r) {
    start = std::chrono::steady_clock::now();
    ids = tok->encode(text, false);
    encodeSeconds.push_back(secondsSince(start));
  }
  for (unsigned r = 0; r < options.repeats; ++r) {
    start = std::chrono::steady_clock::now();
    decoded = tok->decode(ids, false);
    decodeSeconds.push_back(secondsSince(start));
  }
  double megabytes = static_cast<double>(text.size()) / 1e6;
  std::printf(
      "text: %zu bytes (%s), %zu tokens, %.2f bytes/token\n", text.size(),
      options.file.empty() ? "built-in sample" : options.file.c_str(),
      ids.size(), ids.empty() ? 0.0 : double(text.size()) / double(ids.size()));
  auto report = [&](const char *what, std::vector<double> seconds) {
    double first = seconds.front();
    std::sort(seconds.begin(), seconds.end());
    double median = seconds[seconds.size() / 2];
    std::printf("%s: %.2f MB/s (median of %zu runs; first run %.2f MB/s, best "
                "%.2f MB/s)\n",
                what, megabytes / median, seconds.size(), megabytes / first,
                megabytes / seconds.front());
  };
  report("encode", encodeSeconds);
  report("decode", decodeSeconds);
  if (decoded != text)
    std::printf("note: decode(encode(text)) differs from the text (a "
                "normalizer or unknown characters change it)\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options options = parseOptions(argc, argv);
  try {
    if (options.mode == Options::Mode::Bench)
      return runBench(options.tokenizerPath, options);
    auto tok = loadTokenizer(options.tokenizerPath);
    switch (options.mode) {
    case Options::Mode::Encode: {
      std::string text =
          options.haveText ? options.text : readFile(options.file);
      printIds(tok->encode(text, options.addSpecial), options.idsOnly);
      return 0;
    }
    case Options::Mode::Decode: {
      bool skip = !options.keepSpecial;
      // Without --json the text is written as it is, then a newline.
      if (options.stream) {
        auto pieces = streamPieces(tok, options.decodeIds, skip, !options.json);
        std::printf("%s\n", options.json ? toJson(pieces).c_str() : "");
        return 0;
      }
      std::string text = tok->decode(options.decodeIds, skip);
      if (options.json)
        text = toJson(text);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fputc('\n', stdout);
      return 0;
    }
    case Options::Mode::Info: {
      size_t special = 0;
      for (const auto &token : tok->addedTokens())
        special += token.special;
      std::printf("kind: %s\nids: %u\nadded tokens: %zu (%zu special)\n",
                  tok->kind().c_str(), tok->vocabSize(),
                  tok->addedTokens().size(), special);
      return 0;
    }
    case Options::Mode::Batch:
      return runBatch(tok, options.batchFile);
    default:
      return 0;
    }
  } catch (const Error &error) {
    fail(error.what());
  }
}
