// HugePageBuffer (the storage of weights packed for the int8 and bf16 kernels): zero-filled, aligned to 2 MiB,
// writable over its whole size, moved without copying, released once; a size no mapping can hold is
// std::bad_alloc.
#include "posenc/core/huge_page_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <utility>

namespace posenc {
namespace {

TEST(HugePageBuffer, ZeroFilledAlignedAndWritable) {
  const size_t bytes = (size_t{5} << 20) + 123;  // not a whole number of huge pages
  HugePageBuffer b(bytes);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % HugePageBuffer::kAlignment, 0u);
  size_t nonzero = 0;
  for (size_t i = 0; i < bytes; i += 4093) nonzero += b.data()[i] != 0;
  EXPECT_EQ(b.data()[bytes - 1], 0);
  EXPECT_EQ(nonzero, 0u);
  b.data()[0] = 1;
  b.data()[bytes - 1] = 2;
  HugePageBuffer moved(std::move(b));
  EXPECT_EQ(b.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(b.size(), 0u);       // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(moved.data()[0], 1);
  EXPECT_EQ(moved.data()[bytes - 1], 2);
  HugePageBuffer other(100);
  other = std::move(moved);
  EXPECT_EQ(other.size(), bytes);
  EXPECT_EQ(other.data()[bytes - 1], 2);
}

TEST(HugePageBuffer, EmptyAndImpossibleSizes) {
  const HugePageBuffer none(0);
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.size(), 0u);
  EXPECT_THROW(HugePageBuffer(SIZE_MAX - 1), std::bad_alloc);
  EXPECT_THROW(HugePageBuffer(size_t{1} << 62), std::bad_alloc);  // 4 EiB: more address space than x86-64 has
}

}  // namespace
}  // namespace posenc
