//===- OpenAI.h - OpenAI request parsing and response bodies ----*- C++ -*-===//
//
// The JSON side of the server (nlohmann-json): a request body checked field
// by field into a scheduler Request, each problem an ApiError naming the
// field, and the response and stream-chunk objects of both endpoints.
// Internal to SitsServe.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_SERVE_OPENAI_H
#define SITS_RUNTIME_SERVE_OPENAI_H

#include "Scheduler.h"

#include "sits/ModelTokenizer.h"

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace sits::serve {

/// A request the server refuses: its HTTP status and the OpenAI-style
/// error object's fields.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = {},
           std::string code = {}, std::string type = "invalid_request_error")
      : std::runtime_error(message), status(status), param(std::move(param)),
        code(std::move(code)), type(std::move(type)) {}
  int status;
  std::string param, code, type;
};

/// {"error": {"message", "type", "param", "code"}}.
nlohmann::json errorBody(const ApiError &error);

enum class Endpoint { Completions, ChatCompletions };

/// What the server needs to know of the model to check a request.
struct ModelInfo {
  std::string name;
  std::shared_ptr<const ModelTokenizer> tokenizer;
  uint32_t maxSequenceLength = 0;
};

struct ParsedRequest {
  Request request;
  bool stream = false;
  /// stream_options.include_usage: a last chunk with the usage.
  bool includeUsage = false;
};

/// Checks `body` (the request's text) and makes the scheduler's request;
/// throws ApiError (400 unreadable JSON, unknown or missing fields; 422 a
/// field of the wrong type or value; 404 another model; 413 prompt and
/// max_tokens beyond the context).
ParsedRequest parseRequest(Endpoint endpoint, const std::string &body,
                           const ModelInfo &model);

/// The OpenAI finish_reason of a scheduler finish reason.
const char *openAIFinishReason(FinishReason reason);

/// A whole response ("text_completion" or "chat.completion").
nlohmann::json responseBody(Endpoint endpoint, const std::string &id,
                            const std::string &model, const std::string &text,
                            const std::vector<int32_t> &tokens,
                            FinishReason reason, uint32_t promptTokens,
                            uint32_t completionTokens);

/// One stream chunk: `text` (with `tokens`) or, when `finishReason` is
/// set, the choice's end. Chat's first chunk (`first`) carries the role.
nlohmann::json chunkBody(Endpoint endpoint, const std::string &id,
                         const std::string &model, const std::string &text,
                         const std::vector<int32_t> &tokens, bool first,
                         const char *finishReason);

/// The usage object.
nlohmann::json usageBody(uint32_t promptTokens, uint32_t completionTokens);

} // namespace sits::serve

#endif // SITS_RUNTIME_SERVE_OPENAI_H
