# Every dependency comes from Debian 12's packages (installed by `make deps`).
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)
pkg_check_modules(LIBCAP REQUIRED IMPORTED_TARGET libcap)
pkg_check_modules(LIBNL REQUIRED IMPORTED_TARGET libnl-3.0 libnl-route-3.0)
# The metrics endpoint's HTTP server (runtime/metrics).
pkg_check_modules(CPP_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
pkg_check_modules(NFTABLES REQUIRED IMPORTED_TARGET libnftables)
if(CAPSULE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

# gRPC, abseil and protobuf as the project links them: shared, or static in
# an executable whose CAPSULE_STATIC_RPC property is ON. The shim's two
# binaries run on every pod's start, and the dynamic loader's relocations of
# these ~60 shared objects were half of the daemon's start: `capsule-shimd
# --version` took 29 ms shared and 17 ms static on this machine. The -dev
# packages that `make deps` installs ship the archives beside the .so; a
# library without one (libfmt) stays shared.
pkg_check_modules(RPC_PC REQUIRED grpc++ protobuf)
set(capsule_rpc_static)
foreach(lib IN LISTS RPC_PC_STATIC_LIBRARIES)
  find_library(capsule_rpc_a_${lib} NAMES lib${lib}.a HINTS ${RPC_PC_STATIC_LIBRARY_DIRS} NO_CACHE)
  if(capsule_rpc_a_${lib})
    list(APPEND capsule_rpc_static ${capsule_rpc_a_${lib}})
  else()
    list(APPEND capsule_rpc_static ${lib})  # a system library (dl, rt, atomic)
  endif()
endforeach()
list(REMOVE_DUPLICATES capsule_rpc_static)
set(capsule_rpc_is_static "$<BOOL:$<TARGET_PROPERTY:CAPSULE_STATIC_RPC>>")
foreach(kind protobuf grpc)
  add_library(capsule_${kind}_deps INTERFACE)
  # Archives in a group: their order in the .pc files is not always a
  # topological one.
  target_link_libraries(capsule_${kind}_deps INTERFACE
    "$<${capsule_rpc_is_static}:-Wl,--start-group;${capsule_rpc_static};-Wl,--end-group;Threads::Threads>")
endforeach()
target_link_libraries(capsule_protobuf_deps INTERFACE "$<$<NOT:${capsule_rpc_is_static}>:protobuf::libprotobuf>")
target_link_libraries(capsule_grpc_deps INTERFACE "$<$<NOT:${capsule_rpc_is_static}>:gRPC::grpc++>")
