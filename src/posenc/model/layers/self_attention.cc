// Causal self-attention layer: see self_attention.h.
#include "posenc/model/layers/self_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <numeric>
#include <type_traits>
#include <vector>

#include "posenc/kernels/key_blocks.h"
#include "posenc/attention/softmax_scale.h"
#include "posenc/core/errors.h"
#include "posenc/kernels/attention_kernels.h"
#include "posenc/model/layers/parallel.h"
#include "posenc/rope/apply.h"

namespace posenc {

struct SelfAttentionWorkspace::Scratch {
  std::vector<float> kb, vb, kb_raw;      // [NumKeyBlocks(ctx), D, 8]: rotated keys, values, raw keys
  std::vector<float> dkb, dvb, dkb_raw;   // the same layout: gradients
  std::vector<float> dq;                  // [ctx, kv_mul, D]: gradient of the rotated queries of one task
  std::vector<float> dk;                  // [ctx, D]: gradient of the rotated keys of one task
  std::vector<const float*> cs;           // [tile rows]: pre-rotation tables of a tile's rows
  std::vector<int64_t> rows;              // [ctx]: 0 .. ctx-1 (RoPE table rows)
};

SelfAttentionWorkspace::SelfAttentionWorkspace() = default;
SelfAttentionWorkspace::~SelfAttentionWorkspace() = default;


namespace {

constexpr int64_t kTileRows = 16;  // query rows per kernel call (as CausalAttention)

bool HasRope(const AttentionRope& rope) { return rope.table.half > 0; }

// Whether query row p has its own (pre-rotation) table.
bool Own(const AttentionRope& rope, int64_t p) { return rope.pre_rotation != nullptr && !rope.pre_rotation->shared(p); }

// cos/sin of angle j * theta_p for every pair of a pre-rotation row p (the tables store them in key blocks).
void OwnAngles(const PreRotationTables& t, int64_t p, int64_t j, float* c, float* s) {
  for (int64_t i = 0; i < t.half(); ++i) {
    c[i] = t.at(p, 0, i, j);
    s[i] = t.at(p, 1, i, j);
  }
}

// out = R x (kForward) or R^T x (kBackward) for one head of D channels: pair i = (2i, 2i+1) interleaved or
// (i, i + half) half-split, turned by (c[i], s[i]); channels [2 half, D) copied. out may equal x.
template <typename T>
void RotateHead(const T* x, const float* c, const float* s, int64_t half, int64_t D, RopeLayout layout,
                RopeDirection direction, T* out) {
  for (int64_t d = 2 * half; d < D; ++d) out[d] = x[d];
  for (int64_t i = 0; i < half; ++i) {
    const int64_t ia = layout == RopeLayout::kInterleaved ? 2 * i : i;
    const int64_t ib = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half;
    const T a = x[ia], b = x[ib], cc = c[i], ss = s[i];
    if (direction == RopeDirection::kForward) {
      out[ia] = a * cc - b * ss;
      out[ib] = a * ss + b * cc;
    } else {
      out[ia] = a * cc + b * ss;
      out[ib] = b * cc - a * ss;
    }
  }
}

// Calls fn(i0, n, own) for consecutive runs of at most kTileRows query rows that all have their own table
// (own) or all use the static one.
template <typename Fn>
void ForEachTile(const AttentionRope& rope, int64_t ctx, Fn&& fn) {
  for (int64_t i0 = 0; i0 < ctx;) {
    const bool own = Own(rope, i0);
    int64_t n = 1;
    while (n < kTileRows && i0 + n < ctx && Own(rope, i0 + n) == own) ++n;
    fn(i0, n, own);
    i0 += n;
  }
}

void CheckPointers(const SelfAttentionShape& s, std::initializer_list<const void*> pointers, const char* name) {
  if (s.batch * s.ctx == 0) return;
  for (const void* p : pointers) {
    if (p == nullptr) throw ShapeError(fmt::format("{}: null input or output pointer", name));
  }
}

float ScaleOf(const SelfAttentionShape& s, const AttentionRope& rope) {
  return static_cast<float>(SoftmaxScale(s.dims.head_dim, std::nullopt, rope.softmax_scale_multiplier));
}

// ---- float: the tile kernels, one task per (sequence, kv head) ------------------------------------------------

// Makes sure every piece has its scratch, with the RoPE rows 0 .. ctx-1.
void Prepare(std::vector<std::unique_ptr<SelfAttentionWorkspace::Scratch>>& slots, int64_t pieces, int64_t ctx) {
  while (static_cast<int64_t>(slots.size()) < pieces) slots.push_back(std::make_unique<SelfAttentionWorkspace::Scratch>());
  for (int64_t k = 0; k < pieces; ++k) {
    std::vector<int64_t>& rows = slots[static_cast<size_t>(k)]->rows;
    rows.resize(static_cast<size_t>(ctx));
    std::iota(rows.begin(), rows.end(), int64_t{0});
  }
}

}  // namespace

void ValidateSelfAttention(const SelfAttentionShape& s, const AttentionRope& rope) {
  ValidateAttentionDims(s.dims);
  if (s.batch < 0 || s.ctx < 0) {
    throw ShapeError(fmt::format("self-attention batch and ctx must be >= 0, got {} and {}", s.batch, s.ctx));
  }
  SoftmaxScale(s.dims.head_dim, std::nullopt, rope.softmax_scale_multiplier);  // ConfigError if not finite > 0
  const CosSinView& t = rope.table;
  if (t.half < 0) throw ShapeError(fmt::format("RoPE table half must be >= 0, got {}", t.half));
  if (t.half > 0) {
    if (t.cos == nullptr || t.sin == nullptr) throw ShapeError("RoPE table: cos or sin is null");
    if (2 * t.half > s.dims.head_dim) {
      throw ShapeError(fmt::format("RoPE table: rotary_dim = 2 * half = {} must be <= head_dim = {}", 2 * t.half,
                                   s.dims.head_dim));
    }
    if (t.n_rows < s.ctx) {
      throw RangeError(fmt::format("RoPE table covers positions [0, {}), ctx = {} needs [0, {})", t.n_rows, s.ctx,
                                   s.ctx));
    }
  }
  if (rope.pre_rotation != nullptr) {
    const PreRotationTables& p = *rope.pre_rotation;
    if (t.half == 0) throw ShapeError("pre-rotation tables need the static RoPE table beside them (table is empty)");
    if (p.half() != t.half) {
      throw ShapeError(fmt::format("pre-rotation tables have half = {}, the RoPE table {}", p.half(), t.half));
    }
    if (rope.layout != RopeLayout::kInterleaved) {
      throw ShapeError("pre-rotation tables pair channels (2i, 2i+1): the layout must be interleaved, got half-split");
    }
    if (p.n_rows() < s.ctx) {
      throw RangeError(fmt::format("pre-rotation tables cover query positions [0, {}), ctx = {}", p.n_rows(), s.ctx));
    }
  }
}

namespace {

struct Dims {
  int64_t H, G, D, km, W, WR, O;  // heads, kv heads, head_dim, kv_mul, qkv / qk_rot / out row widths
  explicit Dims(const SelfAttentionShape& s)
      : H(s.dims.n_heads),
        G(s.dims.n_kv_heads),
        D(s.dims.head_dim),
        km(H / G),
        W(s.qkv_width()),
        WR(s.qk_width()),
        O(s.out_width()) {}
};

// The fields AttendTileArgs and AttendTileBackwardArgs share, for query rows [i0, i0 + n) of one task: the rows,
// the group, the key blocks (raw ones with each row's own table for pre-rotation rows) and the scale.
template <typename Args>
void SetTile(Args& a, const Dims& d, SelfAttentionWorkspace::Scratch& sc, const AttentionRope& rope, float scale,
             int64_t i0, int64_t n, bool own) {
  a.n_rows = n;
  a.pos0 = i0;
  a.kv_mul = d.km;
  a.head_dim = d.D;
  a.kb = own ? sc.kb_raw.data() : sc.kb.data();
  a.vb = sc.vb.data();
  a.scale = scale;
  if (own) {
    for (int64_t i = 0; i < n; ++i) sc.cs[static_cast<size_t>(i)] = rope.pre_rotation->row(i0 + i);
    a.cs = sc.cs.data();
    a.half = rope.table.half;
  }
}

// Runs fn(scratch, b, g) for every (sequence b, kv head g) task, the tasks split over the threads in one piece each;
// a piece's scratch has the RoPE rows 0 .. ctx-1 and the key blocks (and, for the backward, their gradients) sized
// for ctx.
template <typename Fn>
void ForEachTask(const SelfAttentionShape& s, const AttentionRope& rope, SelfAttentionWorkspace& ws, bool backward,
                 Fn&& fn) {
  const Dims d(s);
  const size_t block_floats = static_cast<size_t>(kernels::NumKeyBlocks(s.ctx) * d.D * kernels::kKeyBlock);
  const int64_t tasks = s.batch * d.G;
  auto& slots = ws.slots();
  Prepare(slots, layers::NumPieces(tasks, 1), s.ctx);
  layers::ForEachPiece(tasks, 1, [&](int64_t piece, int64_t t0, int64_t t1) {
    SelfAttentionWorkspace::Scratch& sc = *slots[static_cast<size_t>(piece)];
    for (std::vector<float>* v : {&sc.kb, &sc.vb, &sc.kb_raw, &sc.dkb, &sc.dvb, &sc.dkb_raw}) {
      const bool needed = (v != &sc.kb_raw && v != &sc.dkb_raw) || rope.pre_rotation != nullptr;
      const bool gradient = v == &sc.dkb || v == &sc.dvb || v == &sc.dkb_raw;
      if (needed && (backward || !gradient)) v->resize(block_floats);
    }
    if (backward) {
      sc.dq.resize(static_cast<size_t>(s.ctx * d.km * d.D));
      sc.dk.resize(static_cast<size_t>(s.ctx * d.D));
    }
    sc.cs.resize(static_cast<size_t>(kTileRows));
    for (int64_t task = t0; task < t1; ++task) fn(sc, task / d.G, task % d.G);
  });
}

void ForwardFloat(const SelfAttentionShape& s, const AttentionRope& rope, const float* qkv, float* qk_rot, float* out,
                  float* lse, SelfAttentionWorkspace& ws) {
  const Dims d(s);
  const int64_t ctx = s.ctx;
  const float scale = ScaleOf(s, rope);
  ForEachTask(s, rope, ws, false, [&](SelfAttentionWorkspace::Scratch& sc, int64_t b, int64_t g) {
    std::vector<float> c(static_cast<size_t>(rope.table.half)), sn(c.size());
    const float* qkv_b = qkv + b * ctx * d.W;
    float* qr_b = qk_rot + b * ctx * d.WR;
    // q heads [g km, (g+1) km) and k head g of sequence b, rotated into qk_rot
    const HeadsView q_in{const_cast<float*>(qkv_b + g * d.km * d.D), DType::kF32, ctx, d.km, d.D, d.W, d.D};
    const HeadsView q_out{qr_b + g * d.km * d.D, DType::kF32, ctx, d.km, d.D, d.WR, d.D};
    const HeadsView k_in{const_cast<float*>(qkv_b + (d.H + g) * d.D), DType::kF32, ctx, 1, d.D, d.W, d.D};
    const HeadsView k_out{qr_b + (d.H + g) * d.D, DType::kF32, ctx, 1, d.D, d.WR, d.D};
    if (HasRope(rope)) {
      ApplyRope(q_in, q_out, sc.rows, rope.table, rope.layout);  // reads q_in only
      ApplyRope(k_in, k_out, sc.rows, rope.table, rope.layout);
    } else {
      for (int64_t t = 0; t < ctx; ++t) {
        std::copy_n(qkv_b + t * d.W + g * d.km * d.D, d.km * d.D, qr_b + t * d.WR + g * d.km * d.D);
        std::copy_n(qkv_b + t * d.W + (d.H + g) * d.D, d.D, qr_b + t * d.WR + (d.H + g) * d.D);
      }
    }
    for (int64_t p = 0; p < ctx; ++p) {  // pre-rotation rows: q_p = R(p theta_p) q_raw
      if (!Own(rope, p)) continue;
      OwnAngles(*rope.pre_rotation, p, p, c.data(), sn.data());
      for (int64_t r = 0; r < d.km; ++r) {
        RotateHead(qkv_b + p * d.W + (g * d.km + r) * d.D, c.data(), sn.data(), rope.table.half, d.D,
                   rope.layout, RopeDirection::kForward, qr_b + p * d.WR + (g * d.km + r) * d.D);
      }
    }
    kernels::PackKeyBlocks(qr_b + (d.H + g) * d.D, d.WR, ctx, 1, d.D, sc.kb.data());
    kernels::PackKeyBlocks(qkv_b + (d.H + d.G + g) * d.D, d.W, ctx, 1, d.D, sc.vb.data());
    if (rope.pre_rotation != nullptr) kernels::PackKeyBlocks(qkv_b + (d.H + g) * d.D, d.W, ctx, 1, d.D, sc.kb_raw.data());
    ForEachTile(rope, ctx, [&](int64_t i0, int64_t n, bool own) {
      kernels::AttendTileArgs a{};
      a.q = qr_b + i0 * d.WR + g * d.km * d.D;
      a.q_stride = d.WR;
      SetTile(a, d, sc, rope, scale, i0, n, own);
      a.out = out + (b * ctx + i0) * d.O + g * d.km * d.D;
      a.out_stride = d.O;
      a.lse = lse + (b * ctx + i0) * d.H + g * d.km;
      a.lse_stride = d.H;
      kernels::AttendTile(a);
    });
  });
}

void BackwardFloat(const SelfAttentionShape& s, const AttentionRope& rope, const float* qkv, const float* qk_rot,
                   const float* out, const float* lse, const float* dout, float* dqkv, SelfAttentionWorkspace& ws) {
  const Dims d(s);
  const int64_t ctx = s.ctx;
  const float scale = ScaleOf(s, rope);
  ForEachTask(s, rope, ws, true, [&](SelfAttentionWorkspace::Scratch& sc, int64_t b, int64_t g) {
    std::vector<float> c(static_cast<size_t>(rope.table.half)), sn(c.size());
    const float* qkv_b = qkv + b * ctx * d.W;
    const float* qr_b = qk_rot + b * ctx * d.WR;
    float* dqkv_b = dqkv + b * ctx * d.W;
    kernels::PackKeyBlocks(qr_b + (d.H + g) * d.D, d.WR, ctx, 1, d.D, sc.kb.data());
    kernels::PackKeyBlocks(qkv_b + (d.H + d.G + g) * d.D, d.W, ctx, 1, d.D, sc.vb.data());
    std::fill(sc.dkb.begin(), sc.dkb.end(), 0.0f);
    std::fill(sc.dvb.begin(), sc.dvb.end(), 0.0f);
    if (rope.pre_rotation != nullptr) {
      kernels::PackKeyBlocks(qkv_b + (d.H + g) * d.D, d.W, ctx, 1, d.D, sc.kb_raw.data());
      std::fill(sc.dkb_raw.begin(), sc.dkb_raw.end(), 0.0f);
    }
    std::fill(sc.dq.begin(), sc.dq.end(), 0.0f);
    ForEachTile(rope, ctx, [&](int64_t i0, int64_t n, bool own) {
      kernels::AttendTileBackwardArgs a{};
      a.q = qr_b + i0 * d.WR + g * d.km * d.D;
      a.q_stride = d.WR;
      a.out = out + (b * ctx + i0) * d.O + g * d.km * d.D;
      a.out_stride = d.O;
      a.dout = dout + (b * ctx + i0) * d.O + g * d.km * d.D;
      a.dout_stride = d.O;
      a.lse = lse + (b * ctx + i0) * d.H + g * d.km;
      a.lse_stride = d.H;
      SetTile(a, d, sc, rope, scale, i0, n, own);
      a.dq = sc.dq.data() + i0 * d.km * d.D;
      a.dq_stride = d.km * d.D;
      a.dkb = own ? sc.dkb_raw.data() : sc.dkb.data();
      a.dvb = sc.dvb.data();
      kernels::AttendTileBackward(a);
    });
    // dq of the rotated queries -> of the raw queries: R^T with the row's table
    if (HasRope(rope)) {
      ForEachTile(rope, ctx, [&](int64_t i0, int64_t n, bool own) {
        if (own) {
          for (int64_t p = i0; p < i0 + n; ++p) {
            OwnAngles(*rope.pre_rotation, p, p, c.data(), sn.data());
            for (int64_t r = 0; r < d.km; ++r) {
              float* x = sc.dq.data() + (p * d.km + r) * d.D;
              RotateHead(x, c.data(), sn.data(), rope.table.half, d.D, rope.layout, RopeDirection::kBackward, x);
            }
          }
        } else {
          ApplyRope(HeadsView::Contiguous(sc.dq.data() + i0 * d.km * d.D, n, d.km, d.D),
                    std::span<const int64_t>(sc.rows.data() + i0, static_cast<size_t>(n)), rope.table, rope.layout,
                    RopeDirection::kBackward);
        }
      });
    }
    for (int64_t t = 0; t < ctx; ++t) {
      float* dst = dqkv_b + t * d.W + g * d.km * d.D;
      const float* src = sc.dq.data() + t * d.km * d.D;
      for (int64_t x = 0; x < d.km * d.D; ++x) dst[x] += src[x];
    }
    // dk: rotated-frame blocks -> rows -> R^T; raw-frame blocks (pre-rotation rows) added as they are
    std::fill(sc.dk.begin(), sc.dk.end(), 0.0f);
    kernels::UnpackKeyBlocksAdd(sc.dkb.data(), ctx, d.D, sc.dk.data(), d.D);
    if (HasRope(rope)) {
      ApplyRope(HeadsView::Contiguous(sc.dk.data(), ctx, 1, d.D), sc.rows, rope.table, rope.layout,
                RopeDirection::kBackward);
    }
    for (int64_t t = 0; t < ctx; ++t) {
      float* dst = dqkv_b + t * d.W + (d.H + g) * d.D;
      for (int64_t x = 0; x < d.D; ++x) dst[x] += sc.dk[static_cast<size_t>(t * d.D + x)];
    }
    if (rope.pre_rotation != nullptr) {
      kernels::UnpackKeyBlocksAdd(sc.dkb_raw.data(), ctx, d.D, dqkv_b + (d.H + g) * d.D, d.W);
    }
    kernels::UnpackKeyBlocksAdd(sc.dvb.data(), ctx, d.D, dqkv_b + (d.H + d.G + g) * d.D, d.W);
  });
}

// ---- float64: the definition, plain loops -----------------------------------------------------------------------

// The rotated query of row p (qk_rot) and, for the keys, a function giving key j as row p sees it.
struct Reference {
  const SelfAttentionShape& s;
  const AttentionRope& rope;
  Dims d;
  Reference(const SelfAttentionShape& shape, const AttentionRope& r) : s(shape), rope(r), d(shape) {}

  // out = R(row) x (or R^T) with the static table row t; identity without RoPE.
  void Static(const double* x, int64_t t, RopeDirection dir, double* out) const {
    if (!HasRope(rope)) {
      std::copy_n(x, d.D, out);
      return;
    }
    const int64_t h = rope.table.half;
    RotateHead(x, rope.table.cos + t * h, rope.table.sin + t * h, h, d.D, rope.layout, dir, out);
  }
  // out = R(j theta_p) x (or R^T) with row p's own table.
  void OwnRot(const double* x, int64_t p, int64_t j, RopeDirection dir, double* out) const {
    const int64_t h = rope.table.half;
    std::vector<float> c(static_cast<size_t>(h)), sn(c.size());
    OwnAngles(*rope.pre_rotation, p, j, c.data(), sn.data());
    RotateHead(x, c.data(), sn.data(), h, d.D, rope.layout, dir, out);
  }

  void Rotate(const double* qkv_b, double* qr_b) const {
    for (int64_t t = 0; t < s.ctx; ++t) {
      for (int64_t h = 0; h < d.H; ++h) {
        const double* x = qkv_b + t * d.W + h * d.D;
        double* y = qr_b + t * d.WR + h * d.D;
        if (Own(rope, t)) {
          OwnRot(x, t, t, RopeDirection::kForward, y);
        } else {
          Static(x, t, RopeDirection::kForward, y);
        }
      }
      for (int64_t g = 0; g < d.G; ++g) {
        Static(qkv_b + t * d.W + (d.H + g) * d.D, t, RopeDirection::kForward, qr_b + t * d.WR + (d.H + g) * d.D);
      }
    }
  }

  // Key j as query row p sees it (rotated), into k.
  void Key(const double* qkv_b, const double* qr_b, int64_t g, int64_t p, int64_t j, double* k) const {
    if (Own(rope, p)) {
      OwnRot(qkv_b + j * d.W + (d.H + g) * d.D, p, j, RopeDirection::kForward, k);
    } else {
      std::copy_n(qr_b + j * d.WR + (d.H + g) * d.D, d.D, k);
    }
  }
};

void ForwardDouble(const SelfAttentionShape& s, const AttentionRope& rope, const double* qkv, double* qk_rot,
                   double* out, double* lse) {
  const Reference ref(s, rope);
  const Dims& d = ref.d;
  const double scale = SoftmaxScale(d.D, std::nullopt, rope.softmax_scale_multiplier);
  std::vector<double> k(static_cast<size_t>(d.D)), sc(static_cast<size_t>(s.ctx));
  for (int64_t b = 0; b < s.batch; ++b) {
    const double* qkv_b = qkv + b * s.ctx * d.W;
    double* qr_b = qk_rot + b * s.ctx * d.WR;
    ref.Rotate(qkv_b, qr_b);
    for (int64_t i = 0; i < s.ctx; ++i) {
      for (int64_t h = 0; h < d.H; ++h) {
        const int64_t g = h / d.km;
        const double* q = qr_b + i * d.WR + h * d.D;
        double m = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          ref.Key(qkv_b, qr_b, g, i, j, k.data());
          double dot = 0.0;
          for (int64_t x = 0; x < d.D; ++x) dot += q[x] * k[static_cast<size_t>(x)];
          sc[static_cast<size_t>(j)] = dot * scale;
          m = std::max(m, sc[static_cast<size_t>(j)]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += (sc[static_cast<size_t>(j)] = std::exp(sc[static_cast<size_t>(j)] - m));
        double* o = out + (b * s.ctx + i) * d.O + h * d.D;
        for (int64_t x = 0; x < d.D; ++x) {
          double acc = 0.0;
          for (int64_t j = 0; j <= i; ++j) acc += sc[static_cast<size_t>(j)] * qkv_b[j * d.W + (d.H + d.G + g) * d.D + x];
          o[x] = acc / sum;
        }
        lse[(b * s.ctx + i) * d.H + h] = (m + std::log(sum)) / std::log(2.0);
      }
    }
  }
}

void BackwardDouble(const SelfAttentionShape& s, const AttentionRope& rope, const double* qkv, const double* qk_rot,
                    const double* out, const double* lse, const double* dout, double* dqkv) {
  const Reference ref(s, rope);
  const Dims& d = ref.d;
  const double scale = SoftmaxScale(d.D, std::nullopt, rope.softmax_scale_multiplier);
  std::vector<double> k(static_cast<size_t>(d.D)), gk(k.size()), tmp(k.size());
  std::vector<double> dq(static_cast<size_t>(s.ctx * d.H * d.D)), dk(static_cast<size_t>(s.ctx * d.G * d.D));
  for (int64_t b = 0; b < s.batch; ++b) {
    const double* qkv_b = qkv + b * s.ctx * d.W;
    const double* qr_b = qk_rot + b * s.ctx * d.WR;
    double* dqkv_b = dqkv + b * s.ctx * d.W;
    std::fill(dq.begin(), dq.end(), 0.0);  // rotated-frame gradients of the queries and (static) keys
    std::fill(dk.begin(), dk.end(), 0.0);
    for (int64_t i = 0; i < s.ctx; ++i) {
      const bool own = Own(rope, i);
      for (int64_t h = 0; h < d.H; ++h) {
        const int64_t g = h / d.km;
        const double* q = qr_b + i * d.WR + h * d.D;
        const double* o = out + (b * s.ctx + i) * d.O + h * d.D;
        const double* go = dout + (b * s.ctx + i) * d.O + h * d.D;
        const double l = lse[(b * s.ctx + i) * d.H + h] * std::log(2.0);
        double dsum = 0.0;
        for (int64_t x = 0; x < d.D; ++x) dsum += go[x] * o[x];
        for (int64_t j = 0; j <= i; ++j) {
          ref.Key(qkv_b, qr_b, g, i, j, k.data());
          const double* v = qkv_b + j * d.W + (d.H + d.G + g) * d.D;
          double dot = 0.0, dp = 0.0;
          for (int64_t x = 0; x < d.D; ++x) {
            dot += q[x] * k[static_cast<size_t>(x)];
            dp += go[x] * v[x];
          }
          const double p = std::exp(dot * scale - l);
          const double ds = p * (dp - dsum) * scale;
          double* dv = dqkv_b + j * d.W + (d.H + d.G + g) * d.D;
          for (int64_t x = 0; x < d.D; ++x) {
            dv[x] += p * go[x];
            dq[static_cast<size_t>((i * d.H + h) * d.D + x)] += ds * k[static_cast<size_t>(x)];
            gk[static_cast<size_t>(x)] = ds * q[x];
          }
          if (own) {  // straight to the raw key: R(j theta_i)^T
            ref.OwnRot(gk.data(), i, j, RopeDirection::kBackward, tmp.data());
            double* dkr = dqkv_b + j * d.W + (d.H + g) * d.D;
            for (int64_t x = 0; x < d.D; ++x) dkr[x] += tmp[static_cast<size_t>(x)];
          } else {
            for (int64_t x = 0; x < d.D; ++x) dk[static_cast<size_t>((j * d.G + g) * d.D + x)] += gk[static_cast<size_t>(x)];
          }
        }
      }
    }
    for (int64_t t = 0; t < s.ctx; ++t) {
      for (int64_t h = 0; h < d.H; ++h) {
        const double* x = dq.data() + (t * d.H + h) * d.D;
        if (Own(rope, t)) {
          ref.OwnRot(x, t, t, RopeDirection::kBackward, tmp.data());
        } else {
          ref.Static(x, t, RopeDirection::kBackward, tmp.data());
        }
        for (int64_t c = 0; c < d.D; ++c) dqkv_b[t * d.W + h * d.D + c] += tmp[static_cast<size_t>(c)];
      }
      for (int64_t g = 0; g < d.G; ++g) {
        ref.Static(dk.data() + (t * d.G + g) * d.D, t, RopeDirection::kBackward, tmp.data());
        for (int64_t c = 0; c < d.D; ++c) dqkv_b[t * d.W + (d.H + g) * d.D + c] += tmp[static_cast<size_t>(c)];
      }
    }
  }
}

}  // namespace

template <typename T>
void SelfAttentionForward(const SelfAttentionShape& shape, const AttentionRope& rope, const T* qkv, T* qk_rot, T* out,
                          T* lse, SelfAttentionWorkspace& workspace) {
  ValidateSelfAttention(shape, rope);
  CheckPointers(shape, {qkv, qk_rot, out, lse}, "SelfAttentionForward");
  if (shape.batch * shape.ctx == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    ForwardFloat(shape, rope, qkv, qk_rot, out, lse, workspace);
  } else {
    (void)workspace;
    ForwardDouble(shape, rope, qkv, qk_rot, out, lse);
  }
}

template <typename T>
void SelfAttentionBackward(const SelfAttentionShape& shape, const AttentionRope& rope, const T* qkv, const T* qk_rot,
                           const T* out, const T* lse, const T* dout, T* dqkv, SelfAttentionWorkspace& workspace) {
  ValidateSelfAttention(shape, rope);
  CheckPointers(shape, {qkv, qk_rot, out, lse, dout, dqkv}, "SelfAttentionBackward");
  if (shape.batch * shape.ctx == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    BackwardFloat(shape, rope, qkv, qk_rot, out, lse, dout, dqkv, workspace);
  } else {
    (void)workspace;
    BackwardDouble(shape, rope, qkv, qk_rot, out, lse, dout, dqkv);
  }
}

template void SelfAttentionForward<float>(const SelfAttentionShape&, const AttentionRope&, const float*, float*,
                                          float*, float*, SelfAttentionWorkspace&);
template void SelfAttentionForward<double>(const SelfAttentionShape&, const AttentionRope&, const double*, double*,
                                           double*, double*, SelfAttentionWorkspace&);
template void SelfAttentionBackward<float>(const SelfAttentionShape&, const AttentionRope&, const float*,
                                           const float*, const float*, const float*, const float*, float*,
                                           SelfAttentionWorkspace&);
template void SelfAttentionBackward<double>(const SelfAttentionShape&, const AttentionRope&, const double*,
                                            const double*, const double*, const double*, const double*, double*,
                                            SelfAttentionWorkspace&);

}  // namespace posenc
