#include "base/json_fields.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace placer {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

constexpr JsonWhere kTop{"f.json", ""};

TEST(JsonFields, AbsentOrNullTakesTheFallbackAndWithoutOneIsMissing) {
  const json object = json::parse(R"({"n": null})");
  EXPECT_EQ(*ReadIntField(object, kTop, "n", 7), 7);
  EXPECT_EQ(*ReadIntField(object, kTop, "absent", 8), 8);
  EXPECT_EQ(*ReadStringField(object, kTop, "absent", "x"), "x");
  EXPECT_EQ(*ReadOptionalIntField(object, kTop, "n"), std::nullopt);
  EXPECT_EQ(*ReadOptionalNumberField(object, kTop, "absent"), std::nullopt);
  const absl::Status missing = ReadIntField(object, kTop, "n").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(missing), "f.json: n: missing");
  EXPECT_EQ(Message(ReadArrayField(object, {"f.json", "a.b"}, "list").status()),
            "f.json: a.b.list: missing");
}

TEST(JsonFields, AFieldOfAnotherTypeIsAnErrorNamingItsPathAndWhatItWas) {
  const json object = json::parse(R"({"s": 1, "b": "yes", "i": 2.5, "x": "3", "o": [], "a": {}})");
  const JsonWhere where{"f.json", "model.merges[3]"};
  EXPECT_EQ(Message(ReadStringField(object, where, "s", "fallback").status()),
            "f.json: model.merges[3].s: expected a string, got number");
  EXPECT_EQ(Message(ReadBoolField(object, where, "b", false).status()),
            "f.json: model.merges[3].b: expected true or false, got string");
  EXPECT_EQ(Message(ReadIntField(object, where, "i", 0).status()),
            "f.json: model.merges[3].i: expected an integer, got number");
  EXPECT_EQ(Message(ReadNumberField(object, where, "x", 0).status()),
            "f.json: model.merges[3].x: expected a number, got string");
  EXPECT_EQ(Message(ReadObjectField(object, where, "o").status()),
            "f.json: model.merges[3].o: expected an object, got array");
  EXPECT_EQ(Message(ReadArrayField(object, where, "a").status()),
            "f.json: model.merges[3].a: expected an array, got object");
  EXPECT_EQ(Message(ReadIntField(json::array(), where, "i", 0).status()),
            "f.json: model.merges[3]: expected an object, got array");
}

TEST(JsonFields, ValuesOfTheRightTypeAreRead) {
  const json object = json::parse(
      R"({"s": "t", "b": true, "i": -4, "d": 2.5, "di": 3, "a": [1], "o": {"k": 1}})");
  EXPECT_EQ(*ReadStringField(object, kTop, "s"), "t");
  EXPECT_TRUE(*ReadBoolField(object, kTop, "b"));
  EXPECT_EQ(*ReadIntField(object, kTop, "i"), -4);
  EXPECT_EQ(*ReadNumberField(object, kTop, "d"), 2.5);
  EXPECT_EQ(*ReadNumberField(object, kTop, "di"), 3.0);  // an integer is a number
  EXPECT_EQ(**ReadOptionalIntField(object, kTop, "i"), -4);
  EXPECT_EQ((*ReadArrayField(object, kTop, "a"))->size(), 1u);
  EXPECT_EQ((*ReadObjectField(object, kTop, "o"))->at("k"), 1);
}

TEST(JsonFields, IntegersBeyondInt64AreOutOfRangeNotWrapped) {
  const json object = json::parse(R"({"big": 18446744073709551615, "max": 9223372036854775807})");
  EXPECT_EQ(*ReadIntField(object, kTop, "max"), INT64_MAX);
  EXPECT_EQ(Message(ReadIntField(object, kTop, "big").status()),
            "f.json: big: integer out of range");
  EXPECT_EQ(Message(JsonAsInt(object["big"], {"f.json", "big"}).status()),
            "f.json: big: integer out of range");
}

TEST(JsonFields, PathsJoinAndIndex) {
  EXPECT_EQ(JoinJsonPath("", "a"), "a");
  EXPECT_EQ(JoinJsonPath("a", "b"), "a.b");
  EXPECT_EQ(IndexJsonPath("a.b", 12), "a.b[12]");
  EXPECT_EQ(Message(JsonError({"f.json", ""}, "not valid JSON")), "f.json: not valid JSON");
  EXPECT_THAT(Message(JsonAsString(json(3), {"f.json", "x[0]"}).status()),
              HasSubstr("f.json: x[0]: expected a string, got number"));
}

}  // namespace
}  // namespace placer
