#include "posenc/blas/bf16_matmul.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "posenc/core/errors.h"
#include "posenc/core/huge_page_buffer.h"
#include "posenc/core/threads.h"

namespace posenc {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

const dnnl::engine& Engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

// Primitives are created for one thread (the calling thread's OpenMP thread count set to 1 meanwhile), so
// oneDNN's blocking, and with it the order of every sum, never depends on how many threads the process has.
template <typename F>
auto CreateSingleThreaded(F&& create) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  try {
    auto result = create();
    omp_set_num_threads(saved);
    return result;
  } catch (...) {
    omp_set_num_threads(saved);
    throw;
  }
}

dnnl::primitive_attr UserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// The matmul of bf16 src [m, k] and packed bf16 weights [k, n] into f32 dst [m, n], src and dst dense (oneDNN
// 2.6 runs a strided destination on its reference kernel only).
dnnl::matmul::primitive_desc MatmulDesc(int64_t m, int64_t n, int64_t k, const dnnl::memory::desc& weights) {
  const dnnl::memory::desc src({m, k}, dt::bf16, tag::ab);
  const dnnl::memory::desc dst({m, n}, dt::f32, tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), UserScratchpad(), Engine());
}

dnnl::memory::desc AnyWeights(int64_t n, int64_t k) { return dnnl::memory::desc({k, n}, dt::bf16, tag::any); }

// The packed layout oneDNN's kernel wants for weights [k, n]: the one it picks for a prefill-sized product (it
// takes the same layout for every m; checked when each shape's primitive is created).
dnnl::memory::desc PackedWeightsDesc(int64_t n, int64_t k) {
  return CreateSingleThreaded([&] { return MatmulDesc(1024, n, k, AnyWeights(n, k)).weights_desc(); });
}

struct CachedMatmul {
  dnnl::matmul primitive;
  dnnl::memory::desc scratchpad;
};
struct CachedReorder {
  dnnl::reorder primitive;
  dnnl::memory::desc scratchpad;
};

// Process-wide caches of created primitives (creating one costs far more than a small product).
std::mutex& CacheMutex() {
  static std::mutex mu;
  return mu;
}

// The packed layout of a block of weights [k, n] and the reorder from row-major float32 W rows [n, k] (format "ba"
// of [k, n]) into it, created once per shape (creating them costs milliseconds, a block's reorder about as much).
struct CachedPacker {
  dnnl::memory::desc packed;
  dnnl::memory::desc plain;
  dnnl::reorder primitive;  // user scratchpad: one primitive runs on several threads at once
  dnnl::memory::desc scratchpad;
};
const CachedPacker& Packer(int64_t n, int64_t k) {
  using Key = std::tuple<int64_t, int64_t>;
  static std::map<Key, std::unique_ptr<CachedPacker>> cache;
  const Key key{n, k};
  std::lock_guard<std::mutex> lock(CacheMutex());
  auto it = cache.find(key);
  if (it == cache.end()) {
    auto entry = CreateSingleThreaded([&] {
      const dnnl::memory::desc packed = PackedWeightsDesc(n, k);
      const dnnl::memory::desc plain({k, n}, dt::f32, tag::ba);
      const dnnl::reorder::primitive_desc pd(Engine(), plain, Engine(), packed, UserScratchpad());
      return std::make_unique<CachedPacker>(CachedPacker{packed, plain, dnnl::reorder(pd), pd.scratchpad_desc()});
    });
    it = cache.emplace(key, std::move(entry)).first;
  }
  return *it->second;
}

// `weights` is the packed layout of [k, n] (in_place false) or the plain row-major W rows (format "ba").
const CachedMatmul& Matmul(int64_t m, int64_t n, int64_t k, const dnnl::memory::desc& weights, bool in_place) {
  using Key = std::tuple<int64_t, int64_t, int64_t, bool>;
  static std::map<Key, std::unique_ptr<CachedMatmul>> cache;
  const Key key{m, n, k, in_place};
  std::lock_guard<std::mutex> lock(CacheMutex());
  auto it = cache.find(key);
  if (it == cache.end()) {
    auto entry = CreateSingleThreaded([&] {
      const auto pd = MatmulDesc(m, n, k, weights);
      return std::make_unique<CachedMatmul>(CachedMatmul{dnnl::matmul(pd), pd.scratchpad_desc()});
    });
    it = cache.emplace(key, std::move(entry)).first;
  }
  return *it->second;
}

// f32 [m, k] with row stride ld -> dense bf16 [m, k], round to nearest even.
const CachedReorder& ToBf16(int64_t m, int64_t k, int64_t ld) {
  using Key = std::tuple<int64_t, int64_t, int64_t>;
  static std::map<Key, std::unique_ptr<CachedReorder>> cache;
  const Key key{m, k, ld};
  std::lock_guard<std::mutex> lock(CacheMutex());
  auto it = cache.find(key);
  if (it == cache.end()) {
    auto entry = CreateSingleThreaded([&] {
      const dnnl::memory::desc from({m, k}, dt::f32, dnnl::memory::dims{ld, 1});
      const dnnl::memory::desc to({m, k}, dt::bf16, tag::ab);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      const dnnl::reorder::primitive_desc pd(Engine(), from, Engine(), to, attr);
      return std::make_unique<CachedReorder>(CachedReorder{dnnl::reorder(pd), pd.scratchpad_desc()});
    });
    it = cache.emplace(key, std::move(entry)).first;
  }
  return *it->second;
}

uint8_t* Scratch(std::vector<uint8_t>& buffer, size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

std::string ConfigText(const dnnl::error& e, std::string_view what) {
  return fmt::format("oneDNN {}: {} (status {})", what, e.what(), static_cast<int>(e.status));
}

std::string IsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "all";
  }
}

}  // namespace

std::string Bf16MatmulImplementation() {
  static const std::string name = [] {
    try {
      return std::string(CreateSingleThreaded(
          [] { return MatmulDesc(1024, 512, 2048, AnyWeights(512, 2048)).impl_info_str(); }));
    } catch (const dnnl::error&) {
      return std::string("none");
    }
  }();
  return name;
}

bool Bf16MatmulAvailable() { return Bf16MatmulImplementation() != "none"; }

bool Bf16MatmulHasUnits() {
  const std::string impl = Bf16MatmulImplementation();
  return impl.find("amx") != std::string::npos || impl.find("bf16") != std::string::npos;
}

bool Bf16MatmulHasAmx() { return Bf16MatmulImplementation().find("amx") != std::string::npos; }

std::string OneDnnDescription() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN {}.{}.{}, {}", v->major, v->minor, v->patch, IsaName(dnnl::get_effective_cpu_isa()));
}

struct Bf16Weights::Block {
  int64_t first_row = 0;  // output rows [first_row, first_row + n_rows)
  int64_t n_rows = 0;
  dnnl::memory::desc desc;     // the weights [cols, n_rows] as the matmul reads them: packed, or plain "ba"
  const void* data = nullptr;  // their bytes: in packed_, or the caller's W rows in place
};

void Bf16Weights::LayOutBlocks(int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0) throw ShapeError(fmt::format("Bf16Weights: rows and cols must be >= 0, got {} {}", rows, cols));
  if (!Bf16MatmulAvailable()) {
    throw ConfigError(fmt::format("bf16 compute needs oneDNN's bf16 matmul, which this CPU lacks ({}; it needs "
                                  "AVX-512)", OneDnnDescription()));
  }
  if (rows == 0 || cols == 0) return;
  n_blocks_ = (rows + kColumnBlock - 1) / kColumnBlock;
  blocks_ = std::make_unique<Block[]>(static_cast<size_t>(n_blocks_));
  for (int64_t b = 0; b < n_blocks_; ++b) {
    Block& blk = blocks_[static_cast<size_t>(b)];
    blk.first_row = b * kColumnBlock;
    blk.n_rows = std::min(kColumnBlock, rows - blk.first_row);
  }
}

Bf16Weights::Bf16Weights(int64_t rows, int64_t cols, const std::function<void(int64_t, float*)>& row)
    : rows_(rows), cols_(cols) {
  LayOutBlocks(rows, cols);
  std::vector<size_t> offsets(static_cast<size_t>(n_blocks_));
  size_t total = 0;
  try {
    for (int64_t b = 0; b < n_blocks_; ++b) {
      Block& blk = blocks_[static_cast<size_t>(b)];
      blk.desc = Packer(blk.n_rows, cols_).packed;
      offsets[static_cast<size_t>(b)] = total;
      total += (blk.desc.get_size() + 63) / 64 * 64;
    }
  } catch (const dnnl::error& e) {
    throw ConfigError(ConfigText(e, "packing bf16 weights"));
  }
  packed_ = HugePageBuffer(total);  // zero-filled: padding oneDNN leaves is zero
  // Blocks are packed in parallel (each by one thread, single-threaded oneDNN reorders): the bytes do not
  // depend on the thread count.
  std::exception_ptr error;
  std::mutex mu;
#pragma omp parallel if (!omp_in_parallel())
  {
    std::vector<float> plain;  // this thread's float32 W rows of a block
    std::vector<uint8_t> scratch;
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < n_blocks_; ++b) {
      try {
        Block& blk = blocks_[static_cast<size_t>(b)];
        blk.data = packed_.data() + offsets[static_cast<size_t>(b)];
        plain.resize(static_cast<size_t>(blk.n_rows * cols_));
        for (int64_t r = 0; r < blk.n_rows; ++r) row(blk.first_row + r, plain.data() + r * cols_);
        const CachedPacker& packer = Packer(blk.n_rows, cols_);
        dnnl::memory src(packer.plain, Engine(), plain.data());
        dnnl::memory dst(packer.packed, Engine(), const_cast<void*>(blk.data));
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
        if (packer.scratchpad.get_size() > 0) {
          if (scratch.size() < packer.scratchpad.get_size()) scratch.resize(packer.scratchpad.get_size());
          args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(packer.scratchpad, Engine(), scratch.data()));
        }
        packer.primitive.execute(ThreadStream(), args);
        ThreadStream().wait();
      } catch (const dnnl::error& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::make_exception_ptr(ConfigError(ConfigText(e, "packing bf16 weights")));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

Bf16Weights::Bf16Weights(int64_t rows, int64_t cols, const void* bf16) : rows_(rows), cols_(cols), in_place_(true) {
  LayOutBlocks(rows, cols);
  if (n_blocks_ > 0 && bf16 == nullptr) {
    throw ShapeError(fmt::format("Bf16Weights: null bfloat16 data for [{}, {}]", rows, cols));
  }
  for (int64_t b = 0; b < n_blocks_; ++b) {
    Block& blk = blocks_[static_cast<size_t>(b)];
    // W rows [n_rows, cols] are the weights [cols, n_rows] in format "ba".
    blk.desc = dnnl::memory::desc({cols_, blk.n_rows}, dt::bf16, tag::ba);
    blk.data = static_cast<const uint8_t*>(bf16) + 2 * blk.first_row * cols_;
  }
}

Bf16Weights::~Bf16Weights() = default;
Bf16Weights::Bf16Weights(Bf16Weights&&) noexcept = default;
Bf16Weights& Bf16Weights::operator=(Bf16Weights&&) noexcept = default;

int64_t Bf16Weights::bytes() const { return static_cast<int64_t>(packed_.size()); }

void Bf16Weights::Multiply(int64_t n, const float* x, int64_t ldx, float* y, int64_t ldy, float beta,
                           int threads) const {
  if (n < 0) throw ShapeError(fmt::format("Bf16Weights::Multiply: n must be >= 0, got {}", n));
  if (ldx < cols_ || ldy < rows_) {
    throw ShapeError(fmt::format("Bf16Weights::Multiply: strides must cover the rows, got ldx={} (cols {}), "
                                 "ldy={} (rows {})", ldx, cols_, ldy, rows_));
  }
  if (n == 0 || rows_ == 0) return;
  if (cols_ == 0) {  // an empty sum leaves beta * y
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < rows_; ++r) y[t * ldy + r] = beta == 0.0f ? 0.0f : beta * y[t * ldy + r];
    }
    return;
  }
  try {
    // Activations rounded to bf16 once per call, into this thread's buffer.
    thread_local std::vector<uint8_t> x_bf16, scratch;
    const CachedReorder& cvt = ToBf16(n, cols_, ldx);
    uint8_t* xb = Scratch(x_bf16, static_cast<size_t>(n * cols_) * 2);
    {
      dnnl::memory from({{n, cols_}, dt::f32, dnnl::memory::dims{ldx, 1}}, Engine(), const_cast<float*>(x));
      dnnl::memory to({{n, cols_}, dt::bf16, tag::ab}, Engine(), xb);
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
      if (cvt.scratchpad.get_size() > 0) {
        args.emplace(DNNL_ARG_SCRATCHPAD,
                     dnnl::memory(cvt.scratchpad, Engine(), Scratch(scratch, cvt.scratchpad.get_size())));
      }
      cvt.primitive.execute(ThreadStream(), args);
    }
    const int n_threads = omp_in_parallel() ? 1 : std::min<int64_t>(ResolveThreads(threads, "threads"), n_blocks_);
    const dnnl::memory::desc src_desc({n, cols_}, dt::bf16, tag::ab);
    // oneDNN 2.6's fast kernels want a dense destination: each block's product goes to a dense [n, n_rows]
    // buffer (unless it is the whole of a dense y with beta = 0), then into y as product + beta * y.
    const bool direct = n_blocks_ == 1 && ldy == rows_ && beta == 0.0f;
    auto run_block = [&](int64_t b) {
      const Block& blk = blocks_[static_cast<size_t>(b)];
      const CachedMatmul& mm = Matmul(n, blk.n_rows, cols_, blk.desc, in_place_);
      thread_local std::vector<uint8_t> block_scratch;
      thread_local std::vector<float> product;
      float* out = y;
      if (!direct) {
        if (product.size() < static_cast<size_t>(n * blk.n_rows)) product.resize(static_cast<size_t>(n * blk.n_rows));
        out = product.data();
      }
      dnnl::memory src(src_desc, Engine(), xb);
      dnnl::memory w(blk.desc, Engine(), const_cast<void*>(blk.data));  // read only
      dnnl::memory dst({{n, blk.n_rows}, dt::f32, tag::ab}, Engine(), out);
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst}};
      if (mm.scratchpad.get_size() > 0) {
        args.emplace(DNNL_ARG_SCRATCHPAD,
                     dnnl::memory(mm.scratchpad, Engine(), Scratch(block_scratch, mm.scratchpad.get_size())));
      }
      mm.primitive.execute(ThreadStream(), args);
      ThreadStream().wait();
      if (direct) return;
      for (int64_t t = 0; t < n; ++t) {
        const float* p = out + t * blk.n_rows;
        float* yr = y + t * ldy + blk.first_row;
        if (beta == 0.0f) {
          std::copy(p, p + blk.n_rows, yr);
        } else {
#pragma omp simd
          for (int64_t r = 0; r < blk.n_rows; ++r) yr[r] = beta * yr[r] + p[r];
        }
      }
    };
    ThreadStream().wait();
    if (n_threads <= 1) {
      for (int64_t b = 0; b < n_blocks_; ++b) run_block(b);
      return;
    }
    std::exception_ptr error;
    std::mutex mu;
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int64_t b = 0; b < n_blocks_; ++b) {
      try {
        run_block(b);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  } catch (const dnnl::error& e) {
    throw ConfigError(ConfigText(e, "bf16 matmul"));
  }
}

}  // namespace posenc
