# Run by the capsule-guest-modules target (cmake -P) when the guest kernel
# changes: copies the part of its module tree a pod may need on demand
# (networking: netfilter, nat, bridge, ipvs, veth, tun, vxlan...; the
# libraries and crypto they pull in) with depmod's index files to
# OUT/<release>/, which becomes config guest.modules (installed as
# share/capsule/modules). The guest's modprobe helper loads from it through
# the share; modules.dep still names modules not copied, and asking for one
# of those is a clear "not found" in the guest's kernel log.
#   cmake -DKERNEL_DIR=... -DOUT=... -DSTAMP=... -P copy-guest-modules.cmake
file(GLOB releases LIST_DIRECTORIES true "${KERNEL_DIR}/lib/modules/*")
list(LENGTH releases n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one module tree in ${KERNEL_DIR}/lib/modules, found ${n}: run `make deps`")
endif()
get_filename_component(release "${releases}" NAME)
set(src "${releases}")
set(dst "${OUT}/${release}")
file(REMOVE_RECURSE "${OUT}")
foreach(d kernel/net kernel/lib kernel/crypto)
  if(EXISTS "${src}/${d}")
    file(COPY "${src}/${d}/" DESTINATION "${dst}/${d}")
  endif()
endforeach()
file(GLOB net_drivers "${src}/kernel/drivers/net/*.ko*")
file(COPY ${net_drivers} DESTINATION "${dst}/kernel/drivers/net")
foreach(f modules.dep modules.alias modules.builtin modules.softdep modules.order)
  if(NOT EXISTS "${src}/${f}")
    message(FATAL_ERROR "${src}/${f} is missing: the guest kernel was not indexed by depmod (run `make deps`)")
  endif()
  file(COPY "${src}/${f}" DESTINATION "${dst}")
endforeach()
file(WRITE "${STAMP}" "${release}\n")
