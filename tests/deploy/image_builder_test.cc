// Pieces of the image builder that need no kernel: ldd output parsing and
// the "run make deps" error when the kernel is missing.
#include "deploy/mkinitrd/image_builder.h"

#include <gtest/gtest.h>

#include "deploy/mkinitrd/compress.h"
#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::deploy {
namespace {

constexpr std::string_view kLdd = R"(	linux-vdso.so.1 (0x00007ffcbf5d2000)
	libgrpc++.so.1.51 => /lib/x86_64-linux-gnu/libgrpc++.so.1.51 (0x00007f0a1c9c1000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0a1b7e0000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f0a1cb7a000)
)";

TEST(Ldd, LibrariesAndLoaderInOrderVdsoSkipped) {
  auto libs = ParseLddOutput(kLdd);
  ASSERT_OK(libs);
  EXPECT_EQ(*libs, (std::vector<std::string>{"/lib/x86_64-linux-gnu/libgrpc++.so.1.51",
                                             "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}));
}

TEST(Ldd, MissingLibraryIsNamed) {
  auto libs = ParseLddOutput("\tlibgone.so.1 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n");
  ASSERT_FALSE(libs.ok());
  EXPECT_EQ(libs.status().code(), Code::kNotFound);
  EXPECT_NE(libs.status().message().find("libgone.so.1"), std::string::npos);
}

TEST(Ldd, StaticBinaryIsAnError) {
  EXPECT_FALSE(ParseLddOutput("\tnot a dynamic executable\n").ok());
}

TEST(FindKernel, MissingKernelSaysRunMakeDeps) {
  auto dir = TempDir::Create("kernel");
  ASSERT_OK(dir);
  auto k = FindKernel(dir->Join("nothing-here"));
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(k.status().message().find("make deps"), std::string::npos);
}

TEST(FindKernel, FindsAnUnpackedTree) {
  auto dir = TempDir::Create("kernel");
  ASSERT_OK(dir);
  ASSERT_OK(MkdirAll(dir->Join("lib/modules/6.1.0-9-amd64")));
  ASSERT_OK(MkdirAll(dir->Join("boot")));
  ASSERT_OK(WriteFile(dir->Join("lib/modules/6.1.0-9-amd64/modules.dep"), ""));
  ASSERT_OK(WriteFile(dir->Join("boot/vmlinuz-6.1.0-9-amd64"), "k"));
  auto k = FindKernel(dir->path());
  ASSERT_OK(k);
  EXPECT_EQ(k->release, "6.1.0-9-amd64");
  EXPECT_EQ(k->vmlinuz, dir->Join("boot/vmlinuz-6.1.0-9-amd64"));
}

TEST(Compression, NamesAndDeterministicZstd) {
  EXPECT_FALSE(ParseCompression("lz4").ok());
  auto dir = TempDir::Create("zst");
  ASSERT_OK(dir);
  std::string data(100000, 'z');
  ASSERT_OK(WriteCompressed(data, Compression::kZstd, 0, dir->Join("a.zst")));
  ASSERT_OK(WriteCompressed(data, Compression::kZstd, 0, dir->Join("b.zst")));
  auto a = ReadFile(dir->Join("a.zst"));
  ASSERT_OK(a);
  EXPECT_EQ(*a, *ReadFile(dir->Join("b.zst")));
  EXPECT_LT(a->size(), data.size() / 10);
  EXPECT_EQ(a->substr(0, 4), std::string("\x28\xb5\x2f\xfd", 4));  // zstd frame magic
  ASSERT_OK(WriteCompressed(data, Compression::kNone, 0, dir->Join("c")));
  EXPECT_EQ(*ReadFile(dir->Join("c")), data);
  EXPECT_FALSE(PathExists(dir->Join("c.cpio.tmp")));
}

}  // namespace
}  // namespace capsule::deploy
