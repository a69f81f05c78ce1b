# Capsule's front door. Two commands set up and test a fresh Debian 12 host:
#   make deps && make      install packages, build everything
#   make test              unit + integration tests, sanitizer run, fuzzing
SHELL := /bin/bash
BUILD ?= build
BUILD_CHECK ?= build-check
JOBS ?= 2
FUZZ_SECONDS ?= 30
CMAKE_FLAGS ?=
export CCACHE_BASEDIR := $(CURDIR)

# Debian 12 packages the build, the guest image and the tests need.
DEPS_PKGS := build-essential cmake ninja-build pkg-config ccache git \
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libgrpc-dev \
  nlohmann-json3-dev libyaml-cpp-dev libseccomp-dev libcap-dev libnl-3-dev libnl-route-3-dev \
  libssl-dev libfmt-dev libcli11-dev libgtest-dev libgmock-dev googletest libcpp-httplib-dev libnftables-dev \
  clang libclang-rt-14-dev llvm \
  qemu-system-x86 qemu-utils containerd runc containernetworking-plugins erofs-utils \
  busybox-static iptables cpio gzip zstd kmod iproute2 procps psmisc \
  python3 python3-grpcio python3-protobuf gnuplot-nox lld

.PHONY: all build deps configure test test-unit test-integration test-sanitize test-fuzz check-build \
  test-integration-beside-check-build soak bench install clean

all: build

# Ninja (make deps installs it) schedules the two cores better than the
# Makefile generator's recursive makes, and its .ninja_log shows where a
# build's time went.
GENERATOR ?= $(if $(shell command -v ninja),Ninja,Unix Makefiles)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -G "$(GENERATOR)" $(CMAKE_FLAGS)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root (apt-get)"; exit 1; fi
	DEBIAN_FRONTEND=noninteractive apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(DEPS_PKGS)
	deploy/fetch-guest-kernel.sh

test: test-unit test-integration-beside-check-build test-sanitize test-fuzz

# Each test stage prints how long it took, so a slow CI run shows where.
timed = s=$$(date +%s); $(1); rc=$$?; echo "make: $@ took $$(( $$(date +%s) - s )) s (exit $$rc)"; exit $$rc

# Unit tests never rerun: a flake there is a bug to fix. An integration test
# (real QEMU guests on a 2-core host) that fails runs once more; ctest prints
# both attempts, so a flake stays visible in the log.
CTEST_RETRY ?= --repeat until-pass:2

# After each stage: every skipped case with its reason; one not listed in
# tests/skips.allow fails the stage (and so does a report that is missing,
# or a case ctest counted as skipped whose output shows a failure). Each
# unit case is its own ctest entry (tests/README.md).
check_results = python3 tests/check_results.py $(1)/test-results/$(2) tests/skips.allow $(1)/Testing/Temporary/LastTest.log

test-unit: build
	@$(call timed,rm -rf $(BUILD)/test-results/unit && cd $(BUILD) && ctest -L unit --output-on-failure -j $(JOBS))
	@$(call check_results,$(BUILD),unit)

test-integration: build
	@$(call timed,rm -rf $(BUILD)/test-results/integration && cd $(BUILD) && \
	  ctest -L integration --output-on-failure $(CTEST_RETRY))
	@$(call check_results,$(BUILD),integration)

# The check tree: one clang build with ASan+UBSan everywhere and libFuzzer
# targets, shared by the two stages below.
$(BUILD_CHECK)/CMakeCache.txt:
	CC=clang CXX=clang++ cmake -S . -B $(BUILD_CHECK) -G "$(GENERATOR)" -DCAPSULE_SANITIZE=ON -DCAPSULE_FUZZ=ON $(CMAKE_FLAGS)

# What the sanitizer and fuzz stages run, built once for both.
check-build: $(BUILD_CHECK)/CMakeCache.txt
	@$(call timed,cmake --build $(BUILD_CHECK) -j $(JOBS) --target capsule_unit_tests capsule_fuzzers)

# `make test` builds the check tree beside the integration tests instead of
# after them: those spend most of their time waiting on guests, containerd
# and timers (a third to a half of the two cores busy), so the compilers
# fill cores that would idle. The build runs in an idle cpu cgroup
# (tests/run_idle.sh says why nice is not enough), so a guest that wants a
# core gets it at once; its output goes to a log, shown when it fails. A
# failed integration stage stops the build (nothing would use it).
CHECK_BUILD_LOG = $(BUILD)/check-build.log
test-integration-beside-check-build: build
	@s=$$(date +%s); setsid tests/run_idle.sh $(MAKE) --no-print-directory check-build > $(CHECK_BUILD_LOG) 2>&1 & pid=$$!; \
	  trap 'kill -- -'$$pid' 2>/dev/null; exit 130' INT TERM; \
	  $(MAKE) --no-print-directory test-integration; rc=$$?; \
	  if [ $$rc != 0 ]; then kill -- -$$pid 2>/dev/null; fi; \
	  wait $$pid; brc=$$?; \
	  echo "make: check tree built beside the integration tests (exit $$brc), both done after $$(( $$(date +%s) - s )) s:"; \
	  tail -n 1 $(CHECK_BUILD_LOG); \
	  if [ $$rc = 0 ] && [ $$brc != 0 ]; then cat $(CHECK_BUILD_LOG); fi; \
	  [ $$rc = 0 ] && [ $$brc = 0 ]

# Unit tests again under AddressSanitizer + UBSan.
test-sanitize: $(BUILD_CHECK)/CMakeCache.txt
	@$(call timed,cmake --build $(BUILD_CHECK) -j $(JOBS) --target capsule_unit_tests && \
	  rm -rf $(BUILD_CHECK)/test-results/unit && cd $(BUILD_CHECK) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest -L unit --no-tests=error --output-on-failure -j $(JOBS))
	@$(call check_results,$(BUILD_CHECK),unit)

# libFuzzer targets, each run FUZZ_SECONDS on its seeds; a crash fails.
# Each fuzzer is one single-threaded process with its own corpus and
# artifacts folder, so JOBS of them run at once: every one still fuzzes for
# FUZZ_SECONDS, and the stage takes 1/JOBS of the wall time.
test-fuzz: $(BUILD_CHECK)/CMakeCache.txt
	@$(call timed,cmake --build $(BUILD_CHECK) -j $(JOBS) --target capsule_fuzzers && cd $(BUILD_CHECK) && \
	  FUZZ_SECONDS=$(FUZZ_SECONDS) ctest -L fuzz --no-tests=error --output-on-failure -j $(JOBS))

# The soak at full length: CRI pod rounds for SOAK_SECONDS (the same test
# runs for 2 minutes in test-integration), fds, RSS, mounts and links flat.
SOAK_SECONDS ?= 600
soak: build
	@$(call timed,cd $(BUILD) && CAPSULE_SOAK_SECONDS=$(SOAK_SECONDS) ctest -R '^shim_soak_test[.]' --no-tests=error --output-on-failure -V)

bench: build
	cmake --build $(BUILD) -j $(JOBS) --target capsule_benches
	cd $(BUILD) && ctest -L bench --output-on-failure -V

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_CHECK)
