// Large, long-lived arrays (weights packed at load) in memory of their own, so that first touching them costs a
// page fault per 2 MiB instead of per 4 KiB. Internal to the library (not installed).
#pragma once

#include <cstddef>
#include <cstdint>

namespace posenc {

/// `bytes` zero-filled bytes in an anonymous private mapping of their own, the start aligned to 2 MiB, offered to
/// transparent huge pages (madvise MADV_HUGEPAGE: advice, so without huge pages only the page-fault count
/// differs). Zero bytes: no mapping, data() null. Move-only; the mapping is released with the object.
/// Errors: std::bad_alloc if the mapping cannot be made (address space, ulimit -v).
class HugePageBuffer {
 public:
  static constexpr size_t kAlignment = size_t{2} << 20;

  HugePageBuffer() = default;
  explicit HugePageBuffer(size_t bytes);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void Release() noexcept;
  void* base_ = nullptr;  // the mapping: kAlignment more than size_ rounded up, for the alignment
  size_t mapped_ = 0;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace posenc
