// placer::wire (proto/wire/request_wire.h): the UTF-8 validator agrees with protobuf's on
// every sequence up to three bytes and on the four-byte boundaries; invalid text is named by
// its field path and byte; the request parse accepts exactly what protobuf accepts (the fuzz
// target's entry point, on deterministic mutations of a full request).
#include <gtest/gtest.h>
#include <google/protobuf/stubs/common.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "placer/v1/placer.pb.h"
#include "base/utf8.h"
#include "proto/wire/request_wire.h"
#include "tests/fuzz/request_wire_fuzz_entry_point.h"

namespace placer::wire {
namespace {

bool ProtobufSaysValid(const std::string& text) {
  return google::protobuf::internal::IsStructurallyValidUTF8(text.data(),
                                                             static_cast<int>(text.size()));
}

TEST(FirstInvalidUtf8, AgreesWithProtobufOnEveryShortSequence) {
  std::string text(3, '\0');
  int disagreements = 0;
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      for (int c = 0; c < 256; ++c) {
        text[0] = static_cast<char>(a);
        text[1] = static_cast<char>(b);
        text[2] = static_cast<char>(c);
        if (FirstInvalidUtf8(text).has_value() == ProtobufSaysValid(text)) {
          if (++disagreements < 5) ADD_FAILURE() << a << " " << b << " " << c;
        }
      }
    }
  }
  EXPECT_EQ(disagreements, 0);
  for (const std::string four : {"\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xf0\x8f\xbf\xbf",
                                  "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xf3\xbf\xbf\xbf"}) {
    EXPECT_EQ(!FirstInvalidUtf8(four).has_value(), ProtobufSaysValid(four));
  }
}

TEST(FirstInvalidUtf8, OffsetIsWhereTheBadSequenceStarts) {
  EXPECT_EQ(FirstInvalidUtf8(""), std::nullopt);
  EXPECT_EQ(FirstInvalidUtf8("R\xc3\xa9sum\xc3\xa9 \xf0\x9f\x99\x82"), std::nullopt);
  EXPECT_EQ(FirstInvalidUtf8("abc\xff"), 3u);
  EXPECT_EQ(FirstInvalidUtf8("\xc3\xa9\xe2\x82"), 2u);  // truncated at the end
  EXPECT_EQ(FirstInvalidUtf8("a\xed\xa0\x80"), 1u);     // a surrogate
}

TEST(FindInvalidUtf8Field, NamesNestedAndRepeatedFields) {
  v1::GenerateRequest request;
  request.set_prompt("fine");
  request.mutable_params()->add_stop("one");
  request.mutable_params()->add_stop("tw\xc3");
  request.set_request_id("id");
  std::string wire;
  ASSERT_TRUE(request.SerializePartialToString(&wire));  // protobuf only warns when writing
  EXPECT_EQ(FindInvalidUtf8Field(wire, *v1::GenerateRequest::descriptor()),
            "params.stop[1]: invalid UTF-8 at byte 2 (text must be well-formed UTF-8)");
  v1::GenerateRequest parsed;
  EXPECT_EQ(ParseRequestWire(wire, &parsed),
            "params.stop[1]: invalid UTF-8 at byte 2 (text must be well-formed UTF-8)");
  request.mutable_params()->set_stop(1, "two");
  ASSERT_TRUE(request.SerializeToString(&wire));
  EXPECT_EQ(ParseRequestWire(wire, &parsed), std::nullopt);
  EXPECT_EQ(parsed.params().stop(1), "two");
  EXPECT_EQ(ParseRequestWire("\x0a\x05" "ab", &parsed),
            "the request is not a well-formed placer.v1.GenerateRequest message (protobuf wire "
            "format)");
}

void Feed(const std::string& bytes) {
  fuzz::FuzzRequestWire(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

TEST(RequestWireFuzzEntryPoint, AgreesWithProtobufOnMutationsOfARequest) {
  v1::GenerateRequest request;
  request.set_prompt("Hello, placer! R\xc3\xa9sum\xc3\xa9 \xf0\x9f\x99\x82");
  request.add_prompt_token_ids(5);
  request.mutable_params()->set_max_new_tokens(7);
  request.mutable_params()->set_top_p(0.5f);
  request.mutable_params()->add_stop("\xe2\x82\xac");
  request.mutable_params()->add_stop_token_ids(2);
  request.set_request_id("abc");
  const std::string seed = request.SerializeAsString();
  Feed(seed);
  for (std::size_t n = 0; n < seed.size(); ++n) Feed(seed.substr(0, n));
  for (std::size_t i = 0; i < seed.size(); ++i) {
    for (const int mask : {0x01, 0x40, 0x80, 0xff}) {
      std::string flipped = seed;
      flipped[i] = static_cast<char>(flipped[i] ^ mask);
      Feed(flipped);
    }
    std::string deleted = seed;
    deleted.erase(i, 1);
    Feed(deleted);
  }
  // Reaching here means no trap: every mutation was judged as protobuf judges it.
  SUCCEED();
}

TEST(RequestWireFuzzEntryPoint, SavedInputsStillPass) {
  int fed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(PLACER_REQUEST_WIRE_REGRESSIONS)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    Feed(bytes.str());
    ++fed;
  }
  EXPECT_GE(fed, 2);
}

}  // namespace
}  // namespace placer::wire
