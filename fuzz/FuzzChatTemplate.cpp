//===- FuzzChatTemplate.cpp - Fuzzes the Jinja chat-template interpreter --===//
//
// Input: `template NUL variables-JSON`. Parses the template and renders it
// with the variables (a default conversation when that part is empty) at a
// fixed time. Only sits::Error may come out; the interpreter's step, depth
// and size limits keep a hostile template from hanging or exhausting memory.
//
//===----------------------------------------------------------------------===//

#include "FuzzInput.h"

#include "sits/ChatTemplate.h"
#include "sits/Error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto parts = sits::fuzz::splitInput(data, size, 2);
  std::string_view variables = parts[1];
  if (variables.empty())
    variables = R"({"messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi!"},
      {"role": "assistant", "content": "Hello."}],
      "add_generation_prompt": true, "bos_token": "<s>",
      "eos_token": "</s>"})";
  try {
    auto chatTemplate = sits::ChatTemplate::parse(parts[0]);
    (void)chatTemplate->renderAt(variables, "2026-01-02 03:04:05");
  } catch (const sits::Error &) {
  }
  return 0;
}
