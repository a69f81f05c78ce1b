# Run by the capsule-guest-kernel target on every build (cmake -P): fails with
# a clear message when `make deps` has not fetched the guest kernel, and
# otherwise refreshes STAMP only when the kernel version changed, so the
# initrd is rebuilt exactly then.
#   cmake -DKERNEL_DIR=... -DSTAMP=... -P check-guest-kernel.cmake
if(NOT EXISTS "${KERNEL_DIR}/capsule-kernel.env")
  message(FATAL_ERROR
    "guest kernel not found in ${KERNEL_DIR}: run `make deps` "
    "(it runs deploy/fetch-guest-kernel.sh), or set CAPSULE_GUEST_KERNEL_DIR")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${KERNEL_DIR}/capsule-kernel.env" "${STAMP}"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cannot write ${STAMP}")
endif()
