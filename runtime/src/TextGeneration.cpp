//===- TextGeneration.cpp - Generation with text out and stop strings -----===//
//
// Session::generateText: Session::generate with one TextStream per sequence
// (UTF-8-safe pieces, stop strings) and the reason each sequence ended.
//
//===----------------------------------------------------------------------===//

#include "sits/Runtime.h"
#include "sits/TextStream.h"

#include <algorithm>

namespace sits {

const char *finishReasonName(FinishReason reason) {
  switch (reason) {
  case FinishReason::Length:
    return "length";
  case FinishReason::EndOfSequence:
    return "eos";
  case FinishReason::StopString:
    return "stop";
  case FinishReason::Cancelled:
    return "cancelled";
  }
  return "unknown";
}

TextResult
Session::generateText(const std::vector<std::vector<int32_t>> &prompts,
                      const TextGenerateParams &params,
                      const TextCallback &callback) {
  const std::shared_ptr<const ModelTokenizer> &tokenizer =
      engine()->tokenizer();
  if (!tokenizer)
    throw Error(ErrorCode::NoTokenizer,
                "this engine holds no tokenizer (compile it with the model's "
                "tokenizer.json: sitsc --tokenizer=DIR)");
  std::vector<TextStream> streams;
  for (size_t i = 0; i < prompts.size(); ++i)
    streams.emplace_back(tokenizer->tokenizer(), params.stop,
                         params.skipSpecialTokens);
  TextResult result;
  result.finishReasons.assign(prompts.size(), FinishReason::Length);
  std::vector<bool> cancelled(prompts.size(), false);
  const std::vector<int32_t> &eos = engine()->config().eosTokenIds;

  GenerateResult tokens =
      generate(prompts, params.generate, [&](uint32_t sequence, int32_t token) {
        TextStream &stream = streams[sequence];
        std::string piece = stream.push(token);
        if (params.generate.stopAtEos &&
            std::find(eos.begin(), eos.end(), token) != eos.end())
          piece += stream.finish();
        if (!piece.empty() && callback && !callback(sequence, piece)) {
          cancelled[sequence] = true;
          return false;
        }
        return !stream.stopped();
      });

  result.tokens = std::move(tokens.tokens);
  result.stats = tokens.stats;
  for (size_t s = 0; s < prompts.size(); ++s) {
    TextStream &stream = streams[s];
    const std::vector<int32_t> &out = result.tokens[s];
    bool atEos = !out.empty() && params.generate.stopAtEos &&
                 std::find(eos.begin(), eos.end(), out.back()) != eos.end();
    if (cancelled[s]) {
      result.finishReasons[s] = FinishReason::Cancelled;
    } else if (stream.stopped()) {
      result.finishReasons[s] = FinishReason::StopString;
    } else {
      if (!atEos) {
        // Text held back (a partial character or stop string) ends here.
        std::string rest = stream.finish();
        if (!rest.empty() && callback)
          callback(static_cast<uint32_t>(s), rest);
      }
      result.finishReasons[s] =
          atEos ? FinishReason::EndOfSequence : FinishReason::Length;
    }
    result.text.push_back(stream.text());
  }
  return result;
}

} // namespace sits
