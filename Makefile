# Capsule's front door. Two commands set up and test a fresh Debian 12 host:
#   make deps && make      install packages, build everything
#   make test              unit + integration tests, sanitizer run, fuzzing
SHELL := /bin/bash
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
JOBS ?= 2
FUZZ_SECONDS ?= 30
CMAKE_FLAGS ?=
export CCACHE_BASEDIR := $(CURDIR)

# Debian 12 packages the build, the guest image and the tests need.
DEPS_PKGS := build-essential cmake pkg-config ccache git \
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libgrpc-dev \
  nlohmann-json3-dev libyaml-cpp-dev libseccomp-dev libcap-dev libnl-3-dev libnl-route-3-dev \
  libssl-dev libfmt-dev libcli11-dev libgtest-dev libgmock-dev googletest \
  clang libclang-rt-14-dev llvm \
  qemu-system-x86 qemu-utils containerd runc containernetworking-plugins \
  busybox-static cpio gzip zstd kmod iproute2 procps psmisc \
  python3 python3-grpcio python3-protobuf gnuplot-nox

.PHONY: all build deps configure test test-unit test-integration test-sanitize test-fuzz bench install clean

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root (apt-get)"; exit 1; fi
	DEBIAN_FRONTEND=noninteractive apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(DEPS_PKGS)
	deploy/fetch-guest-kernel.sh

test: test-unit test-integration test-sanitize test-fuzz

# Unit and sanitizer tests never rerun: a flake there is a bug to fix. An
# integration test (real QEMU guests on a 2-core host) that fails runs once
# more; ctest prints both attempts, so a flake stays visible in the log.
CTEST_RETRY ?= --repeat until-pass:2

test-unit: build
	cd $(BUILD) && ctest -L unit --output-on-failure -j $(JOBS)

test-integration: build
	cd $(BUILD) && ctest -L integration --output-on-failure $(CTEST_RETRY)

# Unit tests again under AddressSanitizer + UBSan, in their own build tree.
test-sanitize:
	cmake -S . -B $(BUILD_ASAN) -DCAPSULE_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD_ASAN) -j $(JOBS) --target capsule_unit_tests
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest -L unit --no-tests=error --output-on-failure -j $(JOBS)

# libFuzzer targets, built with clang, each run FUZZ_SECONDS; a crash fails.
test-fuzz:
	CC=clang CXX=clang++ cmake -S . -B $(BUILD_FUZZ) -DCAPSULE_FUZZ=ON -DCAPSULE_BUILD_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target capsule_fuzzers
	cd $(BUILD_FUZZ) && FUZZ_SECONDS=$(FUZZ_SECONDS) ctest -L fuzz --no-tests=error --output-on-failure

bench: build
	cd $(BUILD) && ctest -L bench --output-on-failure -V

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
