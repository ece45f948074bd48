//===- ChatTemplate.h - A model's Jinja chat template in C++ ----*- C++ -*-===//
//
// Turns chat messages into the prompt text a model was trained on, by
// rendering the Jinja template from the model's tokenizer_config.json the way
// Hugging Face transformers' `apply_chat_template` does (jinja2 with
// trim_blocks and lstrip_blocks, its `tojson`, `raise_exception` and
// `strftime_now`). A template is parsed once and rendered many times.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_RUNTIME_CHATTEMPLATE_H
#define SITS_RUNTIME_CHATTEMPLATE_H

#include "sits/Error.h"

#include <memory>
#include <string>
#include <string_view>

namespace sits {

class ChatTemplate {
public:
  /// Parses a Jinja template. Throws Error(TemplateError) naming the line,
  /// the column and what was expected.
  static std::shared_ptr<const ChatTemplate> parse(std::string_view source);

  virtual ~ChatTemplate();

  /// Renders the template. `variablesJson` is a JSON object whose members
  /// become the template's variables, as apply_chat_template passes them:
  /// `messages`, `add_generation_prompt`, `tools` (when given), the special
  /// tokens (`bos_token`, `eos_token`, ...) and any extra keyword arguments.
  /// Throws Error(InvalidArgument) when `variablesJson` is not a JSON
  /// object, Error(TemplateError) when rendering fails (the message of a
  /// `raise_exception` call included).
  virtual std::string render(std::string_view variablesJson) const = 0;

  /// Renders as render() does, but `strftime_now` formats the local
  /// wall-clock time `now` ("YYYY-MM-DD HH:MM:SS[.ffffff]") instead of
  /// reading the clock: for reproducible prompts and tests.
  virtual std::string renderAt(std::string_view variablesJson,
                               std::string_view now) const = 0;
};

} // namespace sits

#endif // SITS_RUNTIME_CHATTEMPLATE_H
