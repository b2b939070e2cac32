// Fingerprints: independent of how the bytes are split across calls, sensitive to every byte and to the length;
// FNV-1a's published test vector for the byte-wise fold; the all-ranks check names the ranks that differ.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/dist/fingerprint.h"
#include "posenc/dist/in_process.h"

namespace posenc {
namespace {

std::vector<std::byte> Bytes(size_t n, uint32_t seed) {
  std::vector<std::byte> b(n);
  uint32_t x = seed;
  for (auto& c : b) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<std::byte>(x >> 24);
  }
  return b;
}

TEST(FingerprintTest, SplitIndependentAndSensitive) {
  const std::vector<std::byte> data = Bytes(1000, 7);
  const uint64_t whole = Fingerprint().Add(data).value();
  for (size_t cut : {size_t{0}, size_t{1}, size_t{31}, size_t{32}, size_t{33}, size_t{500}, size_t{999}}) {
    Fingerprint f;
    f.Add(std::span<const std::byte>(data).first(cut));
    f.Add(std::span<const std::byte>(data).subspan(cut));
    EXPECT_EQ(f.value(), whole) << "cut " << cut;
  }
  for (size_t i : {size_t{0}, size_t{17}, size_t{999}}) {
    std::vector<std::byte> changed = data;
    changed[i] ^= std::byte{1};
    EXPECT_NE(Fingerprint().Add(changed).value(), whole) << "byte " << i;
  }
  // Trailing zero bytes change the length, hence the value.
  std::vector<std::byte> longer = data;
  longer.push_back(std::byte{0});
  EXPECT_NE(Fingerprint().Add(longer).value(), whole);
  EXPECT_NE(Fingerprint().Add("ab").Add("c").value(), Fingerprint().Add("a").Add("bc").value());
}

TEST(FingerprintTest, EmptyInputFoldsLanesAndLengthWithFnv1a) {
  // No bytes: the four lanes stay at the FNV-1a offset basis; the value is FNV-1a (64-bit) of the 32 lane bytes
  // and 8 length bytes, computed here from the published constants.
  uint64_t h = 14695981039346656037ull;
  auto fold = [&](uint64_t word) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((word >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  for (int lane = 0; lane < 4; ++lane) fold(14695981039346656037ull);
  fold(0);
  EXPECT_EQ(Fingerprint().value(), h);
}

TEST(FingerprintTest, FileMatchesItsBytes) {
  const std::string path = ::testing::TempDir() + "/posenc_fingerprint_test.bin";
  const std::vector<std::byte> data = Bytes((1 << 20) + 77, 3);  // more than one read piece
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  }
  EXPECT_EQ(FingerprintFile(path), Fingerprint().Add(static_cast<int64_t>(data.size())).Add(data).value());
  std::remove(path.c_str());
  EXPECT_THROW(FingerprintFile(path), IoError);
  EXPECT_THROW(FingerprintFile(::testing::TempDir()), IoError);  // a directory
}

TEST(FingerprintTest, EveryRankReportsTheRanksThatDiffer) {
  std::vector<std::string> messages(3);
  try {
    RunInProcess(3, [&](Communicator& comm) {
      const uint64_t f = comm.rank() == 2 ? 0xbad : 0x600d;
      try {
        CheckSameOnAllRanks(comm, f, "options and model file");
      } catch (const DistError& e) {
        messages[comm.rank()] = e.what();
        throw;
      }
    });
    FAIL() << "no exception";
  } catch (const DistError&) {
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(messages[r].find("ranks disagree on options and model file: 0x000000000000600d on ranks 0, 1; "
                               "0x0000000000000bad on rank 2"),
              std::string::npos)
        << messages[r];
  }
  RunInProcess(3, [](Communicator& comm) { CheckSameOnAllRanks(comm, 42, "options"); });
}

}  // namespace
}  // namespace posenc
