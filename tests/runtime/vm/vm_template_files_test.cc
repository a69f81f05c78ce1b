// The files a template is made of, without a VM: a clone's RAM copy holds
// the image's data extents and keeps its holes as holes; an image of the
// wrong size, a symlink or a non-file is refused by name; template.json
// round-trips and a bad one names the field.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vm/ram_image.h"
#include "runtime/vm/vm_template.h"
#include "tests/support/status_matchers.h"

namespace capsule::vm {
namespace {

constexpr uint64_t kSize = 8ull << 20;

// A sparse image: 64 KiB of data at 0 and at 5 MiB, holes elsewhere.
std::string SparseImage(const TempDir& dir) {
  const std::string path = dir.Join("ram");
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  EXPECT_TRUE(fd);
  EXPECT_EQ(::ftruncate(fd.get(), kSize), 0);
  std::string a(64 << 10, 'a'), b(64 << 10, 'b');
  EXPECT_EQ(::pwrite(fd.get(), a.data(), a.size(), 0), static_cast<ssize_t>(a.size()));
  EXPECT_EQ(::pwrite(fd.get(), b.data(), b.size(), 5 << 20), static_cast<ssize_t>(b.size()));
  return path;
}

TEST(RamImageTest, ACopyHoldsTheDataAndKeepsTheHoles) {
  auto dir = TempDir::Create("ram-image");
  ASSERT_OK(dir);
  const std::string image = SparseImage(*dir);
  auto copy = CopyRamImage(image, kSize, "test-ram");
  ASSERT_OK(copy);
  struct stat st{};
  ASSERT_EQ(::fstat(copy->memfd.get(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), kSize);
  EXPECT_LT(copy->copied, kSize) << "holes are not copied";
  EXPECT_GE(copy->copied, 128ull << 10);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, 2ull << 20) << "the memfd stays sparse";
  void* p = ::mmap(nullptr, kSize, PROT_READ, MAP_SHARED, copy->memfd.get(), 0);
  ASSERT_NE(p, MAP_FAILED);
  const char* m = static_cast<const char*>(p);
  EXPECT_EQ(m[0], 'a');
  EXPECT_EQ(m[(64 << 10) - 1], 'a');
  EXPECT_EQ(m[5 << 20], 'b');
  EXPECT_EQ(m[(5 << 20) + (64 << 10) - 1], 'b');
  EXPECT_EQ(m[3 << 20], '\0');
  EXPECT_EQ(m[kSize - 1], '\0');
  ::munmap(p, kSize);
  EXPECT_NE(::fcntl(copy->memfd.get(), F_GETFD) & FD_CLOEXEC, 0);
}

TEST(RamImageTest, AWrongSizeASymlinkOrADirectoryIsRefusedByName) {
  auto dir = TempDir::Create("ram-image");
  ASSERT_OK(dir);
  const std::string image = SparseImage(*dir);
  auto small = CopyRamImage(image, kSize * 2, "x");
  EXPECT_EQ(small.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(small.status().message().find(image), std::string::npos) << small.status().ToString();
  const std::string link = dir->Join("link");
  ASSERT_EQ(::symlink(image.c_str(), link.c_str()), 0);
  auto linked = CopyRamImage(link, kSize, "x");
  EXPECT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find(link), std::string::npos) << linked.status().ToString();
  auto directory = CopyRamImage(dir->path(), kSize, "x");
  EXPECT_FALSE(directory.ok());
}

// What a dense clone's VMM gets: QEMU 7.2 reopens the memfd read-write
// through /proc/self/fd and maps it private; nothing it can do through that
// fd changes the template's pages.
TEST(RamImageTest, ASealedImageMapsPrivateAndRefusesEveryWrite) {
  auto dir = TempDir::Create("ram-image");
  ASSERT_OK(dir);
  const std::string image = SparseImage(*dir);
  auto sealed = SealedRamImage(image, kSize, "test-sealed");
  ASSERT_OK(sealed);
  EXPECT_TRUE(IsWriteSealed(sealed->memfd.get()));
  auto own = CopyRamImage(image, kSize, "test-own");
  ASSERT_OK(own);
  EXPECT_FALSE(IsWriteSealed(own->memfd.get()));

  UniqueFd rw(::open(fmt::format("/proc/self/fd/{}", sealed->memfd.get()).c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(rw) << "QEMU opens its mem-path read-write: " << std::strerror(errno);
  EXPECT_EQ(::pwrite(rw.get(), "z", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, rw.get(), 0), MAP_FAILED);
  EXPECT_NE(::fallocate(rw.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
  EXPECT_NE(::ftruncate(rw.get(), 0), 0);
  EXPECT_EQ(::fcntl(rw.get(), F_ADD_SEALS, F_SEAL_GROW), -1) << "the seals are sealed";

  void* p = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE, rw.get(), 0);
  ASSERT_NE(p, MAP_FAILED) << std::strerror(errno);
  char* m = static_cast<char*>(p);
  EXPECT_EQ(m[0], 'a');
  m[0] = 'z';  // the clone's own page now
  m[3 << 20] = 'z';
  EXPECT_EQ(m[0], 'z');
  ::munmap(p, kSize);
  char back[2] = {};
  ASSERT_EQ(::pread(sealed->memfd.get(), back, 1, 0), 1);
  ASSERT_EQ(::pread(sealed->memfd.get(), back + 1, 1, 3 << 20), 1);
  EXPECT_EQ(back[0], 'a') << "a private write never reaches the template";
  EXPECT_EQ(back[1], '\0');
}

TEST(RamImageTest, ZeroPagesBecomeHolesAndTheDataStays) {
  auto dir = TempDir::Create("ram-image");
  ASSERT_OK(dir);
  const std::string path = dir->Join("ram");
  // data | 1 MiB of written zeroes | data, all allocated.
  std::string image(4 << 20, '\0');
  std::fill(image.begin(), image.begin() + (1 << 20), 'x');
  std::fill(image.begin() + (2 << 20), image.end(), 'y');
  ASSERT_OK(WriteFile(path, image));
  struct stat before{};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  auto punched = PunchZeroPages(path);
  ASSERT_OK(punched);
  EXPECT_EQ(*punched, 1ull << 20);
  struct stat after{};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(after.st_size, before.st_size);
  EXPECT_LE(after.st_blocks * 512, before.st_blocks * 512 - (1 << 20));
  auto back = ReadFile(path);
  ASSERT_OK(back);
  EXPECT_EQ(*back, image) << "punching keeps what the file reads";
  auto copy = CopyRamImage(path, image.size(), "punched");
  ASSERT_OK(copy);
  EXPECT_EQ(copy->copied, 3ull << 20);
}

VmTemplate SampleTemplate() {
  VmTemplate t;
  t.key = "0123456789abcdef";
  t.vcpus = 2;
  t.memory_mib = 512;
  t.hotplug_slots = kTemplateHotplugSlots;
  t.boot_nic_mac = "02:11:22:33:44:55";
  t.created_unix_ms = 1764000000000;
  t.build_ms = 4321.5;
  t.vmm_version = "7.2.22";
  t.ram_allocated_bytes = 123 << 20;
  t.state_bytes = 288552;
  return t;
}

TEST(TemplateRecordTest, RoundTripsEveryField) {
  VmTemplate t = SampleTemplate();
  auto back = TemplateFromJson(TemplateToJson(t), "template.json");
  ASSERT_OK(back);
  EXPECT_EQ(back->key, t.key);
  EXPECT_EQ(back->vcpus, t.vcpus);
  EXPECT_EQ(back->memory_mib, t.memory_mib);
  EXPECT_EQ(back->hotplug_slots, t.hotplug_slots);
  EXPECT_EQ(back->boot_nic_mac, t.boot_nic_mac);
  EXPECT_EQ(back->created_unix_ms, t.created_unix_ms);
  EXPECT_DOUBLE_EQ(back->build_ms, t.build_ms);
  EXPECT_EQ(back->vmm_version, t.vmm_version);
  EXPECT_EQ(back->ram_allocated_bytes, t.ram_allocated_bytes);
  EXPECT_EQ(back->state_bytes, t.state_bytes);
}

TEST(TemplateRecordTest, ABadRecordNamesTheFileAndTheField) {
  struct Case {
    std::string text, want;
  };
  const std::vector<Case> cases = {
      {"[]", "(root): must be an object"},
      {"{", "invalid JSON"},
      {R"({"version": 2})", "format 2 is not supported"},
      {R"({"version": 1, "key": "../x"})", "key: must be a lowercase hex key"},
      {R"({"version": 1, "key": "ab", "vcpus": 0})", "vcpus: must be between 1 and 255, got 0"},
      {R"({"version": 1, "key": "ab", "vcpus": "1"})", "vcpus: must be an integer"},
      {R"({"version": 1, "key": "ab", "vcpus": 1, "memory_mib": 256, "hotplug_slots": 99})", "hotplug_slots: must be between 1 and 32, got 99"},
  };
  for (const Case& c : cases) {
    auto t = TemplateFromJson(c.text, "/x/template.json");
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_NE(t.status().message().find("/x/template.json"), std::string::npos) << t.status().ToString();
    EXPECT_NE(t.status().message().find(c.want), std::string::npos) << t.status().ToString();
  }
}

TEST(TemplateRecordTest, LoadRefusesARamImageOfTheWrongSize) {
  auto dir = TempDir::Create("tpl");
  ASSERT_OK(dir);
  VmTemplate t = SampleTemplate();
  t.memory_mib = 16;
  ASSERT_OK(WriteFile(dir->Join("template.json"), TemplateToJson(t)));
  ASSERT_OK(WriteFile(dir->Join("ram"), std::string(4096, 'r')));
  ASSERT_OK(WriteFile(dir->Join("state"), "QEVM"));
  auto loaded = LoadTemplate(dir->path());
  EXPECT_EQ(loaded.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(loaded.status().message().find("16 MiB RAM image"), std::string::npos) << loaded.status().ToString();
}

}  // namespace
}  // namespace capsule::vm
