//===- OpenAI.cpp - OpenAI request parsing and response bodies ------------===//

#include "OpenAI.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <random>
#include <set>

using namespace sits;
using namespace sits::serve;
using json = nlohmann::json;

json serve::errorBody(const ApiError &error) {
  return {{"error",
           {{"message", error.what()},
            {"type", error.type},
            {"param", error.param.empty() ? json(nullptr) : json(error.param)},
            {"code", error.code.empty() ? json(nullptr) : json(error.code)}}}};
}

namespace {
/// Reads the fields of one request object; each read marks its field as
/// known, and `checkUnknown` refuses the rest.
class Fields {
public:
  explicit Fields(const json &body) : body(body) {}

  /// The field, or null when absent or JSON null.
  const json *get(const std::string &name) {
    known.insert(name);
    auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  }
  const json &require(const std::string &name) {
    const json *value = get(name);
    if (!value)
      throw ApiError(400, "the request has no '" + name + "' field", name,
                     "missing_field");
    return *value;
  }
  [[noreturn]] static void wrongType(const std::string &name,
                                     const std::string &expected) {
    throw ApiError(422, "'" + name + "' must be " + expected, name,
                   "invalid_type");
  }
  [[noreturn]] static void badValue(const std::string &name,
                                    const std::string &message) {
    throw ApiError(422, "'" + name + "' " + message, name, "invalid_value");
  }
  std::optional<int64_t> integer(const std::string &name, int64_t min,
                                 int64_t max) {
    const json *value = get(name);
    if (!value)
      return std::nullopt;
    if (!value->is_number_integer())
      wrongType(name, "an integer");
    int64_t number = value->is_number_unsigned()
                         ? int64_t(std::min<uint64_t>(value->get<uint64_t>(),
                                                      uint64_t(INT64_MAX)))
                         : value->get<int64_t>();
    if (number < min || number > max)
      badValue(name, "must be from " + std::to_string(min) + " to " +
                         std::to_string(max) + ", got " +
                         std::to_string(number));
    return number;
  }
  std::optional<double> number(const std::string &name, double min,
                               double max) {
    const json *value = get(name);
    if (!value)
      return std::nullopt;
    if (!value->is_number())
      wrongType(name, "a number");
    double number = value->get<double>();
    if (!(number >= min && number <= max))
      badValue(name, "must be from " + json(min).dump() + " to " +
                         json(max).dump() + ", got " + value->dump());
    return number;
  }
  std::optional<bool> boolean(const std::string &name) {
    const json *value = get(name);
    if (!value)
      return std::nullopt;
    if (!value->is_boolean())
      wrongType(name, "true or false");
    return value->get<bool>();
  }
  /// A field this server accepts only at its default (`isDefault`).
  void onlyDefault(const std::string &name, bool (*isDefault)(const json &),
                   const std::string &supported) {
    const json *value = get(name);
    if (value && !isDefault(*value))
      throw ApiError(422, "'" + name + "' is not supported (" + supported + ")",
                     name, "unsupported_value");
  }
  void checkUnknown() const {
    for (auto it = body.begin(); it != body.end(); ++it)
      if (!known.count(it.key()))
        throw ApiError(400, "unrecognized request argument '" + it.key() + "'",
                       it.key(), "unknown_field");
  }

private:
  const json &body;
  std::set<std::string> known;
};
} // namespace

/// Token ids of a prompt array: integers in the vocabulary.
static std::vector<int32_t> tokenIds(const json &array, uint32_t vocab) {
  std::vector<int32_t> ids;
  for (const json &id : array) {
    if (!id.is_number_integer())
      Fields::wrongType("prompt", "a string, an array of token ids, or an "
                                  "array holding one of those");
    int64_t value = id.get<int64_t>();
    if (value < 0 || value >= int64_t(vocab))
      Fields::badValue("prompt", "holds token id " + std::to_string(value) +
                                     " outside the vocabulary of " +
                                     std::to_string(vocab));
    ids.push_back(static_cast<int32_t>(value));
  }
  return ids;
}

/// The prompt of /v1/completions: a string, token ids, or a one-element
/// array of either (several prompts per request are not supported).
static std::vector<int32_t> completionPrompt(const json &prompt,
                                             const ModelTokenizer &tokenizer) {
  const char *shape = "a string, an array of token ids, or an array holding "
                      "one of those";
  if (prompt.is_string())
    return tokenizer.encode(prompt.get<std::string>());
  if (!prompt.is_array())
    Fields::wrongType("prompt", shape);
  if (!prompt.empty() && (prompt[0].is_string() || prompt[0].is_array())) {
    if (prompt.size() != 1)
      throw ApiError(422,
                     "'prompt' holds " + std::to_string(prompt.size()) +
                         " prompts; this server takes one per request",
                     "prompt", "unsupported_value");
    if (prompt[0].is_string())
      return tokenizer.encode(prompt[0].get<std::string>());
    return tokenIds(prompt[0], tokenizer.vocabSize());
  }
  return tokenIds(prompt, tokenizer.vocabSize());
}

/// The messages of /v1/chat/completions: role and content (a string, or an
/// array of text parts).
static std::vector<ChatMessage> chatMessages(const json &messages) {
  if (!messages.is_array())
    Fields::wrongType("messages", "an array of message objects");
  if (messages.empty())
    Fields::badValue("messages", "must hold at least one message");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json &message = messages[i];
    std::string where = "messages[" + std::to_string(i) + "]";
    if (!message.is_object())
      Fields::wrongType(where, "an object with 'role' and 'content'");
    auto role = message.find("role");
    if (role == message.end() || !role->is_string())
      throw ApiError(role == message.end() ? 400 : 422,
                     "'" + where + ".role' must be a string", where + ".role",
                     role == message.end() ? "missing_field" : "invalid_type");
    ChatMessage chat{role->get<std::string>(), ""};
    auto content = message.find("content");
    if (content == message.end() || content->is_null()) {
      // An assistant turn may have no content; any other needs it.
      if (chat.role != "assistant")
        throw ApiError(400, "'" + where + ".content' is missing",
                       where + ".content", "missing_field");
    } else if (content->is_string()) {
      chat.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (const json &part : *content) {
        auto type = part.is_object() ? part.find("type") : part.end();
        auto text = part.is_object() ? part.find("text") : part.end();
        if (type == part.end() || *type != "text" || text == part.end() ||
            !text->is_string())
          Fields::wrongType(where + ".content",
                            "a string or an array of {\"type\": \"text\", "
                            "\"text\": ...} parts");
        chat.content += text->get<std::string>();
      }
    } else {
      Fields::wrongType(where + ".content",
                        "a string or an array of text parts");
    }
    out.push_back(std::move(chat));
  }
  return out;
}

static bool isFalse(const json &value) {
  return value.is_boolean() && !value.get<bool>();
}
static bool isOne(const json &value) {
  return value.is_number_integer() && value.get<int64_t>() == 1;
}
static bool isZero(const json &value) {
  return value.is_number() && value.get<double>() == 0.0;
}
static bool isEmptyObject(const json &value) {
  return value.is_object() && value.empty();
}
static bool isNothing(const json &value) { return value.is_null(); }

/// Nesting of arrays and objects a request may have: OpenAI's requests
/// need about 5. nlohmann-json parses iteratively but copies, compares and
/// serializes values recursively: a body of a million '[' overflowed the
/// stack of the thread that served it.
constexpr size_t kMaxJsonDepth = 64;

/// The deepest nesting of arrays and objects in a JSON text (strings
/// skipped), counted before it is parsed.
static size_t jsonDepth(const std::string &text) {
  size_t depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth) {
      --depth;
    }
  }
  return deepest;
}

ParsedRequest serve::parseRequest(Endpoint endpoint, const std::string &text,
                                  const ModelInfo &model) {
  if (jsonDepth(text) > kMaxJsonDepth)
    throw ApiError(400,
                   "the request body nests arrays and objects more than " +
                       std::to_string(kMaxJsonDepth) + " levels deep",
                   "", "invalid_json");
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded())
    throw ApiError(400, "the request body is not valid JSON", "",
                   "invalid_json");
  if (!body.is_object())
    throw ApiError(400, "the request body must be a JSON object", "",
                   "invalid_json");
  Fields fields(body);
  ParsedRequest parsed;
  Request &request = parsed.request;

  const json &modelName = fields.require("model");
  if (!modelName.is_string())
    Fields::wrongType("model", "a string");
  if (modelName.get<std::string>() != model.name)
    throw ApiError(404,
                   "the model '" + modelName.get<std::string>() +
                       "' does not exist; this server serves '" + model.name +
                       "'",
                   "model", "model_not_found");

  // Sampling, stop and streaming: the same in both endpoints.
  request.sampling.temperature =
      static_cast<float>(fields.number("temperature", 0, 2).value_or(1.0));
  request.sampling.topP =
      static_cast<float>(fields.number("top_p", 0, 1).value_or(1.0));
  if (request.sampling.topP <= 0.0f)
    Fields::badValue("top_p", "must be greater than 0");
  // top_k is an extension (vLLM's spelling; -1 or 0: all tokens).
  int64_t topK = fields.integer("top_k", -1, INT32_MAX).value_or(0);
  request.sampling.topK = topK < 0 ? 0 : static_cast<uint32_t>(topK);
  if (std::optional<int64_t> seed =
          fields.integer("seed", INT64_MIN, INT64_MAX))
    request.sampling.seed = static_cast<uint64_t>(*seed);
  else
    request.sampling.seed =
        std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
  if (const json *stop = fields.get("stop")) {
    std::vector<json> stops;
    if (stop->is_string())
      stops.push_back(*stop);
    else if (stop->is_array())
      stops.assign(stop->begin(), stop->end());
    else
      Fields::wrongType("stop", "a string or an array of strings");
    if (stops.size() > 16)
      Fields::badValue("stop", "holds more than 16 strings");
    for (const json &one : stops) {
      if (!one.is_string())
        Fields::wrongType("stop", "a string or an array of strings");
      if (one.get<std::string>().empty())
        Fields::badValue("stop", "holds an empty string");
      request.stop.push_back(one.get<std::string>());
    }
  }
  // Extensions: generate past EOS; keep special tokens in the text.
  request.stopAtEos = !fields.boolean("ignore_eos").value_or(false);
  request.skipSpecialTokens =
      fields.boolean("skip_special_tokens").value_or(true);
  parsed.stream = fields.boolean("stream").value_or(false);
  if (const json *options = fields.get("stream_options")) {
    if (!options->is_object())
      Fields::wrongType("stream_options", "an object");
    if (!parsed.stream)
      Fields::badValue("stream_options", "is only allowed with \"stream\"");
    for (auto it = options->begin(); it != options->end(); ++it) {
      if (it.key() != "include_usage")
        throw ApiError(400, "unrecognized stream option '" + it.key() + "'",
                       "stream_options." + it.key(), "unknown_field");
      if (!it->is_boolean())
        Fields::wrongType("stream_options.include_usage", "true or false");
      parsed.includeUsage = it->get<bool>();
    }
  }
  fields.get("user"); // accepted, not used
  fields.onlyDefault("n", isOne, "one choice per request");
  fields.onlyDefault("presence_penalty", isZero, "only 0");
  fields.onlyDefault("frequency_penalty", isZero, "only 0");
  fields.onlyDefault("logit_bias", isEmptyObject, "only {}");

  std::optional<int64_t> maxTokens;
  const ModelTokenizer &tokenizer = *model.tokenizer;
  if (endpoint == Endpoint::Completions) {
    maxTokens = fields.integer("max_tokens", 1, INT32_MAX);
    fields.onlyDefault("echo", isFalse, "only false");
    fields.onlyDefault("best_of", isOne, "only 1");
    fields.onlyDefault("logprobs", isNothing, "only null");
    fields.onlyDefault("suffix", isNothing, "only null");
    request.prompt = completionPrompt(fields.require("prompt"), tokenizer);
    if (request.prompt.empty())
      Fields::badValue("prompt", "encodes to no tokens");
    if (!maxTokens)
      maxTokens = 16; // OpenAI's default for completions
  } else {
    maxTokens = fields.integer("max_completion_tokens", 1, INT32_MAX);
    if (std::optional<int64_t> legacy =
            fields.integer("max_tokens", 1, INT32_MAX))
      maxTokens = maxTokens ? std::min(*maxTokens, *legacy) : *legacy;
    fields.onlyDefault("logprobs", isFalse, "only false");
    fields.onlyDefault("tools", isNothing, "no tools");
    fields.onlyDefault("tool_choice", isNothing, "no tools");
    fields.onlyDefault("response_format", isNothing, "plain text only");
    std::vector<ChatMessage> messages =
        chatMessages(fields.require("messages"));
    if (!tokenizer.hasChatTemplate())
      throw ApiError(400,
                     "the model has no chat template; use "
                     "/v1/completions",
                     "messages", "no_chat_template");
    request.prompt = tokenizer.encodeChat(messages);
    if (request.prompt.empty())
      Fields::badValue("messages", "render to no tokens");
    // Default: as many tokens as the context leaves (at least one, so that
    // a prompt that fills it is refused as too long).
    if (!maxTokens)
      maxTokens = std::max<int64_t>(1, int64_t(model.maxSequenceLength) -
                                           int64_t(request.prompt.size()));
  }
  fields.checkUnknown();

  request.maxTokens =
      static_cast<uint32_t>(std::min<int64_t>(*maxTokens, int64_t(UINT32_MAX)));
  uint64_t wanted = uint64_t(request.prompt.size()) + request.maxTokens;
  if (wanted > model.maxSequenceLength)
    throw ApiError(413,
                   "the prompt (" + std::to_string(request.prompt.size()) +
                       " tokens) and max_tokens (" +
                       std::to_string(request.maxTokens) +
                       ") exceed the model's context of " +
                       std::to_string(model.maxSequenceLength) + " tokens",
                   endpoint == Endpoint::Completions ? "prompt" : "messages",
                   "context_length_exceeded");
  return parsed;
}

const char *serve::openAIFinishReason(FinishReason reason) {
  switch (reason) {
  case FinishReason::Length:
    return "length";
  case FinishReason::EndOfSequence:
  case FinishReason::StopString:
    return "stop";
  case FinishReason::Cancelled:
    return "abort";
  }
  return "stop";
}

json serve::usageBody(uint32_t promptTokens, uint32_t completionTokens) {
  return {{"prompt_tokens", promptTokens},
          {"completion_tokens", completionTokens},
          {"total_tokens", promptTokens + completionTokens}};
}

json serve::responseBody(Endpoint endpoint, const std::string &id,
                         const std::string &model, const std::string &text,
                         const std::vector<int32_t> &tokens,
                         FinishReason reason, uint32_t promptTokens,
                         uint32_t completionTokens) {
  json choice = {{"index", 0},
                 {"finish_reason", openAIFinishReason(reason)},
                 {"token_ids", tokens}};
  bool chat = endpoint == Endpoint::ChatCompletions;
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
    choice["logprobs"] = nullptr;
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  return {{"id", id},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", int64_t(std::time(nullptr))},
          {"model", model},
          {"choices", json::array({choice})},
          {"usage", usageBody(promptTokens, completionTokens)}};
}

json serve::chunkBody(Endpoint endpoint, const std::string &id,
                      const std::string &model, const std::string &text,
                      const std::vector<int32_t> &tokens, bool first,
                      const char *finishReason) {
  bool chat = endpoint == Endpoint::ChatCompletions;
  json choice = {
      {"index", 0},
      {"finish_reason", finishReason ? json(finishReason) : json(nullptr)},
      {"logprobs", nullptr}};
  if (!finishReason)
    choice["token_ids"] = tokens;
  if (chat) {
    json delta = json::object();
    if (first)
      delta["role"] = "assistant";
    if (!finishReason)
      delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = finishReason ? "" : text;
  }
  return {{"id", id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", int64_t(std::time(nullptr))},
          {"model", model},
          {"choices", json::array({choice})}};
}
