// A NumPy array or CPU torch tensor argument seen as pointer + dtype + shape + strides, without copying it.
// torch tensors are read through their Python attributes (data_ptr(), stride(), dtype), not through NumPy, so
// bfloat16 works on torch 1.13 and nothing links against libtorch.
#pragma once

#include <pybind11/pybind11.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "posenc/core/dtype.h"

namespace posenc::python {

namespace py = pybind11;

/// Dimensions an argument may have (more is a ValueError naming it).
inline constexpr size_t kMaxDims = 16;

/// A short list of sizes, strides or axis numbers, stored inline: a decode step reads six arguments, and heap
/// allocations would be a visible share of its few microseconds.
class Dims {
 public:
  Dims() = default;
  Dims(size_t n, int64_t value) { assign(n, value); }
  void assign(size_t n, int64_t value) {
    n_ = 0;
    for (size_t i = 0; i < n; ++i) push_back(value);
  }
  void push_back(int64_t v) {
    if (n_ == kMaxDims) throw py::value_error("more than " + std::to_string(kMaxDims) + " dimensions");
    d_[n_++] = v;
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t& operator[](size_t i) { return d_[i]; }
  int64_t operator[](size_t i) const { return d_[i]; }
  int64_t back() const { return d_[n_ - 1]; }
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + n_; }
  friend bool operator==(const Dims& a, const Dims& b) {
    return a.n_ == b.n_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  std::array<int64_t, kMaxDims> d_{};
  size_t n_ = 0;
};

/// Element types an argument may have; the rotation itself takes kF32, kBF16 and kF16.
enum class Elem { kF32, kBF16, kF16, kF64, kI64, kI32, kOther };

/// One array argument. Strides are in elements (any sign); data is the address of element [0, ..., 0].
struct TensorArg {
  const char* name = "";    // the Python argument's name, for error messages
  py::handle object;        // the Python object (borrowed; the caller keeps it alive)
  bool is_torch = false;
  void* data = nullptr;
  Elem elem = Elem::kOther;
  std::string dtype_name;   // as the user's library spells it ("torch.bfloat16", "float64", ...)
  Dims shape;
  Dims strides;
  bool writable = true;

  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  /// "(2, 32, 7, 128)".
  std::string ShapeString() const;
};

/// Reads a NumPy array or a torch tensor. Errors (Python exceptions naming `name`): TypeError if `object` is
/// neither, a torch tensor not on the CPU or not strided (sparse, mkldnn), or a NumPy array whose strides are
/// not whole elements; nothing is copied or converted.
TensorArg ReadTensor(py::handle object, const char* name);

/// Whether `object` is a torch.Tensor (false when torch has not been imported).
bool IsTorchTensor(py::handle object);

/// The rotation's storage type of a float32/bfloat16/float16 argument. Errors: TypeError naming the argument
/// and its dtype for any other element type.
DType RotationDType(const TensorArg& t);

/// Raises ValueError unless `t` may be written in place: a writeable NumPy array, or a torch tensor that is
/// not an autograd input (requires_grad with grad mode on) and not an inference tensor outside inference mode.
void CheckWritableInPlace(const TensorArg& t);

/// Whether autograd would record an op on these arguments: grad mode is on and one of them requires grad.
bool NeedsAutograd(std::initializer_list<const TensorArg*> tensors);

/// After an in-place write to a torch tensor: bumps its version counter (as torch's own in-place ops do), so
/// autograd refuses to use a stale saved copy of it. No-op for NumPy arrays and inference tensors.
void MarkModifiedInPlace(const TensorArg& t);

/// Outputs at least this large get the huge-page advice (see AdviseHugePages).
inline constexpr int64_t kMinHugePageAdviceBytes = int64_t{4} << 20;

/// Asks Linux for transparent huge pages on the 2 MiB-aligned part of [data, data + bytes), a fresh output not yet
/// written, when bytes >= kMinHugePageAdviceBytes: the first write of a multi-MiB output otherwise takes one page
/// fault per 4 KiB, which costs more than the rotation (on the benchmark VM, 300+ ms of faults per 64 MiB against
/// 20 ms to copy it). Advice only (madvise MADV_HUGEPAGE, errors ignored; a no-op where THP is off): the values
/// written are the same either way.
void AdviseHugePages(void* data, int64_t bytes);

/// torch.empty_like(like) for a torch tensor argument, with its TensorArg (shape, dtype, device and layout are
/// like's by construction; strides and data pointer read), huge pages advised (AdviseHugePages).
/// Errors: TypeError if `like` is not a torch tensor.
std::pair<py::object, TensorArg> EmptyLike(const TensorArg& like, const char* name);

}  // namespace posenc::python
