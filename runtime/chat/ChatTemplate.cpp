//===- ChatTemplate.cpp - The public chat template API --------------------===//
//
// Parses once, renders many times (concurrently too: a rendering shares
// nothing mutable with another). Every failure leaves as a sits::Error:
// syntax errors and render errors name the line and column, and a
// `raise_exception` message is kept verbatim.
//
//===----------------------------------------------------------------------===//

#include "sits/ChatTemplate.h"

#include "Interpreter.h"
#include "Json.h"
#include "Lexer.h"
#include "Parser.h"
#include "Unicode.h"

#include <new>

namespace sits {

ChatTemplate::~ChatTemplate() = default;

namespace {

std::string at(uint32_t line, uint32_t column) {
  return std::to_string(line) + ":" + std::to_string(column);
}

class ChatTemplateImpl : public ChatTemplate {
public:
  explicit ChatTemplateImpl(chat::Body parsed) : body(std::move(parsed)) {}

  std::string render(std::string_view variablesJson) const override {
    return renderAt(variablesJson, {});
  }

  std::string renderAt(std::string_view variablesJson,
                       std::string_view now) const override {
    try {
      chat::Value variables = chat::parseVariables(variablesJson);
      chat::Interpreter interp(std::move(variables), std::string(now));
      return interp.render(body);
    } catch (const chat::RenderError &e) {
      std::string where = e.located ? " at " + at(e.line, e.column) : "";
      if (e.raised)
        throw Error(ErrorCode::TemplateError,
                    "chat template raised an exception" + where + ": " +
                        e.message);
      throw Error(ErrorCode::TemplateError,
                  "chat template error" + where + ": " + e.message);
    } catch (const std::bad_alloc &) {
      throw Error(ErrorCode::TemplateError,
                  "chat template error: out of memory while rendering");
    } catch (const Error &) {
      throw;
    } catch (const std::exception &e) {
      throw Error(ErrorCode::TemplateError,
                  std::string("chat template error: ") + e.what());
    }
  }

private:
  chat::Body body;
};

} // namespace

std::shared_ptr<const ChatTemplate>
ChatTemplate::parse(std::string_view source) {
  if (!chat::isValidUtf8(source))
    throw Error(ErrorCode::TemplateError,
                "chat template syntax error: the template is not valid UTF-8");
  try {
    return std::make_shared<ChatTemplateImpl>(chat::parseTemplate(source));
  } catch (const chat::SyntaxError &e) {
    throw Error(ErrorCode::TemplateError, "chat template syntax error at " +
                                              at(e.line, e.column) + ": " +
                                              e.message);
  } catch (const chat::RenderError &e) {
    // A literal the parser could not build (a string over the size limit).
    throw Error(ErrorCode::TemplateError,
                "chat template syntax error: " + e.message);
  } catch (const std::bad_alloc &) {
    throw Error(ErrorCode::TemplateError,
                "chat template syntax error: out of memory while parsing");
  } catch (const std::exception &e) {
    throw Error(ErrorCode::TemplateError,
                std::string("chat template syntax error: ") + e.what());
  }
}

} // namespace sits
