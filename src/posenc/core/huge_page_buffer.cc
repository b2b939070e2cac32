#include "posenc/core/huge_page_buffer.h"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace posenc {

HugePageBuffer::HugePageBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  if (bytes > SIZE_MAX - 2 * kAlignment) throw std::bad_alloc();
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  mapped_ = rounded + kAlignment;
  void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  base_ = p;
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  data_ = reinterpret_cast<uint8_t*>((at + kAlignment - 1) / kAlignment * kAlignment);
  ::madvise(data_, rounded, MADV_HUGEPAGE);  // advice only: the bytes are the same without huge pages
}

HugePageBuffer::~HugePageBuffer() { Release(); }

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      mapped_(std::exchange(other.mapped_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    base_ = std::exchange(other.base_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void HugePageBuffer::Release() noexcept {
  if (base_ != nullptr) ::munmap(base_, mapped_);
  base_ = nullptr;
  data_ = nullptr;
  mapped_ = size_ = 0;
}

}  // namespace posenc
