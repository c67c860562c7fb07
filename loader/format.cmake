# The torch-free part of the loader: file formats only. Included by
# loader/CMakeLists.txt and by the standalone fuzz build (tests/fuzz), which
# compiles it with clang and sanitizers.
include(${CMAKE_CURRENT_LIST_DIR}/../base/base.cmake)
set(PLACER_LOADER_FORMAT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_files.cc
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_writer.cc
  ${CMAKE_CURRENT_LIST_DIR}/dtype.cc
  ${CMAKE_CURRENT_LIST_DIR}/file_util.cc
  ${CMAKE_CURRENT_LIST_DIR}/architectures/architecture.cc
  ${CMAKE_CURRENT_LIST_DIR}/architectures/gpt2.cc
  ${CMAKE_CURRENT_LIST_DIR}/architectures/llama_family.cc
  ${CMAKE_CURRENT_LIST_DIR}/model_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/quantized_layout.cc
  ${CMAKE_CURRENT_LIST_DIR}/quantized_slots.cc
  ${CMAKE_CURRENT_LIST_DIR}/prequantized_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/compressed_tensors_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/prequantized_tensors.cc
  ${CMAKE_CURRENT_LIST_DIR}/safetensors_header.cc
  ${CMAKE_CURRENT_LIST_DIR}/safetensors_writer.cc
  ${CMAKE_CURRENT_LIST_DIR}/shard_index.cc
  ${CMAKE_CURRENT_LIST_DIR}/unquantized_modules.cc)

# RE2 (linear-time regexes) for module-name patterns in quantization configs; libgrpc++-dev
# depends on libre2-dev, which has no CMake package, only pkg-config.
find_package(PkgConfig REQUIRED)
pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)

add_library(placer_loader_format STATIC ${PLACER_LOADER_FORMAT_SOURCES})
target_include_directories(placer_loader_format PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(placer_loader_format PUBLIC placer_base
  absl::status absl::statusor absl::strings absl::str_format
  nlohmann_json::nlohmann_json PkgConfig::RE2)
target_compile_options(placer_loader_format PRIVATE -Wall -Wextra -Werror)
