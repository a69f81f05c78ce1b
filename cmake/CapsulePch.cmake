# Precompiled headers. Most of a cold build's translation units are one
# unity batch of a small target (a test or helper executable), and each
# parsed the standard library, fmt, nlohmann/json, protobuf and GoogleTest
# again: 5.5 s of parsing alone here, before any code of ours. Two headers
# are compiled once, one per set of flags (GCC and clang accept a PCH only
# where the options that shape code match): the product's, and the tests'
# (-O0 -g1, with GoogleTest). Every user reuses one of the two (REUSE_FROM).
# Through a PCH, GCC 12 reports a warning it hides in system headers
# otherwise: its -Warray-bounds false positive on
# `std::string("literal") + chars` at -O2 (GCC PR 105651). Write
# `"literal" + std::string(chars)` instead.
# CMake adds -Winvalid-pch to a PCH's users: with -Werror, a target whose
# flags do not match fails the build instead of silently parsing it all.
option(CAPSULE_PCH "Precompile the heavy common headers" ON)

set(CAPSULE_PCH_HEADERS
    <algorithm> <chrono> <cstdint> <filesystem> <functional> <map> <memory>
    <mutex> <optional> <span> <sstream> <string> <string_view> <thread>
    <unordered_map> <variant> <vector>
    <fmt/format.h> <nlohmann/json.hpp> <google/protobuf/message.h>)

# capsule_pch_host(NAME [TESTS]) makes the target that owns one PCH. Call it
# in the folder whose directory options the PCH's users share.
function(capsule_pch_host name)
  cmake_parse_arguments(P "TESTS" "" "" ${ARGN})
  if(NOT CAPSULE_PCH)
    return()
  endif()
  add_library(${name} OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch/pch_host.cc)
  target_link_libraries(${name} PRIVATE fmt::fmt nlohmann_json::nlohmann_json protobuf::libprotobuf)
  set(headers ${CAPSULE_PCH_HEADERS})
  if(P_TESTS)
    target_link_libraries(${name} PRIVATE GTest::gtest GTest::gmock)
    list(APPEND headers <gtest/gtest.h> <gmock/gmock.h>)
  endif()
  target_compile_options(${name} PRIVATE ${CAPSULE_WARNINGS})
  target_precompile_headers(${name} PRIVATE ${headers})
endfunction()

# capsule_use_pch(TARGET HOST) compiles TARGET with HOST's PCH.
function(capsule_use_pch target host)
  if(CAPSULE_PCH)
    target_precompile_headers(${target} REUSE_FROM ${host})
  endif()
endfunction()
