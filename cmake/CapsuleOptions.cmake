# Build-wide switches: warnings as errors, unity batches, sanitizers, fuzzing, ccache.
option(CAPSULE_BUILD_TESTS "Build the test suite" ON)
option(CAPSULE_SANITIZE "Build with AddressSanitizer and UBSan" OFF)
option(CAPSULE_FUZZ "Build libFuzzer targets (needs clang)" OFF)

# Unity builds: each target's sources are compiled in batches of eight, one
# translation unit per batch, so the heavy headers (gRPC, protobuf, CLI11,
# GoogleTest, nlohmann/json) are parsed and their inline code generated
# once per batch instead of once per file: a cold release build on two
# cores went from 1,415 s to 775 s (with test code at -O1, tests/). A
# file-local name (anonymous namespace, static) must be unique in
# its target, so file loggers are named after their file (kTapDeviceLog).
# Turn it off for a quick edit-compile loop on one file.
option(CAPSULE_UNITY_BUILD "Compile each target's sources in batches" ON)
if(CAPSULE_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 8)
endif()

# ccache caches a compile that uses a precompiled header (CapsulePch.cmake)
# only when told that the header's macros and __TIME__ may be trusted.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(capsule_ccache ${CMAKE_COMMAND} -E env CCACHE_SLOPPINESS=pch_defines,time_macros ${CCACHE_PROGRAM})
  set(CMAKE_C_COMPILER_LAUNCHER ${capsule_ccache})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${capsule_ccache})
endif()

# The release tree's debug info is line tables (-g1), as Chromium's official
# builds ship (symbol_level=1): a crash's backtrace and a profile name every
# frame's function, file and line, which is what an operator's bug report
# carries. Types and locals for a debugger session are an option away
# (-DCAPSULE_FULL_DEBUG_INFO=ON). Full -g was 12-20% of an -O2 compile here
# (GCC 12, the five largest product batches: 159.5 s of user time against
# 140.0 s at -g1) and made each object 2.5x larger for every link to read. With full info, GCC's variable-tracking assignments
# (exact locations in optimized code) stay off: that pass was a third of
# the compile (33 s against 22 s) and changes no generated code; a debugger
# shows more locals as <optimized out>.
option(CAPSULE_FULL_DEBUG_INFO "Types and locals in the release tree's debug info (-g), not only line tables" OFF)
if(NOT CAPSULE_FULL_DEBUG_INFO)
  add_compile_options("$<$<CONFIG:RelWithDebInfo>:-g1>")
elseif(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options("$<$<CONFIG:RelWithDebInfo>:-fno-var-tracking-assignments>")
endif()

# Every target compiles with -pthread (it defines _REENTRANT): a
# precompiled header is used only where that macro is as it was when the
# header was compiled (CapsulePch.cmake), and nearly all of the code is
# threaded anyway.
add_compile_options(-pthread)

# Warnings apply to our code only; generated protobuf code gets its own,
# looser set in proto/CMakeLists.txt.
set(CAPSULE_WARNINGS -Wall -Wextra -Wpedantic -Werror -Wshadow
    -Wnon-virtual-dtor -Wcast-align -Wunused -Woverloaded-virtual
    -Wimplicit-fallthrough -Wformat=2)

# The check tree (make test-sanitize / test-fuzz) is one clang build with
# both on: unit tests under ASan+UBSan and libFuzzer targets share its
# libraries, so CI compiles the code twice (release, check), not three times.
if(CAPSULE_SANITIZE OR CAPSULE_FUZZ)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

if(CAPSULE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "CAPSULE_FUZZ needs clang (CXX=clang++)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# Instrumented trees are for finding bugs, not for shipping: -O1 is ASan's
# usual level and line tables are all a report's stack trace needs; both
# halve compile time against full debug info at -O2. The product stays at
# -O1 (not -O0, which would compile in half the time again): clang drops
# UBSan's object-size check at -O0, and fuzzing is worth the inputs it
# tries a second. Test code is -O0 (tests/CMakeLists.txt).
if((CAPSULE_SANITIZE OR CAPSULE_FUZZ) AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  add_compile_options(-O1 -gline-tables-only)
endif()

# lld where it is installed (make deps installs it): GNU ld takes 2-3 s to
# link each of the ~110 executables, lld under one (capsule-runtime, 104 MB:
# 2.9 s against 0.7 s here).
include(CheckLinkerFlag)
check_linker_flag(CXX "-fuse-ld=lld" CAPSULE_HAVE_LLD)
if(CAPSULE_HAVE_LLD)
  add_link_options(-fuse-ld=lld)
endif()

include(CapsulePch)

# capsule_target(NAME) applies the project's warnings to one of our targets,
# and the product's precompiled headers outside tests/ (capsule_test gives a
# test the tests' own; a test helper without GoogleTest has none).
function(capsule_target name)
  target_compile_options(${name} PRIVATE ${CAPSULE_WARNINGS})
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  if(NOT rel MATCHES "^tests(/|$)")
    capsule_use_pch(${name} capsule_pch)
  endif()
endfunction()

# Adds every immediate subfolder that has a CMakeLists.txt, so a new component
# folder joins the build without editing its parent.
function(capsule_add_component_dirs)
  file(GLOB children LIST_DIRECTORIES true RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/*)
  list(SORT children)
  foreach(child IN LISTS children)
    if(IS_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/${child} AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${child}/CMakeLists.txt)
      add_subdirectory(${child})
    endif()
  endforeach()
endfunction()
