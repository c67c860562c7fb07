# placer_tokenizer: tokenizer.json natively, without libtorch. Included by model/CMakeLists.txt
# and by the standalone fuzz build (tests/fuzz), which compiles it with clang and sanitizers.
find_package(ICU REQUIRED COMPONENTS uc i18n)
include(${CMAKE_CURRENT_LIST_DIR}/../../base/base.cmake)

add_library(placer_tokenizer STATIC
  ${CMAKE_CURRENT_LIST_DIR}/added_tokens.cc
  ${CMAKE_CURRENT_LIST_DIR}/bpe_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/byte_level_alphabet.cc
  ${CMAKE_CURRENT_LIST_DIR}/normalizer.cc
  ${CMAKE_CURRENT_LIST_DIR}/pre_tokenizer.cc
  ${CMAKE_CURRENT_LIST_DIR}/special_tokens.cc
  ${CMAKE_CURRENT_LIST_DIR}/stop_string_matcher.cc
  ${CMAKE_CURRENT_LIST_DIR}/stream_decoder.cc
  ${CMAKE_CURRENT_LIST_DIR}/token_decoder.cc
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer.cc
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer_json.cc
  ${CMAKE_CURRENT_LIST_DIR}/unicode_regex.cc
  ${CMAKE_CURRENT_LIST_DIR}/unicode_text.cc)
target_include_directories(placer_tokenizer PUBLIC ${CMAKE_CURRENT_LIST_DIR}/../..)
target_link_libraries(placer_tokenizer PUBLIC placer_base
  absl::status absl::statusor absl::strings absl::str_format absl::span
  nlohmann_json::nlohmann_json ICU::uc ICU::i18n)
target_compile_options(placer_tokenizer PRIVATE -Wall -Wextra -Werror)
