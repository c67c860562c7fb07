# placer_base: the small things every folder shares (one UTF-8 check, one typed-JSON reader;
# status_macros.h is header-only). Included by the top-level build and by the standalone fuzz
# build (tests/fuzz), which compiles it with clang and sanitizers.
if(NOT TARGET placer_base)
  find_package(ICU REQUIRED COMPONENTS uc)
  add_library(placer_base STATIC
    ${CMAKE_CURRENT_LIST_DIR}/json_fields.cc
    ${CMAKE_CURRENT_LIST_DIR}/malloc_reuse.cc
    ${CMAKE_CURRENT_LIST_DIR}/openblas_core.cc
    ${CMAKE_CURRENT_LIST_DIR}/utf8.cc)
  target_include_directories(placer_base PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
  target_link_libraries(placer_base PUBLIC
    absl::status absl::statusor absl::strings nlohmann_json::nlohmann_json ICU::uc ${CMAKE_DL_LIBS})
  target_compile_options(placer_base PRIVATE -Wall -Wextra -Werror)
  set_target_properties(placer_base PROPERTIES POSITION_INDEPENDENT_CODE ON)
endif()
