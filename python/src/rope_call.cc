#include "rope_call.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/core/strided_rows.h"
#include "posenc/kernels/rope_kernels.h"
#include "posenc/rope/apply.h"

namespace posenc::python {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// Shape, dtype and innermost-stride checks of a tensor that is rotated (or written).
DType CheckRotated(const TensorArg& x) {
  const DType dtype = RotationDType(x);
  if (x.ndim() < 2) {
    throw py::value_error(std::string(x.name) + " must have at least 2 dimensions ([..., n_heads, head_dim]), got "
                          "shape " + x.ShapeString());
  }
  if (x.shape.back() > 1 && x.strides.back() != 1) {
    throw py::value_error(std::string(x.name) + ": the last dimension (head_dim) must be contiguous (stride 1), got "
                          "stride " + Str(x.strides.back()) + "; other dimensions may have any strides");
  }
  return dtype;
}

// The heads axis (where cos/sin are unsqueezed) and the token axes (every other axis but the last) of q and k.
struct Axes {
  int64_t heads = 0;
  Dims tokens;
};

Axes MakeAxes(int64_t ndim, int64_t heads) {
  Axes a;
  a.heads = heads;
  for (int64_t i = 0; i + 1 < ndim; ++i) {
    if (i != heads) a.tokens.push_back(i);
  }
  return a;
}

size_t Index(int64_t i) { return static_cast<size_t>(i); }

// Which token axes one call covers: inner axes are merged into one strided token dimension of the library's
// view (their strides line up in every tensor of the call); outer axes are looped over. Both hold indices into
// Axes::tokens.
struct ViewPlan {
  Dims outer;
  Dims inner;  // row-major
  int64_t n_inner = 1;
};

ViewPlan PlanViews(const Axes& axes, std::initializer_list<const TensorArg*> tensors) {
  const TensorArg& first = **tensors.begin();
  Dims active;  // token axes with more than one index (size-1 axes are free)
  for (size_t i = 0; i < axes.tokens.size(); ++i) {
    if (first.shape[Index(axes.tokens[i])] > 1) active.push_back(static_cast<int64_t>(i));
  }
  ViewPlan p;
  if (active.empty()) return p;
  size_t start = active.size() - 1;
  while (start > 0) {
    const size_t prev = Index(axes.tokens[Index(active[start - 1])]), cur = Index(axes.tokens[Index(active[start])]);
    const bool merge = std::all_of(tensors.begin(), tensors.end(), [&](const TensorArg* t) {
      return t->strides[prev] == t->shape[cur] * t->strides[cur];
    });
    if (!merge) break;
    --start;
  }
  for (size_t i = 0; i < active.size(); ++i) (i < start ? p.outer : p.inner).push_back(active[i]);
  for (int64_t i : p.inner) p.n_inner *= first.shape[Index(axes.tokens[Index(i)])];
  return p;
}

int64_t OuterOffset(const Axes& axes, const ViewPlan& plan, const Dims& idx, const TensorArg& x) {
  int64_t off = 0;
  for (size_t j = 0; j < idx.size(); ++j) off += idx[j] * x.strides[Index(axes.tokens[Index(plan.outer[j])])];
  return off;
}

// Per-thread buffers reused from call to call (a decode step should not allocate).
std::vector<int64_t>& Scratch(int which) {
  thread_local std::vector<int64_t> buffers[3];
  return buffers[which];
}

// Calls f(idx, keys) for every outer multi-index idx of `plan` (idx[j] for plan.outer[j]), keys[t] being the sum
// over token axes of index * mul for inner token t (mul indexed like Axes::tokens): table rows or positions.
template <class F>
void ForEachRun(const Axes& axes, const ViewPlan& plan, const TensorArg& x, const Dims& mul, F&& f) {
  std::vector<int64_t>& inner = Scratch(0);
  inner.assign(Index(plan.n_inner), 0);
  int64_t block = plan.n_inner;
  for (int64_t i : plan.inner) {
    const int64_t ext = x.shape[Index(axes.tokens[Index(i)])];
    block /= ext;  // tokens per step of this axis
    for (int64_t t = 0; t < plan.n_inner; ++t) inner[Index(t)] += ((t / block) % ext) * mul[Index(i)];
  }
  std::vector<int64_t>& keys = Scratch(1);
  keys.resize(inner.size());
  Dims idx(plan.outer.size(), 0);
  while (true) {
    int64_t base = 0;
    for (size_t j = 0; j < idx.size(); ++j) base += idx[j] * mul[Index(plan.outer[j])];
    for (size_t t = 0; t < inner.size(); ++t) keys[t] = base + inner[t];
    f(static_cast<const Dims&>(idx), static_cast<const std::vector<int64_t>&>(keys));
    size_t j = idx.size();
    while (j > 0) {
      --j;
      if (++idx[j] < x.shape[Index(axes.tokens[Index(plan.outer[j])])]) break;
      idx[j] = 0;
      if (j == 0) return;
    }
    if (idx.empty()) return;
  }
}

HeadsView View(const Axes& axes, const ViewPlan& plan, const TensorArg& x, DType dtype, int64_t offset) {
  HeadsView v;
  v.data = static_cast<char*>(x.data) + offset * DTypeSize(dtype);
  v.dtype = dtype;
  v.n_tokens = plan.n_inner;
  v.n_heads = x.shape[static_cast<size_t>(axes.heads)];
  v.head_dim = x.shape.back();
  v.token_stride = plan.inner.empty() ? 0 : x.strides[Index(axes.tokens[Index(plan.inner.back())])];
  v.head_stride = x.strides[static_cast<size_t>(axes.heads)];
  return v;
}

// Runs a library call with the Python argument's name in front of any posenc error it raises.
template <class F>
void Named(const char* name, F&& f) {
  try {
    f();
  } catch (const ShapeError& e) {
    throw ShapeError(std::string(name) + ": " + e.what());
  } catch (const RangeError& e) {
    throw RangeError(std::string(name) + ": " + e.what());
  } catch (const ConfigError& e) {
    throw ConfigError(std::string(name) + ": " + e.what());
  }
}

// q and k of one call: k null, or same ndim and head_dim (n_heads may differ: GQA).
void CheckPair(const TensorArg& q, const TensorArg* k) {
  if (k == nullptr) return;
  if (k->ndim() != q.ndim()) {
    throw py::value_error("k must have as many dimensions as q, got q " + q.ShapeString() + " and k " +
                          k->ShapeString());
  }
  if (k->shape.back() != q.shape.back()) {
    throw py::value_error("k and q must have the same head_dim (last dimension), got q " + q.ShapeString() +
                          " and k " + k->ShapeString());
  }
}

// Two tensors one call writes (q and k in place; outputs, and an output against the other input) must not share
// memory: HF's apply_rotary_pos_emb returns two rotated copies, so q and k sharing rows in place would rotate
// those rows twice. Exact over the whole N-d tensors (views of one buffer that interleave without overlapping,
// q and k of a fused qkv projection, are fine).
void CheckDisjoint(const TensorArg& a, const TensorArg& b) {
  const auto rows = [](const TensorArg& t, Dims& shape, Dims& strides) {
    const int64_t es = DTypeSize(RotationDType(t));
    for (size_t i = 0; i + 1 < t.shape.size(); ++i) {
      shape.push_back(t.shape[i]);
      strides.push_back(t.strides[i] * es);
    }
    return StridedRows{t.data, std::span<const int64_t>(shape.begin(), shape.size()),
                       std::span<const int64_t>(strides.begin(), strides.size()), t.shape.back() * es};
  };
  Dims as, ast, bs, bst;
  if (!RowsShareMemory(rows(a, as, ast), rows(b, bs, bst))) return;
  throw py::value_error(std::string(a.name) + " and " + b.name + " share memory (" + a.name + " " +
                        a.ShapeString() + ", " + b.name + " " + b.ShapeString() + "): the shared rows would be " +
                        "rotated twice; pass separate tensors (HF's apply_rotary_pos_emb returns two rotated copies)");
}

void CheckOutput(const TensorArg& in, const TensorArg& out) {
  if (out.shape != in.shape || out.elem != in.elem) {
    throw py::value_error(std::string(out.name) + " must have the shape and dtype of " + in.name + ", got " +
                          out.ShapeString() + " vs " + in.ShapeString());
  }
}

// Whether k's token axes have the extents of q's (so one rows vector serves both in a fused call).
bool SameTokens(const Axes& axes, const TensorArg& q, const TensorArg& k) {
  return std::all_of(axes.tokens.begin(), axes.tokens.end(), [&](int64_t a) {
    return q.shape[static_cast<size_t>(a)] == k.shape[static_cast<size_t>(a)];
  });
}

// Element `offset` (in elements) of a float32/bfloat16/float16 array, widened exactly to float32.
float LoadFloat(const TensorArg& t, int64_t offset) {
  const char* p = static_cast<const char*>(t.data);
  switch (t.elem) {
    case Elem::kF32: {
      float f;
      std::memcpy(&f, p + offset * 4, 4);
      return f;
    }
    case Elem::kBF16:
    case Elem::kF16: {
      uint16_t b;
      std::memcpy(&b, p + offset * 2, 2);
      return t.elem == Elem::kBF16 ? BF16ToF32(b) : F16ToF32(b);
    }
    default: break;
  }
  return 0.0f;
}

bool SameBits(const TensorArg& t, int64_t a, int64_t b) {
  const int64_t es = t.elem == Elem::kF32 ? 4 : 2;
  const char* p = static_cast<const char*>(t.data);
  return std::memcmp(p + a * es, p + b * es, static_cast<size_t>(es)) == 0;
}

// Whether elements [0, half) of a row equal elements [half, 2 half) bit for bit.
bool HalvesEqual(const TensorArg& t, int64_t off, int64_t stride, int64_t half) {
  const int64_t es = t.elem == Elem::kF32 ? 4 : 2;
  const char* p = static_cast<const char*>(t.data) + off * es;
  if (stride == 1) return std::memcmp(p, p + half * es, static_cast<size_t>(half * es)) == 0;
  for (int64_t i = 0; i < half; ++i) {
    if (!SameBits(t, off + i * stride, off + (i + half) * stride)) return false;
  }
  return true;
}

// dst[i] = element off + i * stride as float32, i < n.
void LoadRow(const TensorArg& t, int64_t off, int64_t stride, int64_t n, float* dst) {
  if (t.elem == Elem::kF32 && stride == 1) {
    std::memcpy(dst, static_cast<const float*>(t.data) + off, static_cast<size_t>(n) * 4);
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = LoadFloat(t, off + i * stride);
}

// How cos/sin (HF format, [..., rotary_dim]) broadcast against x's token axes after cos.unsqueeze(unsqueeze_dim):
// for each token axis, cos's axis, or -1 where cos does not vary along it (absent or of size 1).
struct CosAlignment {
  Dims cos_axis;  // indexed like Axes::tokens
};

// The heads axis HF's broadcasting gives: cos [..] unsqueezed at u (normalised against cos.ndim + 1) and
// right-aligned with q.
int64_t HeadsAxisFromCos(const TensorArg& q, const TensorArg& cos, int64_t unsqueeze_dim) {
  const int64_t m = cos.ndim();
  if (m < 1) {
    throw py::value_error("cos must have at least 1 dimension ([..., rotary_dim]), got shape " + cos.ShapeString());
  }
  if (m + 1 > q.ndim()) {
    throw py::value_error("cos has " + Str(m) + " dimensions; unsqueezed it would have more than q's " +
                          Str(q.ndim()) + " (q " + q.ShapeString() + ", cos " + cos.ShapeString() + ")");
  }
  int64_t u = unsqueeze_dim < 0 ? unsqueeze_dim + m + 1 : unsqueeze_dim;
  if (u < 0 || u >= m) {
    throw py::value_error("unsqueeze_dim must name a dimension before the last of cos.unsqueeze(unsqueeze_dim) "
                          "(in [" + Str(-m - 1) + ", " + Str(m - 1) + "] for cos of shape " + cos.ShapeString() +
                          "), got " + Str(unsqueeze_dim));
  }
  return q.ndim() - (m + 1) + u;
}

CosAlignment AlignCos(const Axes& axes, const TensorArg& x, const TensorArg& cos) {
  const int64_t lead = x.ndim() - (cos.ndim() + 1);  // x axes before cos's first (unsqueezed) axis
  CosAlignment al;
  for (int64_t a : axes.tokens) {
    int64_t c = a - lead;  // axis in the unsqueezed cos
    if (c < 0) {
      al.cos_axis.push_back(-1);
      continue;
    }
    if (a > axes.heads) --c;  // past the inserted axis
    const int64_t ext = cos.shape[static_cast<size_t>(c)];
    const int64_t xe = x.shape[static_cast<size_t>(a)];
    if (ext != 1 && ext != xe) {
      throw py::value_error("cos of shape " + cos.ShapeString() + " does not broadcast to " + x.name + " of shape " +
                            x.ShapeString() + " with unsqueeze at dimension " + Str(axes.heads) + " (dimension " +
                            Str(a) + ": " + Str(ext) + " vs " + Str(xe) + ")");
    }
    al.cos_axis.push_back(ext == 1 ? -1 : c);
  }
  return al;
}

// The float32 table [n_rows, half] of the distinct cos/sin rows (in a per-thread buffer), with each row's key
// multiplier per token axis.
struct Table {
  float* cos = nullptr;  // [n_rows, half]
  float* sin = nullptr;  // [n_rows, half]
  int64_t n_rows = 1, half = 0;
  Dims mul;  // indexed like Axes::tokens; 0 where cos is broadcast
};

// HF's format repeats the first half in both layouts (the layout only says how q's channels pair).
Table BuildTable(const Axes& axes, const TensorArg& ref, const CosAlignment& al, const TensorArg& cos,
                 const TensorArg& sin) {
  Table t;
  const int64_t rotary_dim = cos.shape.back();
  t.half = rotary_dim / 2;
  // cos's varying axes in token-axis order, row-major
  Dims varying;
  for (size_t i = 0; i < axes.tokens.size(); ++i) {
    if (al.cos_axis[i] >= 0) varying.push_back(static_cast<int64_t>(i));
  }
  t.mul.assign(axes.tokens.size(), 0);
  for (size_t v = varying.size(); v > 0; --v) {
    const size_t i = Index(varying[v - 1]);
    t.mul[i] = t.n_rows;
    t.n_rows *= ref.shape[Index(axes.tokens[i])];
  }
  thread_local std::vector<float> storage;
  storage.resize(Index(2 * t.n_rows * t.half));
  t.cos = storage.data();
  t.sin = storage.data() + t.n_rows * t.half;
  const int64_t cs = cos.strides.back(), ss = sin.strides.back();
  for (int64_t r = 0; r < t.n_rows; ++r) {
    int64_t co = 0, so = 0;
    for (int64_t v : varying) {
      const size_t i = Index(v);
      const int64_t ext = ref.shape[Index(axes.tokens[i])];
      const int64_t idx = (r / t.mul[i]) % ext;
      co += idx * cos.strides[Index(al.cos_axis[i])];
      so += idx * sin.strides[Index(al.cos_axis[i])];
    }
    float* crow = t.cos + r * t.half;
    float* srow = t.sin + r * t.half;
    for (const auto& [arr, off, stride, dst] : {std::tuple{&cos, co, cs, crow}, std::tuple{&sin, so, ss, srow}}) {
      if (!HalvesEqual(*arr, off, stride, t.half)) {
        int64_t i = 0;
        while (SameBits(*arr, off + i * stride, off + (i + t.half) * stride)) ++i;
        throw py::value_error(std::string(arr->name) + " must repeat its first half in its second (cat(freqs, "
                              "freqs), as Hugging Face's rotary embeddings return it: one angle per channel "
                              "pair), but channel " + Str(i) + " and channel " + Str(i + t.half) +
                              " differ in row " + Str(r) + " (" + std::to_string(LoadFloat(*arr, off + i * stride)) +
                              " vs " + std::to_string(LoadFloat(*arr, off + (i + t.half) * stride)) + ")");
      }
      LoadRow(*arr, off, stride, t.half, dst);
    }
  }
  return t;
}

void CheckRotaryDim(const TensorArg& q, int64_t rotary_dim, const char* source, const RopeCallOptions& o) {
  if (o.rotary_dim && *o.rotary_dim != rotary_dim) {
    throw py::value_error("rotary_dim = " + Str(*o.rotary_dim) + " disagrees with " + source + " = " +
                          Str(rotary_dim));
  }
  if (rotary_dim < 2 || rotary_dim % 2 != 0) {
    throw py::value_error(std::string(source) + " = " + Str(rotary_dim) + " must be even and >= 2 (rotary_dim)");
  }
  if (rotary_dim > q.shape.back()) {
    throw py::value_error(std::string(source) + " = " + Str(rotary_dim) + " (rotary_dim) must be <= head_dim = " +
                          q.name + ".shape[-1] = " + Str(q.shape.back()));
  }
}

bool Empty(const TensorArg& x) { return x.numel() == 0; }

// One rotated tensor (and its output): its own loop over outer indices; call(x view, y view or null, keys).
template <class Call>
void RunOne(const Axes& axes, const TensorArg& x, const TensorArg* y, const Dims& mul, Call&& call) {
  const ViewPlan plan = y != nullptr ? PlanViews(axes, {&x, y}) : PlanViews(axes, {&x});
  const DType dtype = RotationDType(x);
  ForEachRun(axes, plan, x, mul, [&](const Dims& idx, const std::vector<int64_t>& keys) {
    const HeadsView xv = View(axes, plan, x, dtype, OuterOffset(axes, plan, idx, x));
    if (y != nullptr) {
      const HeadsView yv = View(axes, plan, *y, dtype, OuterOffset(axes, plan, idx, *y));
      call(xv, &yv, keys);
    } else {
      call(xv, nullptr, keys);
    }
  });
}

// dst = src for two arrays of one shape and dtype whose last dimension is contiguous: one copy when both have the
// same dense strides, else row by row.
void CopyRows(const TensorArg& src, const TensorArg& dst) {
  const int64_t es = DTypeSize(RotationDType(src));
  if (src.strides == dst.strides) {
    int64_t expected = 1;  // row-major dense?
    bool dense = true;
    for (size_t i = src.shape.size(); i > 0; --i) {
      if (src.shape[i - 1] != 1 && src.strides[i - 1] != expected) dense = false;
      expected *= src.shape[i - 1];
    }
    if (dense) {
      std::memcpy(dst.data, src.data, Index(src.numel() * es));
      return;
    }
  }
  const size_t row_bytes = Index(src.shape.back() * es);
  const size_t nd = src.shape.size() - 1;
  Dims idx(nd, 0);
  const int64_t rows = src.shape.back() == 0 ? 0 : src.numel() / src.shape.back();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t so = 0, d = 0;
    for (size_t i = 0; i < nd; ++i) so += idx[i] * src.strides[i], d += idx[i] * dst.strides[i];
    std::memcpy(static_cast<char*>(dst.data) + d * es, static_cast<const char*>(src.data) + so * es, row_bytes);
    for (size_t i = nd; i > 0; --i) {
      if (++idx[i - 1] < src.shape[i - 1]) break;
      idx[i - 1] = 0;
    }
  }
}

// Whether a read-only input needs a dense copy before the library's views can take it: it repeats memory
// along a dimension (stride 0 over more than one index: an expanded tensor) or its last dimension is strided.
bool NeedsDenseCopy(const TensorArg& x) {
  if (x.ndim() >= 1 && x.shape.back() > 1 && x.strides.back() != 1) return true;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (x.strides[d] == 0 && x.shape[d] > 1) return true;
  }
  return false;
}

// A dense row-major copy of x in `storage` (for an out-of-place input the library's views cannot take).
TensorArg Densify(const TensorArg& x, std::vector<char>& storage) {
  const int64_t es = DTypeSize(RotationDType(x));
  TensorArg d = x;
  storage.resize(static_cast<size_t>(x.numel() * es));
  d.data = storage.data();
  int64_t stride = 1;
  for (size_t i = x.shape.size(); i > 0; --i) {
    d.strides[i - 1] = stride;
    stride *= x.shape[i - 1];
  }
  Dims idx(x.shape.size(), 0);
  for (int64_t n = 0; n < x.numel(); ++n) {
    int64_t off = 0;
    for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * x.strides[i];
    std::memcpy(storage.data() + n * es, static_cast<const char*>(x.data) + off * es, static_cast<size_t>(es));
    for (size_t i = idx.size(); i > 0; --i) {
      if (++idx[i - 1] < x.shape[i - 1]) break;
      idx[i - 1] = 0;
    }
  }
  return d;
}

}  // namespace

std::vector<int64_t> GatherInts(const TensorArg& t) {
  if (t.elem != Elem::kI64 && t.elem != Elem::kI32) {
    throw py::type_error(std::string(t.name) + " must be int64 or int32, got " +
                         (t.dtype_name.empty() ? std::string("a floating-point array") : t.dtype_name));
  }
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  Dims idx(t.shape.size(), 0);
  for (size_t n = 0; n < out.size(); ++n) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides[d];
    if (t.elem == Elem::kI64) {
      std::memcpy(&out[n], static_cast<const char*>(t.data) + off * 8, 8);
    } else {
      int32_t v;
      std::memcpy(&v, static_cast<const char*>(t.data) + off * 4, 4);
      out[n] = v;
    }
    for (size_t d = idx.size(); d > 0; --d) {
      if (++idx[d - 1] < t.shape[d - 1]) break;
      idx[d - 1] = 0;
    }
  }
  return out;
}

void RotateWithTable(const TensorArg& q_in, const TensorArg* k_in, const TensorArg* q_out, const TensorArg* k_out,
                     const TensorArg& cos, const TensorArg& sin, const RopeCallOptions& options) {
  // Out of place, an input is only read: one the views cannot take is read from a dense copy.
  std::vector<char> q_dense, k_dense;
  const TensorArg q = q_out != nullptr && NeedsDenseCopy(q_in) ? Densify(q_in, q_dense) : q_in;
  std::optional<TensorArg> k_copy;
  if (k_in != nullptr && k_out != nullptr && NeedsDenseCopy(*k_in)) k_copy = Densify(*k_in, k_dense);
  const TensorArg* k = k_copy ? &*k_copy : k_in;
  CheckRotated(q);
  if (k != nullptr) CheckRotated(*k);
  CheckPair(q, k);
  if (q_out != nullptr) CheckOutput(q, *q_out), CheckRotated(*q_out);
  if (k_out != nullptr) CheckOutput(*k, *k_out), CheckRotated(*k_out);
  if (q_out == nullptr && k != nullptr) CheckDisjoint(q, *k);
  if (q_out != nullptr && k_out != nullptr) CheckDisjoint(*q_out, *k_out);
  if (q_out != nullptr && k != nullptr) CheckDisjoint(*q_out, *k);
  if (k_out != nullptr) CheckDisjoint(q, *k_out);
  RotationDType(cos);
  RotationDType(sin);
  if (sin.shape != cos.shape) {
    throw py::value_error("sin must have the shape of cos, got sin " + sin.ShapeString() + " and cos " +
                          cos.ShapeString());
  }
  const int64_t heads = HeadsAxisFromCos(q, cos, options.unsqueeze_dim);
  const Axes axes = MakeAxes(q.ndim(), heads);
  CheckRotaryDim(q, cos.shape.back(), "cos.shape[-1]", options);
  const CosAlignment q_al = AlignCos(axes, q, cos);
  const Table table = BuildTable(axes, q, q_al, cos, sin);
  Dims k_mul;
  if (k != nullptr) {
    const CosAlignment k_al = AlignCos(axes, *k, cos);
    k_mul.assign(axes.tokens.size(), 0);
    // k's rows are cos's rows too: the same multipliers wherever cos varies (where it does, k's extent equals
    // cos's, hence q's).
    for (size_t i = 0; i < axes.tokens.size(); ++i) k_mul[i] = k_al.cos_axis[i] >= 0 ? table.mul[i] : 0;
  }
  const CosSinView view{table.cos, table.sin, table.n_rows, table.half};
  const bool pair = k != nullptr && SameTokens(axes, q, *k) && !Empty(q) && !Empty(*k);
  // Small out-of-place pairs (a decode step) are copied, then rotated in place in one fused call: fewer calls than
  // two blocked out-of-place ones, which pay off only for large tensors (they rotate each block while cached).
  const int64_t bytes =
      q.numel() * DTypeSize(RotationDType(q)) + (k != nullptr ? k->numel() * DTypeSize(RotationDType(*k)) : 0);
  const bool copy_then_fuse = q_out != nullptr && pair && bytes < kernels::kRopeParallelMinBytes;
  if (copy_then_fuse) {
    CopyRows(q, *q_out);
    CopyRows(*k, *k_out);
  }
  if ((q_out == nullptr && pair) || copy_then_fuse) {
    // q and k share rows: one fused call per outer index of their common plan
    const TensorArg& x = copy_then_fuse ? *q_out : q;
    const TensorArg& y = copy_then_fuse ? *k_out : *k;
    const ViewPlan plan = PlanViews(axes, {&x, &y});
    const DType xd = RotationDType(x), yd = RotationDType(y);
    ForEachRun(axes, plan, x, table.mul, [&](const Dims& idx, const std::vector<int64_t>& rows) {
      ApplyRopeQK(View(axes, plan, x, xd, OuterOffset(axes, plan, idx, x)),
                  View(axes, plan, y, yd, OuterOffset(axes, plan, idx, y)), rows, view, options.layout,
                  options.direction);
    });
    return;
  }
  const auto call = [&](const char* name) {
    return [&, name](const HeadsView& x, const HeadsView* y, const std::vector<int64_t>& rows) {
      Named(name, [&] {
        if (y != nullptr) {
          ApplyRope(x, *y, rows, view, options.layout, options.direction);
        } else {
          ApplyRope(x, rows, view, options.layout, options.direction);
        }
      });
    };
  };
  if (!Empty(q)) RunOne(axes, q, q_out, table.mul, call(q.name));
  if (k != nullptr && !Empty(*k)) RunOne(axes, *k, k_out, k_mul, call(k->name));
}

void RotateWithPositions(const TensorArg& q, const TensorArg* k, const TensorArg& position_ids,
                         const RopeFrequencies& freqs, RopePrecision precision, const RopeCallOptions& options) {
  CheckRotated(q);
  if (k != nullptr) CheckRotated(*k);
  CheckPair(q, k);
  if (k != nullptr) CheckDisjoint(q, *k);
  int64_t heads = options.unsqueeze_dim < 0 ? options.unsqueeze_dim + q.ndim() : options.unsqueeze_dim;
  if (heads < 0 || heads >= q.ndim() - 1) {
    throw py::value_error("unsqueeze_dim (the heads dimension of q) must be in [" + Str(-q.ndim()) + ", " +
                          Str(q.ndim() - 2) + "] for q of shape " + q.ShapeString() + ", got " +
                          Str(options.unsqueeze_dim));
  }
  const Axes axes = MakeAxes(q.ndim(), heads);
  CheckRotaryDim(q, freqs.rotary_dim(), "the config's rotary_dim", options);
  const std::vector<int64_t> positions = GatherInts(position_ids);
  // position_ids broadcast against the token axes, right-aligned
  const int64_t p = position_ids.ndim(), n_tok = static_cast<int64_t>(axes.tokens.size());
  if (p > n_tok) {
    throw py::value_error("position_ids of shape " + position_ids.ShapeString() + " has more dimensions than the " +
                          "token dimensions of q " + q.ShapeString() + " (all but the heads dimension " +
                          Str(heads) + " and head_dim)");
  }
  const auto muls = [&](const TensorArg& x) {
    Dims mul(axes.tokens.size(), 0);
    int64_t m = 1;
    for (int64_t j = p - 1; j >= 0; --j) {
      const size_t i = static_cast<size_t>(n_tok - p + j);
      const int64_t ext = position_ids.shape[static_cast<size_t>(j)];
      const int64_t xe = x.shape[static_cast<size_t>(axes.tokens[i])];
      if (ext != 1 && ext != xe) {
        throw py::value_error("position_ids of shape " + position_ids.ShapeString() + " does not broadcast to the " +
                              "token dimensions of " + x.name + " " + x.ShapeString() + " (heads dimension " +
                              Str(heads) + ")");
      }
      if (ext != 1) mul[i] = m;
      m *= ext;
    }
    return mul;
  };
  const Dims q_mul = muls(q);
  const Dims k_mul = k != nullptr ? muls(*k) : Dims();
  const RopeOnTheFly fly = RopeOnTheFly::From(freqs, precision);
  const bool fused = k != nullptr && SameTokens(axes, q, *k) && !Empty(q) && !Empty(*k) && q_mul == k_mul;
  std::vector<int64_t>& pos = Scratch(2);
  const auto gather = [&](const std::vector<int64_t>& keys) {
    pos.resize(keys.size());
    for (size_t t = 0; t < keys.size(); ++t) pos[t] = positions[static_cast<size_t>(keys[t])];
    return std::span<const int64_t>(pos);
  };
  if (fused) {
    const ViewPlan plan = PlanViews(axes, {&q, k});
    const DType qd = RotationDType(q), kd = RotationDType(*k);
    ForEachRun(axes, plan, q, q_mul, [&](const Dims& idx, const std::vector<int64_t>& keys) {
      ApplyRopeQK(View(axes, plan, q, qd, OuterOffset(axes, plan, idx, q)),
                  View(axes, plan, *k, kd, OuterOffset(axes, plan, idx, *k)), gather(keys), fly, options.layout,
                  options.direction);
    });
    return;
  }
  const auto call = [&](const char* name) {
    return [&, name](const HeadsView& x, const HeadsView*, const std::vector<int64_t>& keys) {
      Named(name, [&] { ApplyRope(x, gather(keys), fly, options.layout, options.direction); });
    };
  };
  if (!Empty(q)) RunOne(axes, q, nullptr, q_mul, call(q.name));
  if (k != nullptr && !Empty(*k)) RunOne(axes, *k, nullptr, k_mul, call(k->name));
}

}  // namespace posenc::python
