//===- ModelTokenizer.cpp - Tokenizer, specials, chat template ------------===//
//
// Reads what transformers reads: tokenizer.json for the tokenizer;
// tokenizer_config.json (or the older special_tokens_map.json) for the
// special tokens; chat_template.jinja, else tokenizer_config.json's
// "chat_template", for the template; generation_config.json for the EOS ids
// generation stops at. Every problem is an InvalidTokenizer error naming the
// file and the field.
//
//===----------------------------------------------------------------------===//

#include "sits/ModelTokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sits {

namespace {

using Json = nlohmann::ordered_json;

constexpr uint64_t kMaxFileBytes = uint64_t(1) << 29;

[[noreturn]] void invalid(const std::string &file, const std::string &what) {
  throw Error(ErrorCode::InvalidTokenizer, file + ": " + what);
}

Json parseJsonFile(const TokenizerFiles &files, const std::string &name) {
  auto it = files.find(name);
  if (it == files.end())
    return Json();
  Json value = Json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded())
    invalid(name, "not valid JSON");
  if (!value.is_object())
    invalid(name, "not a JSON object");
  return value;
}

/// A special token as tokenizer_config.json writes it: a string, an
/// AddedToken object ({"content": ...}), or null/absent (empty).
std::string specialTokenText(const Json &config, const std::string &file,
                             const std::string &key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null())
    return {};
  if (it->is_string())
    return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string())
      return content->get<std::string>();
  }
  invalid(file, "\"" + key +
                    "\" must be a string or an object with a string "
                    "\"content\"");
}

int32_t idInVocabulary(const Tokenizer &tokenizer, const std::string &file,
                       const std::string &key, const std::string &token) {
  std::optional<int32_t> id = tokenizer.tokenToId(token);
  if (!id)
    invalid(file, "\"" + key + "\" is \"" + token +
                      "\", which is not a token of tokenizer.json");
  return *id;
}

/// The chat template: chat_template.jinja wins over tokenizer_config.json's
/// "chat_template", as in transformers. A list of named templates gives the
/// one named "default".
std::string chatTemplateText(const TokenizerFiles &files, const Json &config) {
  auto jinja = files.find("chat_template.jinja");
  if (jinja != files.end())
    return jinja->second;
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null())
    return {};
  if (it->is_string())
    return it->get<std::string>();
  if (it->is_array()) {
    std::string names;
    for (const Json &entry : *it) {
      if (!entry.is_object() || !entry.contains("name") ||
          !entry.contains("template") || !entry["name"].is_string() ||
          !entry["template"].is_string())
        invalid("tokenizer_config.json",
                "\"chat_template\" entries must be objects with a string "
                "\"name\" and \"template\"");
      if (entry["name"] == "default")
        return entry["template"].get<std::string>();
      names += (names.empty() ? "" : ", ") + entry["name"].get<std::string>();
    }
    invalid("tokenizer_config.json", "\"chat_template\" lists templates (" +
                                         names +
                                         ") but none named \"default\"");
  }
  invalid("tokenizer_config.json",
          "\"chat_template\" must be a string or a list of named templates");
}

void appendUnique(std::vector<int32_t> &ids, int32_t id) {
  if (std::find(ids.begin(), ids.end(), id) == ids.end())
    ids.push_back(id);
}

} // namespace

const std::vector<std::string> &ModelTokenizer::knownFileNames() {
  static const std::vector<std::string> names = {
      "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
      "chat_template.jinja", "generation_config.json"};
  return names;
}

TokenizerFiles ModelTokenizer::readFolder(const std::string &folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    throw Error(ErrorCode::InvalidTokenizer,
                "tokenizer folder '" + folder + "' is not a directory");
  TokenizerFiles files;
  for (const std::string &name : knownFileNames()) {
    fs::path path = fs::path(folder) / name;
    if (!fs::exists(path, ec))
      continue;
    uintmax_t size = fs::file_size(path, ec);
    if (ec || !fs::is_regular_file(path, ec))
      throw Error(ErrorCode::InvalidTokenizer,
                  "cannot read '" + path.string() + "': not a regular file");
    if (size > kMaxFileBytes)
      throw Error(ErrorCode::InvalidTokenizer,
                  "'" + path.string() + "' is " + std::to_string(size) +
                      " bytes, more than the limit of " +
                      std::to_string(kMaxFileBytes));
    std::ifstream in(path, std::ios::binary);
    std::ostringstream content;
    content << in.rdbuf();
    if (!in.good() && !in.eof())
      throw Error(ErrorCode::InvalidTokenizer,
                  "cannot read '" + path.string() + "'");
    files[name] = content.str();
  }
  if (!files.count("tokenizer.json"))
    throw Error(ErrorCode::InvalidTokenizer,
                "tokenizer folder '" + folder + "' holds no tokenizer.json");
  return files;
}

std::shared_ptr<const ModelTokenizer>
ModelTokenizer::fromFiles(const TokenizerFiles &files) {
  for (const auto &file : files)
    if (std::find(knownFileNames().begin(), knownFileNames().end(),
                  file.first) == knownFileNames().end())
      throw Error(ErrorCode::InvalidTokenizer,
                  "unknown tokenizer file '" + file.first + "'");
  auto json = files.find("tokenizer.json");
  if (json == files.end())
    throw Error(ErrorCode::InvalidTokenizer, "no tokenizer.json");

  std::shared_ptr<ModelTokenizer> result(new ModelTokenizer());
  ModelTokenizer &m = *result;
  m.sourceFiles = files;
  try {
    m.tokenizerImpl = Tokenizer::fromJson(json->second);
  } catch (const Error &error) {
    if (error.code() != ErrorCode::InvalidTokenizer)
      throw;
    invalid("tokenizer.json", error.what());
  }
  const Tokenizer &tokenizer = *m.tokenizerImpl;

  // Special tokens: tokenizer_config.json, else special_tokens_map.json.
  Json config = parseJsonFile(files, "tokenizer_config.json");
  Json specialMap = parseJsonFile(files, "special_tokens_map.json");
  Json variables = Json::object();
  for (const char *key : {"bos_token", "eos_token", "unk_token", "sep_token",
                          "pad_token", "cls_token", "mask_token"}) {
    std::string file = "tokenizer_config.json";
    std::string text;
    if (config.is_object())
      text = specialTokenText(config, file, key);
    if (text.empty() && specialMap.is_object()) {
      file = "special_tokens_map.json";
      text = specialTokenText(specialMap, file, key);
    }
    if (text.empty())
      continue;
    int32_t id = idInVocabulary(tokenizer, file, key, text);
    variables[key] = text;
    if (std::string(key) == "bos_token") {
      m.bos = text;
      m.bosId = id;
    } else if (std::string(key) == "eos_token") {
      m.eos = text;
      appendUnique(m.eosIds, id);
    }
  }
  for (const Json *source : {&config, &specialMap}) {
    if (!source->is_object() ||
        !source->contains("additional_special_tokens") ||
        variables.contains("additional_special_tokens"))
      continue;
    const Json &list = (*source)["additional_special_tokens"];
    if (!list.is_array())
      invalid(source == &config ? "tokenizer_config.json"
                                : "special_tokens_map.json",
              "\"additional_special_tokens\" must be a list");
    Json texts = Json::array();
    for (size_t i = 0; i < list.size(); ++i) {
      Json holder = {{"token", list[i]}};
      texts.push_back(specialTokenText(holder,
                                       source == &config
                                           ? "tokenizer_config.json"
                                           : "special_tokens_map.json",
                                       "token"));
    }
    variables["additional_special_tokens"] = texts;
  }

  // EOS ids from generation_config.json: an integer or a list of them.
  Json generation = parseJsonFile(files, "generation_config.json");
  if (generation.is_object() && generation.contains("eos_token_id")) {
    const Json &eos = generation["eos_token_id"];
    std::vector<Json> ids;
    if (eos.is_array())
      ids.assign(eos.begin(), eos.end());
    else if (!eos.is_null())
      ids.push_back(eos);
    for (const Json &id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() >= tokenizer.vocabSize())
        invalid("generation_config.json",
                "\"eos_token_id\" holds " + id.dump() +
                    ", not a token id of tokenizer.json (0.." +
                    std::to_string(tokenizer.vocabSize() - 1) + ")");
      appendUnique(m.eosIds, static_cast<int32_t>(id.get<int64_t>()));
    }
  }

  m.templateSource = chatTemplateText(files, config);
  if (!m.templateSource.empty()) {
    // Its errors say "chat template syntax error at LINE:COLUMN: ...".
    m.chatTemplate = ChatTemplate::parse(m.templateSource);
  }
  m.specialTokenVariables = variables.dump();
  return result;
}

std::vector<int32_t> ModelTokenizer::encode(std::string_view text) const {
  return tokenizerImpl->encode(text, /*addSpecialTokens=*/true);
}

std::string ModelTokenizer::decode(const std::vector<int32_t> &ids,
                                   bool skipSpecialTokens) const {
  return tokenizerImpl->decode(ids, skipSpecialTokens);
}

std::string
ModelTokenizer::applyChatTemplate(const std::vector<ChatMessage> &messages,
                                  bool addGenerationPrompt) const {
  Json list = Json::array();
  for (const ChatMessage &message : messages)
    list.push_back({{"role", message.role}, {"content", message.content}});
  return applyChatTemplateJson(list.dump(), addGenerationPrompt);
}

std::string ModelTokenizer::applyChatTemplateJson(
    std::string_view messagesJson, bool addGenerationPrompt,
    std::string_view toolsJson, std::string_view extraJson) const {
  if (!chatTemplate)
    throw Error(ErrorCode::NoTokenizer,
                "this model has no chat template (tokenizer_config.json has "
                "no \"chat_template\" and there is no chat_template.jinja)");
  auto parse = [](std::string_view text, const char *what) {
    Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded())
      throw Error(ErrorCode::InvalidArgument,
                  std::string(what) + " is not valid JSON");
    return value;
  };
  Json variables = Json::parse(specialTokenVariables);
  Json messages = parse(messagesJson, "the messages");
  if (!messages.is_array())
    throw Error(ErrorCode::InvalidArgument,
                "the messages must be a JSON array of message objects");
  if (!extraJson.empty()) {
    Json extra = parse(extraJson, "the extra template variables");
    if (!extra.is_object())
      throw Error(ErrorCode::InvalidArgument,
                  "the extra template variables must be a JSON object");
    for (auto it = extra.begin(); it != extra.end(); ++it)
      variables[it.key()] = it.value();
  }
  variables["messages"] = std::move(messages);
  variables["add_generation_prompt"] = addGenerationPrompt;
  if (!toolsJson.empty()) {
    Json tools = parse(toolsJson, "the tools");
    if (!tools.is_array() && !tools.is_null())
      throw Error(ErrorCode::InvalidArgument, "the tools must be a JSON array");
    variables["tools"] = std::move(tools);
  }
  return chatTemplate->render(variables.dump());
}

std::vector<int32_t>
ModelTokenizer::encodeChat(const std::vector<ChatMessage> &messages,
                           bool addGenerationPrompt) const {
  return tokenizerImpl->encode(applyChatTemplate(messages, addGenerationPrompt),
                               /*addSpecialTokens=*/false);
}

std::string ModelTokenizer::describe() const {
  std::string out =
      "tokenizer: " + kind() + ", " + std::to_string(vocabSize()) + " tokens";
  size_t special = 0;
  for (const AddedToken &token : tokenizerImpl->addedTokens())
    special += token.special ? 1 : 0;
  if (!tokenizerImpl->addedTokens().empty())
    out += ", " + std::to_string(tokenizerImpl->addedTokens().size()) +
           " added (" + std::to_string(special) + " special)";
  out += "\n";
  auto quoted = [](const std::string &text) { return Json(text).dump(); };
  std::string specials;
  if (!bos.empty())
    specials += "bos " + quoted(bos) + " (" + std::to_string(*bosId) + ")";
  if (!eos.empty())
    specials +=
        std::string(specials.empty() ? "" : ", ") + "eos " + quoted(eos);
  std::string eosList;
  for (int32_t id : eosIds)
    eosList += (eosList.empty() ? "" : ",") + std::to_string(id);
  out += "special tokens: " + (specials.empty() ? "none" : specials) +
         "; stops at ids " + (eosList.empty() ? "(none)" : eosList) + "\n";
  out += std::string("chat template: ") +
         (chatTemplate
              ? "yes (" + std::to_string(templateSource.size()) + " bytes)"
              : "no") +
         "\n";
  return out;
}

} // namespace sits
