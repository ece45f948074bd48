//===- ChatTemplateTest.cpp - The chat template API and its error paths ---===//
//
// Output fidelity is tested against transformers and jinja2 by the lit tests
// in test/runtime/chat; these tests pin the API, the error codes and
// messages (line:column, the filter's name, raise_exception's text), the
// limits that keep hostile templates from crashing, and a fuzz smoke test.
//
//===----------------------------------------------------------------------===//

#include "sits/ChatTemplate.h"

#include <gtest/gtest.h>

#include <ctime>
#include <random>
#include <string>
#include <thread>
#include <vector>

using sits::ChatTemplate;
using sits::Error;
using sits::ErrorCode;

namespace {

std::string render(const std::string &source,
                   const std::string &variables = "{}") {
  return ChatTemplate::parse(source)->render(variables);
}

// The error `fn` throws (a test failure when it throws none or another).
template <typename Fn> Error errorOf(Fn fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e;
  } catch (const std::exception &e) {
    ADD_FAILURE() << "not a sits::Error: " << e.what();
    return Error(ErrorCode::InvalidArgument, "");
  }
  ADD_FAILURE() << "no error";
  return Error(ErrorCode::InvalidArgument, "");
}

Error parseError(const std::string &source) {
  return errorOf([&] { ChatTemplate::parse(source); });
}

Error renderError(const std::string &source,
                  const std::string &variables = "{}") {
  return errorOf([&] { render(source, variables); });
}

#define EXPECT_MESSAGE(error, text)                                            \
  EXPECT_NE(std::string((error).what()).find(text), std::string::npos)         \
      << (error).what()

TEST(ChatTemplate, RendersVariables) {
  auto t = ChatTemplate::parse(
      "{% for m in messages %}<{{ m.role }}>{{ m['content'] }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}");
  EXPECT_EQ(t->render(R"({"messages": [{"role": "user", "content": "Hi"}],
                          "add_generation_prompt": true})"),
            "<user>Hi<assistant>");
  // Parsed once, rendered many times with other variables.
  EXPECT_EQ(t->render(R"({"messages": []})"), "");
}

TEST(ChatTemplate, TransformersWhitespaceSettings) {
  // trim_blocks and lstrip_blocks, as apply_chat_template sets them.
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\ny"), "  x\ny");
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render("{% if true +%}\nx{% endif %}"), "\nx");
  EXPECT_EQ(render("a\n"), "a");
}

TEST(ChatTemplate, PythonPrinting) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.0, {'k': (1,)}] }}"),
            "[1, 'a', None, True, 1.0, {'k': (1,)}]");
  EXPECT_EQ(render("{{ 1e-5 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ -7 // 2 }}"),
            "1e-05 0.30000000000000004 1e+16 -4");
  EXPECT_EQ(render("{{ [\"it's\"] }}"), "[\"it's\"]");
}

TEST(ChatTemplate, DictsKeepJsonOrder) {
  EXPECT_EQ(render("{{ d|tojson }} {% for k in d %}{{ k }}{% endfor %}",
                   R"({"d": {"z": 1, "a": 2, "m": 3}})"),
            R"({"z": 1, "a": 2, "m": 3} zam)");
}

TEST(ChatTemplate, TransformersTojson) {
  EXPECT_EQ(render("{{ {'a': [1, 'é']}|tojson }}"), "{\"a\": [1, \"é\"]}");
  EXPECT_EQ(render("{{ {'a': [1]}|tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|tojson(separators=(',', ':'), "
                   "sort_keys=true) }}"),
            "{\"a\":2,\"b\":1}");
}

TEST(ChatTemplate, StrftimeNowAtFixedTime) {
  auto t = ChatTemplate::parse("{{ strftime_now('%d %b %Y %H:%M:%S.%f') }}");
  EXPECT_EQ(t->renderAt("{}", "2024-07-26 10:00:00"),
            "26 Jul 2024 10:00:00.000000");
  EXPECT_EQ(t->renderAt("{}", "2024-02-29T23:59:59.25"),
            "29 Feb 2024 23:59:59.250000");
  Error e = errorOf([&] { t->renderAt("{}", "yesterday"); });
  EXPECT_EQ(e.code(), ErrorCode::TemplateError);
  EXPECT_MESSAGE(e, "'yesterday'");
}

TEST(ChatTemplate, StrftimeNowReadsTheClock) {
  std::time_t now = std::time(nullptr);
  std::tm local;
  localtime_r(&now, &local);
  std::string year = render("{{ strftime_now('%Y') }}");
  // Around New Year's midnight the two clocks may disagree by one.
  int rendered = std::stoi(year);
  EXPECT_TRUE(rendered == local.tm_year + 1900 ||
              rendered == local.tm_year + 1901)
      << year;
}

TEST(ChatTemplate, GenerationBlockRendersItsBody) {
  EXPECT_EQ(render("{% generation %}a{{ 1 }}{% endgeneration %}b"), "a1b");
}

TEST(ChatTemplateErrors, SyntaxErrorsNameLineAndColumn) {
  Error e = parseError("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}");
  EXPECT_EQ(e.code(), ErrorCode::TemplateError);
  EXPECT_MESSAGE(e, "syntax error at 3:10");
  EXPECT_MESSAGE(e, "unexpected end of print statement");

  e = parseError("{% for x in y %}\n{{ x }}");
  EXPECT_MESSAGE(e, "Jinja was looking for the following tags: 'endfor' or "
                    "'else'");
  EXPECT_MESSAGE(e, "The innermost block that needs to be closed is 'for'");

  e = parseError("{{ (1, 2 }}");
  EXPECT_MESSAGE(e, "1:10");
  EXPECT_MESSAGE(e, "unexpected '}', expected ')'");

  EXPECT_MESSAGE(parseError("{% frob %}"), "Encountered unknown tag 'frob'");
  EXPECT_MESSAGE(parseError("{# open"), "Missing end of comment tag");
  EXPECT_MESSAGE(parseError("{{ 'open }}"), "unexpected char");
  EXPECT_MESSAGE(parseError("{{ x }"), "1:6: unexpected '}'");
  EXPECT_MESSAGE(parseError("{{ x "), "expected 'end of print statement'");
}

TEST(ChatTemplateErrors, UnknownFilterAndTestNamed) {
  Error e = parseError("\n\n   {{ x | frobnicate }}");
  EXPECT_EQ(e.code(), ErrorCode::TemplateError);
  EXPECT_MESSAGE(e, "3:11");
  EXPECT_MESSAGE(e, "No filter named 'frobnicate'");
  EXPECT_MESSAGE(parseError("{{ x is frobnicated }}"),
                 "No test named 'frobnicated'");
  // Inside an `if`, jinja2 complains only when the filter runs.
  auto t = ChatTemplate::parse("{% if x %}{{ x|frobnicate }}{% endif %}ok");
  EXPECT_EQ(t->render("{}"), "ok");
  EXPECT_MESSAGE(errorOf([&] { t->render(R"({"x": 1})"); }),
                 "No filter named 'frobnicate' found");
}

TEST(ChatTemplateErrors, RaiseExceptionMessageKept) {
  Error e = renderError("{% if messages|length > 1 %}{{ raise_exception("
                        "'Only one message, please!') }}{% endif %}",
                        R"({"messages": [1, 2]})");
  EXPECT_EQ(e.code(), ErrorCode::TemplateError);
  EXPECT_MESSAGE(e, "Only one message, please!");
  EXPECT_MESSAGE(e, "raised an exception at 1:");
}

TEST(ChatTemplateErrors, RenderErrorsNameLineAndColumn) {
  Error e = renderError("a\nb\n   {{ user.name }}");
  EXPECT_EQ(e.code(), ErrorCode::TemplateError);
  EXPECT_MESSAGE(e, "at 3:11");
  EXPECT_MESSAGE(e, "'user' is undefined");
  EXPECT_MESSAGE(renderError("{{ 1 + 'a' }}"),
                 "unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_MESSAGE(
      renderError("{{ m.content.strip() }}", R"({"m": {"content": null}})"),
      "'None' has no attribute 'strip'");
}

TEST(ChatTemplateErrors, SandboxRefusesMutation) {
  Error e = renderError("{% set l = [] %}{{ l.append(1) }}");
  EXPECT_EQ(e.code(), ErrorCode::TemplateError);
  EXPECT_MESSAGE(e, "access to attribute 'append' of 'list' object is unsafe");
  EXPECT_MESSAGE(renderError("{{ d.update({'a': 1}) }}", R"({"d": {}})"),
                 "access to attribute 'update' of 'dict' object is unsafe");
  EXPECT_MESSAGE(renderError("{% set ns = namespace() %}{% set ns._x = 1 %}"),
                 "underscore-prefixed attributes");
  EXPECT_MESSAGE(renderError("{{ range(100001)|length }}"), "MAX_RANGE");
}

TEST(ChatTemplateErrors, VariablesMustBeAJsonObject) {
  auto t = ChatTemplate::parse("x");
  for (const char *bad : {"[1, 2]", "\"text\"", "42", "null", "", "{",
                          "{\"a\": }", "{\"a\": 1} trailing"}) {
    Error e = errorOf([&] { t->render(bad); });
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << bad;
  }
  Error e = errorOf([&] { t->render("[1]"); });
  EXPECT_MESSAGE(e, "must be a JSON object, not array");
  std::string deep(100000, '[');
  e = errorOf([&] { t->render("{\"a\": " + deep + "}"); });
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_MESSAGE(e, "nested deeper");
}

TEST(ChatTemplateErrors, InvalidUtf8Template) {
  Error e = parseError(std::string("{{ 'a") + "\xff" + "' }}");
  EXPECT_EQ(e.code(), ErrorCode::TemplateError);
  EXPECT_MESSAGE(e, "not valid UTF-8");
}

TEST(ChatTemplateLimits, DeepTemplateNestingIsAnError) {
  std::string deep =
      "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_MESSAGE(parseError(deep), "nested deeper than 256");
  std::string blocks;
  for (int i = 0; i < 5000; ++i)
    blocks += "{% if true %}";
  EXPECT_MESSAGE(parseError(blocks), "nested deeper");
  EXPECT_MESSAGE(parseError("{{ " + std::string(50000, '[') +
                            std::string(50000, ']') + " }}"),
                 "nested deeper");
  EXPECT_MESSAGE(parseError("{{ " + std::string(50000, '-') + "1 }}"),
                 "nested deeper");
  EXPECT_MESSAGE(parseError("{{ " + std::string(50000 * 4, ' ') + " }}"),
                 "Expected an expression");
  std::string nots;
  for (int i = 0; i < 50000; ++i)
    nots += "not ";
  EXPECT_MESSAGE(parseError("{{ " + nots + "x }}"), "nested deeper");
}

TEST(ChatTemplateLimits, RecursionIsAnError) {
  Error e =
      renderError("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(e.code(), ErrorCode::TemplateError);
  EXPECT_MESSAGE(e, "maximum recursion depth exceeded");
  // A recursive loop over a self-similar structure stops the same way.
  EXPECT_MESSAGE(
      renderError("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}"),
      "maximum recursion depth exceeded");
}

TEST(ChatTemplateLimits, DeepValuesAndCyclesAreErrors) {
  EXPECT_MESSAGE(renderError("{% set ns = namespace(x=[]) %}{% for i in "
                             "range(2000) %}{% set ns.x = [ns.x] %}{% endfor "
                             "%}"),
                 "nested deeper than 512");
  // A namespace holding itself prints and serializes to an error.
  EXPECT_MESSAGE(renderError("{% set ns = namespace() %}{% set ns.me = ns %}"
                             "{{ ns }}"),
                 "too deeply");
  EXPECT_MESSAGE(renderError("{% set ns = namespace() %}{% set ns.l = [ns] "
                             "%}{{ ns.l == ns.l }}{{ [ns] == [ns] }}"
                             "{{ ns.l|tojson }}"),
                 "not JSON serializable");
  // A chain of namespaces and macros through scopes is freed iteratively.
  EXPECT_EQ(render("{% set ns = namespace(m=none) %}{% for i in range(50000) "
                   "%}{% set prev = ns.m %}{% macro m() %}{{ prev }}"
                   "{% endmacro %}{% set ns.m = m %}{% set ns2 = "
                   "namespace(up=ns) %}{% endfor %}done"),
            "done");
}

TEST(ChatTemplateLimits, HugeWorkIsBounded) {
  EXPECT_MESSAGE(renderError("{% for i in range(100000) %}{% for j in "
                             "range(100000) %}{% endfor %}{% endfor %}"),
                 "loop iterations");
  EXPECT_MESSAGE(renderError("{% set ns = namespace(s='xx') %}{% for i in "
                             "range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                             "{% endfor %}"),
                 "string longer than");
  EXPECT_MESSAGE(renderError("{{ 'x' * 1000000000 }}"), "string longer than");
  EXPECT_MESSAGE(renderError("{{ [1] * 100000000 }}"), "sequence longer");
  EXPECT_MESSAGE(renderError("{{ 2 ** 64 }}"), "integer overflow");
  EXPECT_MESSAGE(renderError("{{ '%999999999999s' % 'x' }}"), "longer than");
}

// An empty string or list repeated a huge number of times is empty at
// once (found by the chat-template fuzz target: 82 billion appends of
// nothing ran for minutes).
TEST(ChatTemplateLimits, EmptyRepeatsAreImmediate) {
  EXPECT_EQ(render("[{{ ('<s>' * -7) * 9223372036854775807 }}]"), "[]");
  EXPECT_EQ(render("[{{ '' * 9223372036854775807 }}]"), "[]");
  EXPECT_EQ(render("{{ ([] * 9223372036854775807)|length }}"), "0");
  EXPECT_EQ(render("{{ (9223372036854775807 * ())|length }}"), "0");
}

// Float literals whose exponent does not fit in a long (found by the
// model-tokenizer fuzz target: the exponent arithmetic overflowed). Python
// gives inf and 0.0.
TEST(ChatTemplateLimits, HugeExponentsSaturate) {
  EXPECT_EQ(render("{{ 1e99999999999999999999999 }}"), "inf");
  EXPECT_EQ(render("{{ 44444444444444e444444444444444444444444 }}"), "inf");
  EXPECT_EQ(render("{{ 1e-99999999999999999999999 }}"), "0.0");
  EXPECT_EQ(render("{{ 0.5e-9223372036854775808 }}"), "0.0");
}

TEST(ChatTemplateLimits, ConcurrentRendersShareNothing) {
  auto t =
      ChatTemplate::parse("{% set ns = namespace(n=0) %}{% for m in messages %}"
                          "{% set ns.n = ns.n + m %}{% endfor %}{{ ns.n }}");
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      std::string messages = "[";
      for (int k = 0; k < 1000; ++k)
        messages += (k ? "," : "") + std::to_string(i);
      for (int repeat = 0; repeat < 20; ++repeat)
        results[i] = t->render("{\"messages\": " + messages + "]}");
    });
  for (auto &thread : threads)
    thread.join();
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(results[i], std::to_string(i * 1000));
}

// Random templates built from Jinja fragments: whatever happens must be a
// rendering or a sits::Error, never a crash or another exception.
TEST(ChatTemplateFuzz, RandomTemplatesNeverCrash) {
  static const char *const fragments[] = {
      "{{",
      "}}",
      "{%",
      "%}",
      "{#",
      "#}",
      "{%-",
      "-%}",
      "{{-",
      "-}}",
      " if ",
      " for ",
      " in ",
      " endif ",
      " endfor ",
      " else ",
      " set ",
      " = ",
      " x ",
      " messages ",
      " m ",
      " loop.index ",
      "(",
      ")",
      "[",
      "]",
      "{",
      "}",
      ",",
      ":",
      "|",
      " trim ",
      " tojson ",
      " length ",
      " is ",
      " defined ",
      " not ",
      " and ",
      " or ",
      " ~ ",
      " + ",
      " - ",
      " * ",
      " / ",
      " // ",
      " % ",
      " ** ",
      "'s'",
      "\"q\"",
      "1",
      "2.5",
      "-1",
      "none",
      "true",
      ".",
      "[0]",
      "[1:]",
      "[::-1]",
      "\n",
      "  ",
      "text",
      " macro ",
      " endmacro ",
      " call ",
      " endcall ",
      " raw ",
      " endraw ",
      " namespace ",
      " ns.x ",
      " range ",
      " recursive ",
      " loop ",
      " break ",
      " continue ",
      " filter ",
      " endfilter ",
      " with ",
      " endwith ",
      " generation ",
      " endgeneration ",
      " * 99999",
      "'\\x4",
      "\\",
      "\xc3\xa9",
      " elif ",
      " raise_exception ",
      " strftime_now ",
      " dict ",
      " caller ",
      " varargs ",
      "'%s' % ",
      " map(attribute='a') ",
      " select('odd') ",
      " items() ",
      " split() ",
  };
  std::mt19937 rng(20240726);
  std::uniform_int_distribution<size_t> pick(0, std::size(fragments) - 1);
  std::uniform_int_distribution<int> count(1, 40);
  const std::string variables =
      R"({"messages": [{"role": "user", "content": "a"}, 3, [1, 2]],
          "x": {"y": [1, "two", null]}, "m": "text"})";
  int rendered = 0, failed = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string source;
    for (int k = count(rng); k > 0; --k)
      source += fragments[pick(rng)];
    try {
      auto t = ChatTemplate::parse(source);
      t->renderAt(variables, "2024-01-01 00:00:00");
      ++rendered;
    } catch (const Error &e) {
      ASSERT_TRUE(e.code() == ErrorCode::TemplateError ||
                  e.code() == ErrorCode::InvalidArgument)
          << source;
      ++failed;
    }
  }
  // Both outcomes must be common for the test to mean something.
  EXPECT_GT(rendered, 1000);
  EXPECT_GT(failed, 1000);
}

// String formatting builds C format strings from template text: random
// specifications must give text or a sits::Error, never undefined behaviour.
TEST(ChatTemplateFuzz, RandomFormatSpecsNeverCrash) {
  static const char alphabet[] = "<>^=+- #0123456789,._%sdiufxXobceEgGnrac*";
  static const char *const values[] = {
      "7",   "-7",   "0",    "3.25", "-1e300",  "(1e300 * 1e300)", "'str'",
      "'é'", "true", "none", "[1]",  "1114112", "55296",           "-1"};
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> letter(0, sizeof(alphabet) - 2);
  std::uniform_int_distribution<size_t> value(0, std::size(values) - 1);
  std::uniform_int_distribution<int> length(0, 6);
  int rendered = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string spec;
    for (int k = length(rng); k > 0; --k)
      spec += alphabet[letter(rng)];
    std::string v = values[value(rng)];
    std::string source = i % 2 ? "{{ '{:" + spec + "}'.format(" + v + ") }}"
                               : "{{ '%" + spec + "' % " + v + " }}";
    try {
      render(source);
      ++rendered;
    } catch (const Error &e) {
      ASSERT_EQ(e.code(), ErrorCode::TemplateError) << source;
    }
  }
  EXPECT_GT(rendered, 2000);
}

} // namespace
