// cujax::json against known texts: Python's json module is the reference for what parses, what
// is rejected and how values are written (its separators, shortest round-trip floats).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "cujax/core/error.h"
#include "cujax/core/json.h"

namespace cujax {
namespace {

std::string parse_error(const std::string& text) {
  try {
    json::parse(text, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "parsed";
}

TEST(Json, ParsesEveryKindAndKeepsIntegersApartFromFloats) {
  const json::Value v = json::parse(
      R"({"i": -9007199254740993, "f": 2.5e-3, "t": true, "n": null, "s": "a\u00e9\ud83d\ude00\n",)"
      R"( "a": [1, [2, {}], []], "big": 18446744073709551615})");
  EXPECT_EQ(v.at("i").kind(), json::Value::Kind::Int);
  EXPECT_EQ(v.at("i").as_int(), -9007199254740993);  // beyond a double's 53 bits, exact
  EXPECT_EQ(v.at("f").kind(), json::Value::Kind::Float);
  EXPECT_DOUBLE_EQ(v.at("f").as_double(), 0.0025);
  EXPECT_TRUE(v.at("t").as_bool());
  EXPECT_TRUE(v.at("n").is_null());
  EXPECT_EQ(v.at("s").as_string(), "a\xc3\xa9\xf0\x9f\x98\x80\n");  // surrogate pair decoded
  EXPECT_EQ(v.at("a").as_array()[1].as_array()[0].as_int(), 2);
  // Past int64 a number is the nearest double, as Python's float().
  EXPECT_EQ(v.at("big").kind(), json::Value::Kind::Float);
  EXPECT_DOUBLE_EQ(v.at("big").as_double(), 18446744073709551615.0);
}

TEST(Json, ObjectsKeepTheirOrderAndARepeatedKeyItsLastValue) {
  const json::Value v = json::parse(R"({"z": 1, "a": 2, "z": 3})");
  ASSERT_EQ(v.as_object().size(), 2u);
  EXPECT_EQ(v.as_object()[0].first, "z");
  EXPECT_EQ(v.at("z").as_int(), 3);  // json.loads: the last value, at the first key's place
  EXPECT_EQ(v.as_object()[1].first, "a");
}

TEST(Json, WritesWithPythonSeparatorsAndShortestFloats) {
  // json.dumps({"shape": [2, 3], "x": 1.0, "y": 0.1, "z": 1e+20, "s": "q\"\\\n\x01", "o": {}})
  const json::Value v =
      json::parse(R"({"shape":[2,3],"x":1.0,"y":0.1,"z":1e20,"s":"q\"\\\n\u0001","o":{},"e":[]})");
  EXPECT_EQ(json::dump(v), R"({"shape": [2, 3], "x": 1.0, "y": 0.1, "z": 1e+20, )"
                           R"("s": "q\"\\\n\u0001", "o": {}, "e": []})");
  EXPECT_EQ(json::dump(json::parse(R"({"a": [1], "b": {"c": null}})"), 2),
            "{\n  \"a\": [\n    1\n  ],\n  \"b\": {\n    \"c\": null\n  }\n}");
  // Every value written parses back to itself.
  EXPECT_EQ(json::dump(json::parse(json::dump(v, 4))), json::dump(v));
}

TEST(Json, NonFiniteFloatsAndBrokenUtf8AreWrittenAsValidJson) {
  json::Value v = json::Value::object({});
  v.set("nan", std::numeric_limits<double>::quiet_NaN());
  v.set("inf", -std::numeric_limits<double>::infinity());
  v.set("cut", std::string("ok\xe2\x82"));  // a UTF-8 character cut after two of three bytes
  const std::string text = json::dump(v);
  EXPECT_EQ(text, "{\"nan\": null, \"inf\": null, \"cut\": \"ok\xef\xbf\xbd\"}");
  EXPECT_NO_THROW(json::parse(text));
  EXPECT_EQ(json::quote("\xff"), "\"\xef\xbf\xbd\"");
}

TEST(Json, RejectsWhatRfc8259DoesAndSaysWhere) {
  for (const char* text : {"", "{", "[1,]", "{\"a\" 1}", "NaN", "[Infinity]", "{'a': 1}", "[1] x",
                           "\"\xff\"", "[1 /* c */]", "01", "\"\\x41\"", "\"\t\""}) {
    const std::string e = parse_error(text);
    EXPECT_EQ(e.rfind("config.json: ", 0), 0u) << "'" << text << "': " << e;
    EXPECT_NE(e.find("byte offset"), std::string::npos) << e;
  }
  EXPECT_NE(parse_error("{\"a\": [1, 2,]}").find("line 1, column 13"), std::string::npos);
}

TEST(Json, DeepNestingIsAnErrorNotACrash) {
  const size_t deep = json::kMaxDepth + 1;
  EXPECT_NE(parse_error(std::string(deep, '[') + std::string(deep, ']')).find("nesting deeper"),
            std::string::npos);
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\": ";
  EXPECT_NE(parse_error(objects).find("nesting deeper"), std::string::npos);
  const size_t ok = json::kMaxDepth;
  EXPECT_NO_THROW(json::parse(std::string(ok, '[') + std::string(ok, ']')));
}

TEST(Json, AccessorsNameWhatTheyFound) {
  const json::Value v = json::parse(R"({"n": "3", "f": 2.5})");
  EXPECT_THROW(v.at("missing"), Error);
  try {
    v.at("n").as_int();
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "JSON: expected an integer, got a string");
  }
  EXPECT_THROW(v.at("f").as_int(), Error);  // 2.5 is not an integer
  EXPECT_EQ(json::parse("4.0").as_int(), 4);
  EXPECT_EQ(json::parse("-9.223372036854775808e18").as_int(), INT64_MIN);
  // Integral floats beyond int64 (found by the exported-artifact fuzzer): an error, not UB.
  for (const char* big : {"9.223372036854775808e18", "5.55556e118", "-1e19"}) {
    try {
      json::parse(big).as_int();
      FAIL() << big;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("does not fit in a 64-bit integer"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace cujax
