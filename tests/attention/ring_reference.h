// Float64 reference and derived float32 bounds for context-parallel (ring) attention, shared by the in-process
// tests (ring_attention_test.cc) and the mpirun check (dist/mpi/mpi_check.cc).
//
// Bound (per output element; u = 2^-24, first order in u), the derivation of flash_attention_test.cc applied to
// the ring:
//  * Scores: a rotated channel a c - b s carries 2u (|a c| + |b s|) =: 2u X (X = |x| unrotated); the scale
//    folded into q adds 2u relative; the head_dim-term dot product gamma_hd <= hd u. So
//    |ds_j| <= dS_j = scale (hd + 6) u sum_d Xq_d Xk_jd, and perturbing the scores moves w_j by <= 2 max dS w_j.
//    A pre-rotation row rotates q and every key with its own cos/sin: the same count.
//  * Merging (the ring's only new error source): the ring is an online softmax whose key tiles are also cut at
//    the boundaries of the position ranges of the blocks. Key j of tile t gets p_j = exp(fl(s_j - m_t)) and then
//    one factor corr = exp(fl(m_{t'-1} - m_{t'})) per later tile t' that raises the maximum. The argument
//    roundings add u (|s_j - m_t| + sum_t' |m_{t'-1} - m_t'|) = u (m_T - s_j) = u |s_j - m|: they telescope to
//    what one pass over all keys (p_j = exp(s_j - m)) would carry. What does not telescope is the rounding of
//    each rescale: exp (1 ulp <= 2u) and the product (u), on O and on l: 6u per tile the row sees. A tile in
//    which the row sees no key changes nothing (corr = exp(0) = 1 exactly, l + 0, O untouched).
//  * Sums: l = sum p_j and O = sum p_j v_j each within gamma_n <= n u; exp of p_j (2u, on O and l) and O / l: 8u.
//  => |ring - float64| <= sum_j w_j |v_j| (2 max dS + u |s_j - m| + (2 n + 6 tiles_ring + 8) u),
//     tiles_ring(p) = sum over the window's ranges [b, e) with b <= p of ceil((min(e, p + 1) - b) / k_block).
// Single-process CausalAttention (AttendTile: exp2 within 2 ulp, the scale times log2(e) one rounding more, online
// softmax over chunks of 256 keys) obeys the same form with dS (hd + 8) u and (2 n + 10 tiles_c + 12) u,
// tiles_c(p) = ceil((p + 1) / 256). Ring and CausalAttention therefore agree within the sum of the two bounds.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "posenc/attention/attention.h"
#include "posenc/attention/context_split.h"
#include "posenc/attention/pre_rotation.h"
#include "posenc/attention/ring_attention.h"
#include "posenc/kernels/attention_kernels.h"
#include "posenc/model/config.h"
#include "posenc/rope/apply.h"
#include "test_util.h"

namespace posenc::testing {

inline constexpr double kRingU = 1.0 / 16777216.0;  // 2^-24

/// One window: contiguous global q [L, n_heads, hd], k and v [L, n_kv_heads, hd], unrotated.
struct RingProblem {
  AttentionDims dims;
  int64_t n_tokens = 0;
  std::vector<float> q, k, v;
  RingRope rope;
  float mult = 1.0f;
};

/// A problem with standard-normal q, k, v (seeds seed, seed + 1, seed + 2) and no RoPE yet.
inline RingProblem MakeRingProblem(const AttentionDims& dims, int64_t n_tokens, uint32_t seed) {
  RingProblem pr;
  pr.dims = dims;
  pr.n_tokens = n_tokens;
  pr.q = RandomNormal(static_cast<size_t>(n_tokens * dims.n_heads * dims.head_dim), seed);
  pr.k = RandomNormal(static_cast<size_t>(n_tokens * dims.n_kv_heads * dims.head_dim), seed + 1);
  pr.v = RandomNormal(static_cast<size_t>(n_tokens * dims.n_kv_heads * dims.head_dim), seed + 2);
  return pr;
}

/// The model shape BuildMethodRope needs for attention `dims` trained at L0 tokens (no weights).
inline ModelConfig RingTestConfig(const AttentionDims& dims, int64_t l0) {
  ModelConfig c;
  c.n_heads = dims.n_heads;
  c.n_kv_heads = dims.n_kv_heads;
  c.head_dim = dims.head_dim;
  c.dim = dims.n_heads * dims.head_dim;
  c.n_layers = 1;
  LayerSpec spec;
  spec.rope_params.head_dim = dims.head_dim;
  spec.rope_params.rotary_dim = dims.head_dim;
  c.layers = {spec};
  c.train_ctx = l0;
  return c;
}

/// Float64 attention of the problem and the two bounds of the header comment, per element [L, n_heads, hd].
struct RingReference {
  std::vector<double> out, tol_ring, tol_causal;
};

namespace ring_reference_detail {

// cos/sin for query row p and key (or query) position j, pair i: the row's own table for a pre-rotation row.
inline void CosSin(const RingRope& rope, int64_t p, int64_t j, int64_t i, double& c, double& s) {
  if (rope.pre_rotation != nullptr && !rope.pre_rotation->shared(p)) {
    c = rope.pre_rotation->at(p, 0, i, j);
    s = rope.pre_rotation->at(p, 1, i, j);
    return;
  }
  c = rope.table.cos[j * rope.table.half + i];
  s = rope.table.sin[j * rope.table.half + i];
}

// x rotated (in double) as row p sees position j, and X (see the header comment).
inline void Rotate(const RingRope& rope, int64_t hd, const float* x, int64_t p, int64_t j, double* r, double* xabs) {
  for (int64_t d = 0; d < hd; ++d) {
    r[d] = x[d];
    xabs[d] = std::fabs(x[d]);
  }
  if (rope.table.cos == nullptr) return;
  const int64_t half = rope.table.half;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t ia = rope.layout == RopeLayout::kHalfSplit ? i : 2 * i;
    const int64_t ib = rope.layout == RopeLayout::kHalfSplit ? i + half : 2 * i + 1;
    double c, s;
    CosSin(rope, p, j, i, c, s);
    const double a = x[ia], b = x[ib];
    r[ia] = a * c - b * s;
    r[ib] = a * s + b * c;
    xabs[ia] = std::fabs(a * c) + std::fabs(b * s);
    xabs[ib] = std::fabs(a * s) + std::fabs(b * c);
  }
}

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace ring_reference_detail

/// k_block: the tile the ring was run with (FlashTiling::k_block; the ring uses min(k_block, split.MaxCount())).
inline RingReference ComputeRingReference(const RingProblem& pr, const ContextSplit& split, int64_t k_block) {
  namespace d = ring_reference_detail;
  const int64_t hd = pr.dims.head_dim, H = pr.dims.n_heads, KV = pr.dims.n_kv_heads, kv_mul = H / KV;
  const int64_t L = pr.n_tokens, kb = std::min(k_block, split.MaxCount());
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd)) * pr.mult;
  std::vector<PositionRange> ranges;
  for (const auto& mine : split.ranges) ranges.insert(ranges.end(), mine.begin(), mine.end());
  RingReference ref;
  ref.out.resize(static_cast<size_t>(L * H * hd));
  ref.tol_ring.resize(ref.out.size());
  ref.tol_causal.resize(ref.out.size());
  std::vector<double> qr(hd), qa(hd), kr(hd), ka(hd), sc, w, ds;
  for (int64_t p = 0; p < L; ++p) {
    const int64_t n = p + 1;
    int64_t tiles_ring = 0;
    for (const PositionRange& r : ranges) {
      if (r.begin <= p) tiles_ring += d::CeilDiv(std::min(r.end, p + 1) - r.begin, kb);
    }
    const int64_t tiles_c = d::CeilDiv(n, kernels::kAttendChunkKeys);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / kv_mul;
      d::Rotate(pr.rope, hd, pr.q.data() + (p * H + h) * hd, p, p, qr.data(), qa.data());
      sc.assign(static_cast<size_t>(n), 0.0);
      double mx = -std::numeric_limits<double>::infinity(), dabs_max = 0;
      for (int64_t j = 0; j < n; ++j) {
        d::Rotate(pr.rope, hd, pr.k.data() + (j * KV + g) * hd, p, j, kr.data(), ka.data());
        double dot = 0, dabs = 0;
        for (int64_t c = 0; c < hd; ++c) {
          dot += qr[c] * kr[c];
          dabs += qa[c] * ka[c];
        }
        sc[j] = dot * scale;
        dabs_max = std::max(dabs_max, dabs);
        mx = std::max(mx, sc[j]);
      }
      const double ds_ring = scale * static_cast<double>(hd + 6) * kRingU * dabs_max;
      const double ds_causal = scale * static_cast<double>(hd + 8) * kRingU * dabs_max;
      double sum = 0;
      w.resize(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) sum += (w[j] = std::exp(sc[j] - mx));
      for (double& x : w) x /= sum;
      for (int64_t c = 0; c < hd; ++c) {
        double acc = 0, tr = 0, tc = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double vj = pr.v[(j * KV + g) * hd + c];
          const double wv = w[j] * std::fabs(vj), arg = kRingU * std::fabs(sc[j] - mx);
          acc += w[j] * vj;
          tr += wv * (2 * ds_ring + arg + static_cast<double>(2 * n + 6 * tiles_ring + 8) * kRingU);
          tc += wv * (2 * ds_causal + arg + static_cast<double>(2 * n + 10 * tiles_c + 12) * kRingU);
        }
        const size_t e = static_cast<size_t>((p * H + h) * hd + c);
        ref.out[e] = acc;
        ref.tol_ring[e] = tr;
        ref.tol_causal[e] = tc;
      }
    }
  }
  return ref;
}

/// Single-process CausalAttention of the whole window (the result context parallelism must reproduce): q and k
/// rotated by ApplyRope with their positions, then CausalAttention; with pre-rotation tables,
/// CausalAttentionPreRotation (which pairs channels (2i, 2i+1): for the half-split layout q and k are first
/// permuted so that pair (i, i + half) becomes (2i, 2i + 1), which leaves every q.k unchanged).
inline std::vector<float> SingleProcessCausal(const RingProblem& pr) {
  const int64_t hd = pr.dims.head_dim, H = pr.dims.n_heads, KV = pr.dims.n_kv_heads, L = pr.n_tokens;
  std::vector<float> q = pr.q, k = pr.k;
  const CosSinView& t = pr.rope.table;
  if (t.cos != nullptr && pr.rope.pre_rotation != nullptr && pr.rope.layout == RopeLayout::kHalfSplit) {
    auto permute = [&](std::vector<float>& x) {
      std::vector<float> row(hd);
      for (size_t off = 0; off < x.size(); off += static_cast<size_t>(hd)) {
        std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(off), hd, row.begin());
        for (int64_t i = 0; i < t.half; ++i) {
          x[off + 2 * i] = row[i];
          x[off + 2 * i + 1] = row[i + t.half];
        }
      }
    };
    permute(q);
    permute(k);
  }
  const RopeLayout layout = pr.rope.pre_rotation != nullptr ? RopeLayout::kInterleaved : pr.rope.layout;
  std::vector<float> q_rot = q, k_rot = k;
  if (t.cos != nullptr) {
    std::vector<int64_t> rows(static_cast<size_t>(L));
    for (int64_t p = 0; p < L; ++p) rows[p] = p;
    ApplyRope(HeadsView::Contiguous(q_rot.data(), L, H, hd), rows, t, layout);
    ApplyRope(HeadsView::Contiguous(k_rot.data(), L, KV, hd), rows, t, layout);
  }
  std::vector<float> out(static_cast<size_t>(L * H * hd));
  AttentionScratch scratch;
  const AttentionInputs rotated{q_rot.data(), L, H * hd, 0, k_rot.data(), pr.v.data(), L, KV * hd};
  if (pr.rope.pre_rotation == nullptr) {
    CausalAttention(pr.dims, rotated, pr.mult, out.data(), H * hd, scratch);
  } else {
    const AttentionInputs raw{q.data(), L, H * hd, 0, k.data(), pr.v.data(), L, KV * hd};
    CausalAttentionPreRotation(pr.dims, rotated, raw, *pr.rope.pre_rotation, pr.mult, out.data(), H * hd, scratch);
  }
  return out;
}

/// Counts elements outside the bounds (ring vs float64 within tol_ring; ring vs CausalAttention within
/// tol_ring + tol_causal) and the largest |ring - float64| / tol_ring.
struct RingCheck {
  int64_t bad = 0;
  double worst_ratio = 0;
  std::string first_failure;
};

inline RingCheck CheckRingOutput(const RingReference& ref, const std::vector<float>& ring,
                                 const std::vector<float>& causal) {
  RingCheck c;
  for (size_t e = 0; e < ref.out.size(); ++e) {
    const double err = std::fabs(ring[e] - ref.out[e]);
    const bool ok = err <= ref.tol_ring[e] && std::fabs(ring[e] - causal[e]) <= ref.tol_ring[e] + ref.tol_causal[e];
    if (!ok && c.bad++ == 0) {
      c.first_failure = "element " + std::to_string(e) + ": ring " + std::to_string(ring[e]) + " causal " +
                        std::to_string(causal[e]) + " float64 " + std::to_string(ref.out[e]) + " tol_ring " +
                        std::to_string(ref.tol_ring[e]) + " tol_causal " + std::to_string(ref.tol_causal[e]);
    }
    c.worst_ratio = std::max(c.worst_ratio, err / ref.tol_ring[e]);
  }
  return c;
}

}  // namespace posenc::testing
