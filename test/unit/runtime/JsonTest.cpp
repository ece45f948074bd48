//===- JsonTest.cpp - The metadata JSON reader and writer -----------------===//

#include "sits/Json.h"

#include <gtest/gtest.h>

using sits::json::Value;

namespace {

Value parseOk(const std::string &text) {
  Value v;
  std::string error;
  EXPECT_TRUE(sits::json::parse(text, &v, &error)) << text << ": " << error;
  return v;
}

std::string parseError(const std::string &text) {
  Value v;
  std::string error;
  EXPECT_FALSE(sits::json::parse(text, &v, &error)) << text;
  return error;
}

TEST(Json, ParsesAllKinds) {
  Value v = parseOk(
      R"( {"a": [1, -2.5e1, true, false, null, "x\"y\u00e9\ud83d\ude00"],
                          "big": 9007199254740993, "o": {}} )");
  ASSERT_TRUE(v.isObject());
  const Value *a = v.find("a");
  ASSERT_TRUE(a && a->isArray());
  ASSERT_EQ(a->size(), 6u);
  EXPECT_TRUE(a->elements()[0].isInteger());
  EXPECT_EQ(a->elements()[0].getInteger(), 1);
  EXPECT_FALSE(a->elements()[1].isInteger());
  EXPECT_EQ(a->elements()[1].getNumber(), -25.0);
  EXPECT_TRUE(a->elements()[2].getBool());
  EXPECT_TRUE(a->elements()[4].isNull());
  EXPECT_EQ(a->elements()[5].getString(), "x\"y\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.find("big")->getInteger(), 9007199254740993LL); // exact
  EXPECT_TRUE(v.find("o")->isObject());
  EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(Json, WriteThenParseIsIdentity) {
  Value v = Value::object();
  v.set("name", "a\nb\t\"c\"\x01");
  v.set("n", int64_t(-123456789012345LL));
  v.set("f", 0.1);
  Value &list = v.set("list", Value::array());
  list.push(1);
  list.push(Value::object()).set("k", false);
  for (int indent : {0, 2}) {
    std::string text = v.write(indent);
    Value back = parseOk(text);
    EXPECT_EQ(back.write(indent), text);
    EXPECT_EQ(back.find("name")->getString(), "a\nb\t\"c\"\x01");
    EXPECT_EQ(back.find("n")->getInteger(), -123456789012345LL);
    EXPECT_EQ(back.find("f")->getNumber(), 0.1);
  }
  EXPECT_EQ(v.write(0), R"({"name":"a\nb\t\"c\"\u0001","n":-123456789012345,)"
                        R"("f":0.10000000000000001,"list":[1,{"k":false}]})");
}

TEST(Json, RejectsMalformedTextWithItsOffset) {
  EXPECT_NE(parseError("{\"a\": 1,}").find("expected a string key"),
            std::string::npos);
  EXPECT_NE(parseError("[1, 2").find("expected ',' or ']'"), std::string::npos);
  EXPECT_NE(parseError("{\"a\": 1, \"a\": 2}").find("duplicate key"),
            std::string::npos);
  EXPECT_NE(parseError("\"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(parseError("\"\\ud800\"").find("unpaired surrogate"),
            std::string::npos);
  EXPECT_NE(parseError("01").find("leading zero"), std::string::npos);
  EXPECT_NE(parseError("1 2").find("trailing"), std::string::npos);
  EXPECT_NE(parseError("tru").find("at byte 0"), std::string::npos);
  EXPECT_NE(parseError("").find("unexpected end"), std::string::npos);
  EXPECT_NE(parseError("\"a\nb\"").find("control character"),
            std::string::npos);
  EXPECT_NE(parseError(std::string(100, '[') + std::string(100, ']'))
                .find("nesting deeper"),
            std::string::npos);
}

} // namespace
