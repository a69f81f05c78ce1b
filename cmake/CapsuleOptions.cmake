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

# The release tree keeps full debug info (-g: types, locals, lines) but not
# GCC's variable-tracking assignments, which make locations exact in
# optimized code: that pass was a third of an -O2 -g compile here
# (capsule_agent_app's batch: 33 s, 22 s without it). It does not change the
# code generated; a debugger shows more locals as <optimized out>.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
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

# The check tree (clang, instrumented) is for finding bugs, not for
# shipping: line tables are all a report's stack trace needs. Its code is
# built at -O0, which compiles in half the time of -O1 under ASan here
# (capsule_vm's first batch: 12 s against 24 s). ASan and UBSan instrument
# the same accesses and operations at -O0 (optimizing can only drop
# checks); the unit tests just run slower (51 s against 45 s). Fuzzing is
# the exception: its worth is inputs tried a second, so the code a fuzzer
# links is built at -O1 (capsule_finish_targets below). The tree's build
# went from 1,114 to 854 core-seconds.
set(CAPSULE_CHECK_TREE OFF)
if((CAPSULE_SANITIZE OR CAPSULE_FUZZ) AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  set(CAPSULE_CHECK_TREE ON)
  add_compile_options(-O0 -gline-tables-only)
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
# The choice of header waits for capsule_finish_targets, which knows what
# the fuzzers link.
function(capsule_target name)
  target_compile_options(${name} PRIVATE ${CAPSULE_WARNINGS})
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  if(NOT rel MATCHES "^tests(/|$)")
    set_property(GLOBAL APPEND PROPERTY CAPSULE_PRODUCT_TARGETS ${name})
  endif()
endfunction()

# capsule_link_closure(OUT TARGET...) sets OUT to the targets of this build
# that the TARGETs link, directly or through others.
function(capsule_link_closure out)
  set(seen)
  set(todo ${ARGN})
  while(todo)
    list(POP_FRONT todo t)
    if(t IN_LIST seen OR NOT TARGET ${t})
      continue()
    endif()
    get_target_property(imported ${t} IMPORTED)
    if(imported)
      continue()
    endif()
    list(APPEND seen ${t})
    foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
      get_target_property(libs ${t} ${prop})
      foreach(lib IN LISTS libs)
        # $<LINK_ONLY:x> and similar wrap a plain target name.
        string(REGEX REPLACE "^\\$<[A-Z_]+:(.*)>$" "\\1" lib "${lib}")
        if(lib AND NOT lib MATCHES "[$<>]")
          list(APPEND todo ${lib})
        endif()
      endforeach()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# capsule_finish_targets() runs once every target exists. It gives each
# product target the product's precompiled header; in the check tree, the
# product code a fuzzer links is built at -O1 with its own header (a PCH is
# used only with the optimization level it was built with).
function(capsule_finish_targets)
  get_property(product GLOBAL PROPERTY CAPSULE_PRODUCT_TARGETS)
  get_property(fuzzers GLOBAL PROPERTY CAPSULE_FUZZ_TARGETS)
  set(fuzzed)
  if(CAPSULE_CHECK_TREE AND fuzzers)
    capsule_link_closure(fuzzed ${fuzzers})
    capsule_pch_host(capsule_pch_fuzzed)
    if(TARGET capsule_pch_fuzzed)
      target_compile_options(capsule_pch_fuzzed PRIVATE -O1)
    endif()
  endif()
  foreach(t IN LISTS product)
    if(t IN_LIST fuzzed)
      target_compile_options(${t} PRIVATE -O1)
      capsule_use_pch(${t} capsule_pch_fuzzed)
    else()
      capsule_use_pch(${t} capsule_pch)
    endif()
  endforeach()
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
