// Highway attention tile kernel (AttendTile): compiled once per x86 target by foreach_target.h and picked at
// run time; the dispatcher is at the bottom (HWY_ONCE). The scalar reference is attention_kernels_scalar.cc.
//
// Per tile (rows of one or more KV groups), keys are visited in chunks of kAttendChunkKeys. For every row and query
// head ("head-row") of the tile, per chunk:
//   1. scores t_j = q' . k_j for the chunk's keys, q' = q * scale * log2(e) (so exp becomes 2^x); a row with
//      its own table (pre-rotation) first rotates each raw key block, once for all of the row's heads;
//   2. online softmax: m_new = max(m, max_j t_j); the accumulators are rescaled by 2^(m - m_new) if it grew;
//   3. e_j = Exp2(t_j - m_new); l += e_j; acc_d += e_j v_j,d.
// At the end out_d = sum(acc_d) / sum(l). Accumulators keep 8 lanes (one per key of a block) until then.
// Vectors are CappedTag<float, 8>: one per block channel on AVX2/AVX3, two on SSE4/SSSE3, eight on SCALAR.
#include "posenc/kernels/attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "posenc/kernels/attention_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using kernels::AttendTileArgs;

constexpr int64_t kBlock = 8;                                   // keys per key block
constexpr int64_t kChunkBlocks = kernels::kAttendChunkKeys / kBlock;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kMaxHeads = 64;  // query heads per KV group handled in one pass (larger groups: a loop)

// 2^r on [-1/2, 1/2]: 1 + c1 r + ... + c6 r^6, relative minimax (Lawson-iterated least squares in float64 on
// 4001 Chebyshev points; max relative error of the exact polynomial 2.0e-9), coefficients rounded to float32.
constexpr float kC1 = 6.931471825e-01f, kC2 = 2.402264774e-01f, kC3 = 5.550332740e-02f, kC4 = 9.618427604e-03f,
                kC5 = 1.339881564e-03f, kC6 = 1.535612537e-04f;
constexpr float kRoundShift = 12582912.0f;  // 1.5 * 2^23: x + shift rounds x to an integer (|x| < 2^22)

using DF = hn::CappedTag<float, 8>;
using VF = hn::Vec<DF>;

// 2^x for x <= 0 (see Exp2Kernel). n = round(x) by the shift trick, r = x - n exactly (|r| <= 1/2, and x, n
// are within a factor 2 or n = 0), polynomial, then the exponent bits of 2^n: (bits(x + shift) + 127) << 23,
// since bits(x + shift) = 0x4B400000 + n and 0x4B400000 << 23 overflows to 0.
HWY_INLINE VF Exp2(DF d, VF x) {
  const hn::RebindToSigned<DF> di;
  x = hn::Max(x, hn::Set(d, -126.0f));
  const VF shifted = hn::Add(x, hn::Set(d, kRoundShift));
  const VF r = hn::Sub(x, hn::Sub(shifted, hn::Set(d, kRoundShift)));
  VF p = hn::MulAdd(hn::Set(d, kC6), r, hn::Set(d, kC5));
  p = hn::MulAdd(p, r, hn::Set(d, kC4));
  p = hn::MulAdd(p, r, hn::Set(d, kC3));
  p = hn::MulAdd(p, r, hn::Set(d, kC2));
  p = hn::MulAdd(p, r, hn::Set(d, kC1));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  const auto bits = hn::ShiftLeft<23>(hn::Add(hn::BitCast(di, shifted), hn::Set(di, 127)));
  return hn::Mul(p, hn::BitCast(d, bits));
}

float Exp2One(float x) {
  const DF d;
  return hn::GetLane(Exp2(d, hn::Set(d, x)));
}

// Scratch of one tile, carved from a stack buffer or the heap by the caller below.
struct TileState {
  float* m;     // [n_hr]: running maximum of the scaled scores (base 2)
  float* l;     // [n_hr, 8]: lane sums of e_j
  float* acc;   // [n_hr, head_dim, 8]: lane sums of e_j v_j
  float* qs;    // [n_hr, head_dim]: q * scale * log2(e)
  float* s;     // [kv_mul, kAttendChunkKeys]: one row's scores in the current chunk
  float* rk;    // [head_dim, 8]: one rotated key block (pre-rotation rows)
};

// Lanes [0, count) of the sub-vector starting at lane `first` of a block whose first `valid` lanes are keys.
HWY_INLINE hn::Mask<DF> ValidLanes(DF d, int64_t valid, size_t first) {
  const int64_t c = std::clamp<int64_t>(valid - static_cast<int64_t>(first), 0, static_cast<int64_t>(hn::Lanes(d)));
  return hn::FirstN(d, static_cast<size_t>(c));
}

// Rotates one raw key block with a row's cos/sin block c [2, half, 8] into rk [hd, 8]:
// (a, b) -> (a c - b s, a s + b c) per interleaved pair; channels past 2 half copied.
HWY_INLINE void RotateBlock(DF d, const float* HWY_RESTRICT k, const float* HWY_RESTRICT c, int64_t half, int64_t hd,
                            float* HWY_RESTRICT rk) {
  constexpr size_t N = hn::MaxLanes(DF());
  const float* sn = c + half * kBlock;
  for (int64_t i = 0; i < half; ++i) {
    for (size_t o = 0; o < static_cast<size_t>(kBlock); o += N) {
      const VF a = hn::LoadU(d, k + 2 * i * kBlock + o), b = hn::LoadU(d, k + (2 * i + 1) * kBlock + o);
      const VF ci = hn::LoadU(d, c + i * kBlock + o), si = hn::LoadU(d, sn + i * kBlock + o);
      hn::StoreU(hn::MulSub(a, ci, hn::Mul(b, si)), d, rk + 2 * i * kBlock + o);
      hn::StoreU(hn::MulAdd(a, si, hn::Mul(b, ci)), d, rk + (2 * i + 1) * kBlock + o);
    }
  }
  for (int64_t i = 2 * half * kBlock; i < hd * kBlock; i += static_cast<int64_t>(N)) {
    hn::StoreU(hn::LoadU(d, k + i), d, rk + i);
  }
}

// Scores of one key block (channel stride 8) for query head r: returned for the lanes at offset o, lanes
// >= valid set to -inf.
// The keys a row sees below the causal bound: lanes [0, lo_lane) of block lo_block are masked (a sliding window),
// and cap2 > 0 soft-caps the base-2 scores: t -> cap2 tanh(t / cap2) (cap2 = softcap * log2(e)).
struct RowKeys {
  int64_t lo_block = 0;
  int64_t lo_lane = 0;
  float cap2 = 0.0f;
};

// What ScoreVec does after the dot product: soft-capping and the masks of a partial or windowed block.
HWY_INLINE VF FinishScore(DF d, VF acc, int64_t valid, int64_t low, float cap2, size_t o) {
  if (cap2 > 0.0f) {
    const VF c = hn::Set(d, cap2);
    acc = hn::Mul(c, hn::Tanh(d, hn::Div(acc, c)));
  }
  if (valid < kBlock) acc = hn::IfThenElse(ValidLanes(d, valid, o), acc, hn::Set(d, kMinusInf));
  if (low > 0) acc = hn::IfThenElse(ValidLanes(d, low, o), hn::Set(d, kMinusInf), acc);
  return acc;
}

template <int HD>
HWY_INLINE VF ScoreVec(DF d, const float* HWY_RESTRICT qr, int64_t hd, const float* HWY_RESTRICT k, int64_t valid,
                       int64_t low, float cap2, size_t o) {
  VF acc = hn::Mul(hn::Set(d, qr[0]), hn::LoadU(d, k + o));
  if constexpr (HD > 0) {
    HWY_UNROLL(16)
    for (int dd = 1; dd < HD; ++dd) acc = hn::MulAdd(hn::Set(d, qr[dd]), hn::LoadU(d, k + dd * kBlock + o), acc);
  } else {
    for (int64_t dd = 1; dd < hd; ++dd) acc = hn::MulAdd(hn::Set(d, qr[dd]), hn::LoadU(d, k + dd * kBlock + o), acc);
  }
  return FinishScore(d, acc, valid, low, cap2, o);
}

// ScoreVec for four heads (rows q, q + hd, q + 2 hd, q + 3 hd) at once: the same operations in the same order per
// head, as four independent chains sharing each key load (one head's chain alone waits on the FMA latency).
HWY_INLINE void ScoreVec4(DF d, const float* HWY_RESTRICT q, int64_t hd, const float* HWY_RESTRICT k, int64_t valid,
                          int64_t low, float cap2, size_t o, VF* out) {
  const float* q0 = q;
  const float* q1 = q + hd;
  const float* q2 = q + 2 * hd;
  const float* q3 = q + 3 * hd;
  VF kv = hn::LoadU(d, k + o);
  VF a0 = hn::Mul(hn::Set(d, q0[0]), kv), a1 = hn::Mul(hn::Set(d, q1[0]), kv);
  VF a2 = hn::Mul(hn::Set(d, q2[0]), kv), a3 = hn::Mul(hn::Set(d, q3[0]), kv);
  for (int64_t dd = 1; dd < hd; ++dd) {
    kv = hn::LoadU(d, k + dd * kBlock + o);
    a0 = hn::MulAdd(hn::Set(d, q0[dd]), kv, a0);
    a1 = hn::MulAdd(hn::Set(d, q1[dd]), kv, a1);
    a2 = hn::MulAdd(hn::Set(d, q2[dd]), kv, a2);
    a3 = hn::MulAdd(hn::Set(d, q3[dd]), kv, a3);
  }
  out[0] = FinishScore(d, a0, valid, low, cap2, o);
  out[1] = FinishScore(d, a1, valid, low, cap2, o);
  out[2] = FinishScore(d, a2, valid, low, cap2, o);
  out[3] = FinishScore(d, a3, valid, low, cap2, o);
}

// ScoreVec4 for two key blocks at once (k0, k1; whole blocks of kBlock lanes, o = 0): eight independent chains,
// enough to keep both FMA pipes busy through their latency; per head and block the same operations in the same
// order as ScoreVec4's.
HWY_INLINE void ScoreVec4x2(DF d, const float* HWY_RESTRICT q, int64_t hd, const float* HWY_RESTRICT k0,
                            const float* HWY_RESTRICT k1, int64_t valid0, int64_t low0, int64_t valid1, int64_t low1,
                            float cap2, VF* out0, VF* out1) {
  const float* q0 = q;
  const float* q1 = q + hd;
  const float* q2 = q + 2 * hd;
  const float* q3 = q + 3 * hd;
  VF kv0 = hn::LoadU(d, k0), kv1 = hn::LoadU(d, k1);
  VF w0 = hn::Set(d, q0[0]), w1 = hn::Set(d, q1[0]), w2 = hn::Set(d, q2[0]), w3 = hn::Set(d, q3[0]);
  VF a0 = hn::Mul(w0, kv0), a1 = hn::Mul(w1, kv0), a2 = hn::Mul(w2, kv0), a3 = hn::Mul(w3, kv0);
  VF b0 = hn::Mul(w0, kv1), b1 = hn::Mul(w1, kv1), b2 = hn::Mul(w2, kv1), b3 = hn::Mul(w3, kv1);
  for (int64_t dd = 1; dd < hd; ++dd) {
    kv0 = hn::LoadU(d, k0 + dd * kBlock);
    kv1 = hn::LoadU(d, k1 + dd * kBlock);
    w0 = hn::Set(d, q0[dd]);
    w1 = hn::Set(d, q1[dd]);
    w2 = hn::Set(d, q2[dd]);
    w3 = hn::Set(d, q3[dd]);
    a0 = hn::MulAdd(w0, kv0, a0);
    b0 = hn::MulAdd(w0, kv1, b0);
    a1 = hn::MulAdd(w1, kv0, a1);
    b1 = hn::MulAdd(w1, kv1, b1);
    a2 = hn::MulAdd(w2, kv0, a2);
    b2 = hn::MulAdd(w2, kv1, b2);
    a3 = hn::MulAdd(w3, kv0, a3);
    b3 = hn::MulAdd(w3, kv1, b3);
  }
  out0[0] = FinishScore(d, a0, valid0, low0, cap2, 0);
  out0[1] = FinishScore(d, a1, valid0, low0, cap2, 0);
  out0[2] = FinishScore(d, a2, valid0, low0, cap2, 0);
  out0[3] = FinishScore(d, a3, valid0, low0, cap2, 0);
  out1[0] = FinishScore(d, b0, valid1, low1, cap2, 0);
  out1[1] = FinishScore(d, b1, valid1, low1, cap2, 0);
  out1[2] = FinishScore(d, b2, valid1, low1, cap2, 0);
  out1[3] = FinishScore(d, b3, valid1, low1, cap2, 0);
}

// Scores of `heads` query heads (qs [heads, hd]) against key blocks [cb0, b1) of one KV head, the last block
// holding last_valid keys: s[r * kAttendChunkKeys + (b - cb0) * 8 + l]; each head's maximum into maxes[r].
// cs != nullptr: every raw key block is rotated first (into rk, once for all heads). KM > 0: heads == KM
// known at compile time, so the running maxima stay in registers.
template <int HD, int KM>
HWY_INLINE void ScoreChunk(DF d, const float* HWY_RESTRICT qs, int64_t hd, int64_t heads, const float* HWY_RESTRICT kb,
                           const float* HWY_RESTRICT cs, int64_t half, float* HWY_RESTRICT rk, int64_t cb0,
                           int64_t b1, int64_t last_valid, const RowKeys& rows, float* HWY_RESTRICT s,
                           float* HWY_RESTRICT maxes) {
  constexpr size_t N = hn::MaxLanes(DF());
  constexpr int64_t kHeads = KM > 0 ? KM : kMaxHeads;
  VF mx[kHeads];
  const int64_t nh = KM > 0 ? KM : heads;
  for (int64_t r = 0; r < nh; ++r) mx[r] = hn::Set(d, kMinusInf);
  for (int64_t b = cb0; b < b1; ++b) {
    if constexpr (KM == 0 && N == static_cast<size_t>(kBlock)) {
      // Two whole blocks at a time for four heads at a time (raw keys only: a rotated block has one buffer).
      if (cs == nullptr && b + 1 < b1 && heads >= 4) {
        const int64_t valid1 = b + 2 == b1 ? last_valid : kBlock;
        const int64_t low0 = b == rows.lo_block ? rows.lo_lane : 0;
        const int64_t low1 = b + 1 == rows.lo_block ? rows.lo_lane : 0;
        const float* k0 = kb + b * hd * kBlock;
        const float* k1 = k0 + hd * kBlock;
        float* sb0 = s + (b - cb0) * kBlock;
        int64_t r = 0;
        for (; r + 4 <= heads; r += 4) {
          VF v0[4], v1[4];
          ScoreVec4x2(d, qs + r * hd, hd, k0, k1, kBlock, low0, valid1, low1, rows.cap2, v0, v1);
          for (int64_t j = 0; j < 4; ++j) {
            hn::StoreU(v0[j], d, sb0 + (r + j) * kernels::kAttendChunkKeys);
            hn::StoreU(v1[j], d, sb0 + kBlock + (r + j) * kernels::kAttendChunkKeys);
            mx[r + j] = hn::Max(hn::Max(mx[r + j], v0[j]), v1[j]);
          }
        }
        for (; r < heads; ++r) {
          const VF v0 = ScoreVec<HD>(d, qs + r * hd, hd, k0, kBlock, low0, rows.cap2, 0);
          const VF v1 = ScoreVec<HD>(d, qs + r * hd, hd, k1, valid1, low1, rows.cap2, 0);
          hn::StoreU(v0, d, sb0 + r * kernels::kAttendChunkKeys);
          hn::StoreU(v1, d, sb0 + kBlock + r * kernels::kAttendChunkKeys);
          mx[r] = hn::Max(hn::Max(mx[r], v0), v1);
        }
        ++b;  // and the loop's own step: two blocks
        continue;
      }
    }
    const int64_t valid = b + 1 == b1 ? last_valid : kBlock;
    const int64_t low = b == rows.lo_block ? rows.lo_lane : 0;
    const float* k = kb + b * hd * kBlock;
    if (cs != nullptr) {
      RotateBlock(d, k, cs + b * 2 * half * kBlock, half, hd, rk);
      k = rk;
    }
    float* sb = s + (b - cb0) * kBlock;
    for (size_t o = 0; o < static_cast<size_t>(kBlock); o += N) {
      if constexpr (KM > 0) {
        HWY_UNROLL(8)
        for (int r = 0; r < KM; ++r) {
          const VF v = ScoreVec<HD>(d, qs + r * hd, hd, k, valid, low, rows.cap2, o);
          hn::StoreU(v, d, sb + r * kernels::kAttendChunkKeys + static_cast<int64_t>(o));
          mx[r] = hn::Max(mx[r], v);
        }
      } else {
        int64_t r = 0;
        for (; r + 4 <= heads; r += 4) {
          VF v[4];
          ScoreVec4(d, qs + r * hd, hd, k, valid, low, rows.cap2, o, v);
          for (int64_t j = 0; j < 4; ++j) {
            hn::StoreU(v[j], d, sb + (r + j) * kernels::kAttendChunkKeys + static_cast<int64_t>(o));
            mx[r + j] = hn::Max(mx[r + j], v[j]);
          }
        }
        for (; r < heads; ++r) {
          const VF v = ScoreVec<HD>(d, qs + r * hd, hd, k, valid, low, rows.cap2, o);
          hn::StoreU(v, d, sb + r * kernels::kAttendChunkKeys + static_cast<int64_t>(o));
          mx[r] = hn::Max(mx[r], v);
        }
      }
    }
  }
  for (int64_t r = 0; r < nh; ++r) maxes[r] = hn::GetLane(hn::MaxOfLanes(d, mx[r]));
}

// Online-softmax rescale of one head-row for a chunk whose maximum is chunk_max: the running maximum m moves up
// to it and what earlier chunks summed (l, acc [hd, kBlock]) is multiplied by 2^(m_old - m_new) < 1.
HWY_INLINE void Rescale(DF d, float chunk_max, int64_t hd, float* HWY_RESTRICT m, float* HWY_RESTRICT l,
                        float* HWY_RESTRICT acc) {
  constexpr size_t N = hn::MaxLanes(DF());
  if (chunk_max > *m) {
    if (*m != kMinusInf) {  // rescale what earlier chunks summed: 2^(m_old - m_new) < 1
      const VF alpha = hn::Set(d, Exp2One(*m - chunk_max));
      for (int64_t i = 0; i < kBlock; i += static_cast<int64_t>(N)) hn::StoreU(hn::Mul(hn::LoadU(d, l + i), alpha), d, l + i);
      for (int64_t i = 0; i < hd * kBlock; i += static_cast<int64_t>(N)) {
        hn::StoreU(hn::Mul(hn::LoadU(d, acc + i), alpha), d, acc + i);
      }
    }
    *m = chunk_max;
  }
}

// The weights e = 2^(s - m) of one head-row's keys in blocks [b0, b1) (scores s relative to block b0; the last
// block holding last_valid keys, keys before the row's window zero) into e_all, and their lane sums added to l.
HWY_INLINE void Weights(DF d, const float* HWY_RESTRICT s, float m, int64_t b0, int64_t b1, int64_t last_valid,
                        const RowKeys& rows, float* HWY_RESTRICT l, float* HWY_RESTRICT e_all) {
  constexpr size_t N = hn::MaxLanes(DF());
  constexpr size_t kSub = static_cast<size_t>(kBlock) / N;
  const VF mm = hn::Set(d, m);
  for (int64_t b = b0; b < b1; ++b) {
    const float* sb = s + (b - b0) * kBlock;
    for (size_t o = 0; o < kSub; ++o) {
      VF e = Exp2(d, hn::Sub(hn::LoadU(d, sb + o * N), mm));
      if (b + 1 == b1 && last_valid < kBlock) e = hn::IfThenElseZero(ValidLanes(d, last_valid, o * N), e);
      if (b == rows.lo_block && rows.lo_lane > 0) e = hn::IfThenZeroElse(ValidLanes(d, rows.lo_lane, o * N), e);
      hn::StoreU(hn::Add(hn::LoadU(d, l + o * N), e), d, l + o * N);
      hn::Store(e, d, e_all + (b - b0) * kBlock + static_cast<int64_t>(o * N));
    }
  }
}

// Online-softmax update and weighted sum of values for one head-row over blocks [b0, b1) of the chunk
// (scores s, relative to block b0), the last block holding `last_valid` keys.
template <int HD>
HWY_INLINE void Accumulate(DF d, const float* HWY_RESTRICT s, float chunk_max, const float* HWY_RESTRICT vb,
                           int64_t hd, int64_t b0, int64_t b1, int64_t last_valid, const RowKeys& rows,
                           float* HWY_RESTRICT m, float* HWY_RESTRICT l, float* HWY_RESTRICT acc) {
  constexpr size_t N = hn::MaxLanes(DF());
  constexpr size_t kSub = static_cast<size_t>(kBlock) / N;
  Rescale(d, chunk_max, hd, m, l, acc);
  if constexpr (HD > 0) {
    const VF mm = hn::Set(d, *m);
    VF a[HD * kSub];
    VF lv[kSub];
    for (size_t o = 0; o < kSub; ++o) {
      lv[o] = hn::LoadU(d, l + o * N);
      for (int dd = 0; dd < HD; ++dd) a[dd * kSub + o] = hn::LoadU(d, acc + dd * kBlock + o * N);
    }
    for (int64_t b = b0; b < b1; ++b) {
      const float* v = vb + b * HD * kBlock;
      const float* sb = s + (b - b0) * kBlock;
      for (size_t o = 0; o < kSub; ++o) {
        VF e = Exp2(d, hn::Sub(hn::LoadU(d, sb + o * N), mm));
        if (b + 1 == b1 && last_valid < kBlock) e = hn::IfThenElseZero(ValidLanes(d, last_valid, o * N), e);
        if (b == rows.lo_block && rows.lo_lane > 0) e = hn::IfThenZeroElse(ValidLanes(d, rows.lo_lane, o * N), e);
        lv[o] = hn::Add(lv[o], e);
        HWY_UNROLL(16)
        for (int dd = 0; dd < HD; ++dd) {
          a[dd * kSub + o] = hn::MulAdd(e, hn::LoadU(d, v + dd * kBlock + o * N), a[dd * kSub + o]);
        }
      }
    }
    for (size_t o = 0; o < kSub; ++o) {
      hn::StoreU(lv[o], d, l + o * N);
      for (int dd = 0; dd < HD; ++dd) hn::StoreU(a[dd * kSub + o], d, acc + dd * kBlock + o * N);
    }
  } else {
    // The weights e of the range's keys once (and their lane sums), then the channels kGroup at a time with their
    // accumulators in registers over all blocks: per channel and lane the same sum in the same block order.
    constexpr int64_t kGroup = 8;
    HWY_ALIGN float e_all[kernels::kAttendChunkKeys];
    Weights(d, s, *m, b0, b1, last_valid, rows, l, e_all);
    int64_t c0 = 0;
    for (; c0 + kGroup <= hd; c0 += kGroup) {
      VF a[kGroup * kSub];
      for (int64_t c = 0; c < kGroup; ++c) {
        for (size_t o = 0; o < kSub; ++o) a[c * kSub + o] = hn::LoadU(d, acc + (c0 + c) * kBlock + o * N);
      }
      for (int64_t b = b0; b < b1; ++b) {
        const float* v = vb + (b * hd + c0) * kBlock;
        for (size_t o = 0; o < kSub; ++o) {
          const VF e = hn::Load(d, e_all + (b - b0) * kBlock + static_cast<int64_t>(o * N));
          HWY_UNROLL(8)
          for (int64_t c = 0; c < kGroup; ++c) {
            a[c * kSub + o] = hn::MulAdd(e, hn::LoadU(d, v + c * kBlock + o * N), a[c * kSub + o]);
          }
        }
      }
      for (int64_t c = 0; c < kGroup; ++c) {
        for (size_t o = 0; o < kSub; ++o) hn::StoreU(a[c * kSub + o], d, acc + (c0 + c) * kBlock + o * N);
      }
    }
    for (int64_t b = b0; b < b1 && c0 < hd; ++b) {  // channels past the last whole group
      const float* v = vb + b * hd * kBlock;
      for (size_t o = 0; o < kSub; ++o) {
        const VF e = hn::Load(d, e_all + (b - b0) * kBlock + static_cast<int64_t>(o * N));
        for (int64_t dd = c0; dd < hd; ++dd) {
          float* ad = acc + dd * kBlock + o * N;
          hn::StoreU(hn::MulAdd(e, hn::LoadU(d, v + dd * kBlock + o * N), hn::LoadU(d, ad)), d, ad);
        }
      }
    }
  }
}

// Accumulate (generic head_dim) for four consecutive head-rows of one KV group at once: each head's rescale,
// weights and lane sums as Accumulate's, then the weighted sums of values with every value vector loaded once for
// the four heads (a chunk's values are read from L2 a quarter as often). Per head, channel and lane the same
// operations in the same block order as Accumulate: the same bits.
HWY_INLINE void Accumulate4(DF d, const float* HWY_RESTRICT s, const float* chunk_max, const float* HWY_RESTRICT vb,
                            int64_t hd, int64_t b0, int64_t b1, int64_t last_valid, const RowKeys& rows,
                            float* HWY_RESTRICT m, float* HWY_RESTRICT l, float* HWY_RESTRICT acc) {
  constexpr size_t N = hn::MaxLanes(DF());
  constexpr size_t kSub = static_cast<size_t>(kBlock) / N;
  constexpr int64_t kGroup = kSub >= 4 ? 1 : static_cast<int64_t>(4 / kSub);  // channels per pass: 16 vectors
  HWY_ALIGN float e_all[4][kernels::kAttendChunkKeys];
  for (int64_t r = 0; r < 4; ++r) {
    Rescale(d, chunk_max[r], hd, m + r, l + r * kBlock, acc + r * hd * kBlock);
    Weights(d, s + r * kernels::kAttendChunkKeys, m[r], b0, b1, last_valid, rows, l + r * kBlock, e_all[r]);
  }
  const int64_t head_stride = hd * kBlock;
  int64_t c0 = 0;
  for (; c0 + kGroup <= hd; c0 += kGroup) {
    VF a[4 * kGroup * kSub];
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t c = 0; c < kGroup; ++c) {
        for (size_t o = 0; o < kSub; ++o) {
          a[(r * kGroup + c) * kSub + o] = hn::LoadU(d, acc + r * head_stride + (c0 + c) * kBlock + o * N);
        }
      }
    }
    for (int64_t b = b0; b < b1; ++b) {
      const float* v = vb + (b * hd + c0) * kBlock;
      const int64_t eo = (b - b0) * kBlock;
      for (size_t o = 0; o < kSub; ++o) {
        const VF e0 = hn::Load(d, e_all[0] + eo + static_cast<int64_t>(o * N));
        const VF e1 = hn::Load(d, e_all[1] + eo + static_cast<int64_t>(o * N));
        const VF e2 = hn::Load(d, e_all[2] + eo + static_cast<int64_t>(o * N));
        const VF e3 = hn::Load(d, e_all[3] + eo + static_cast<int64_t>(o * N));
        HWY_UNROLL(4)
        for (int64_t c = 0; c < kGroup; ++c) {
          const VF vv = hn::LoadU(d, v + c * kBlock + o * N);
          a[(0 * kGroup + c) * kSub + o] = hn::MulAdd(e0, vv, a[(0 * kGroup + c) * kSub + o]);
          a[(1 * kGroup + c) * kSub + o] = hn::MulAdd(e1, vv, a[(1 * kGroup + c) * kSub + o]);
          a[(2 * kGroup + c) * kSub + o] = hn::MulAdd(e2, vv, a[(2 * kGroup + c) * kSub + o]);
          a[(3 * kGroup + c) * kSub + o] = hn::MulAdd(e3, vv, a[(3 * kGroup + c) * kSub + o]);
        }
      }
    }
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t c = 0; c < kGroup; ++c) {
        for (size_t o = 0; o < kSub; ++o) {
          hn::StoreU(a[(r * kGroup + c) * kSub + o], d, acc + r * head_stride + (c0 + c) * kBlock + o * N);
        }
      }
    }
  }
  for (int64_t b = b0; b < b1 && c0 < hd; ++b) {  // channels past the last whole group
    const float* v = vb + b * hd * kBlock;
    for (int64_t r = 0; r < 4; ++r) {
      for (size_t o = 0; o < kSub; ++o) {
        const VF e = hn::Load(d, e_all[r] + (b - b0) * kBlock + static_cast<int64_t>(o * N));
        for (int64_t dd = c0; dd < hd; ++dd) {
          float* ad = acc + r * head_stride + dd * kBlock + o * N;
          hn::StoreU(hn::MulAdd(e, hn::LoadU(d, v + dd * kBlock + o * N), hn::LoadU(d, ad)), d, ad);
        }
      }
    }
  }
}

template <int HD>
void AttendTileT(const AttendTileArgs& a, const TileState& st) {
  const DF d;
  const int64_t hd = HD > 0 ? HD : a.head_dim;
  const int64_t row_heads = a.n_groups * a.kv_mul;  // query heads of one row in this call
  const int64_t n_hr = a.n_rows * row_heads;
  const float qscale = a.scale * kLog2e;
  for (int64_t i = 0; i < a.n_rows; ++i) {
    for (int64_t x = 0; x < row_heads * hd; ++x) st.qs[i * row_heads * hd + x] = a.q[i * a.q_stride + x] * qscale;
  }
  std::fill(st.m, st.m + n_hr, kMinusInf);
  std::fill(st.l, st.l + n_hr * kBlock, 0.0f);
  std::fill(st.acc, st.acc + n_hr * hd * kBlock, 0.0f);
  const int64_t nb_all = (a.pos0 + a.n_rows + kBlock - 1) / kBlock;
  float maxes[kMaxHeads];
  const float cap2 = a.softcap > 0.0f ? a.softcap * kLog2e : 0.0f;
  // With a window, chunks wholly below the lowest row's first key are skipped.
  const int64_t first_key = a.window > 0 ? std::max<int64_t>(0, a.pos0 + 1 - a.window) : 0;
  for (int64_t cb0 = (first_key / kBlock) / kChunkBlocks * kChunkBlocks; cb0 < nb_all; cb0 += kChunkBlocks) {
    const int64_t cb1 = std::min(cb0 + kChunkBlocks, nb_all);
    for (int64_t i = 0; i < a.n_rows; ++i) {
      const int64_t n_keys = a.pos0 + i + 1;
      const int64_t nb_row = (n_keys + kBlock - 1) / kBlock;
      if (nb_row <= cb0) continue;
      const int64_t lo = a.window > 0 ? std::max<int64_t>(0, n_keys - a.window) : 0;  // the row's first key
      const RowKeys rows{lo / kBlock, lo % kBlock, cap2};
      const int64_t b_start = std::max(cb0, rows.lo_block);
      const int64_t b1 = std::min(cb1, nb_row);
      if (b_start >= b1) continue;
      const int64_t last_valid = b1 == nb_row ? n_keys - (nb_row - 1) * kBlock : kBlock;
      const float* cs = a.cs != nullptr ? a.cs[i] : nullptr;
      for (int64_t g = 0; g < a.n_groups; ++g) {
        const float* kb = a.kb + g * a.group_stride;
        const float* vb = a.vb + g * a.group_stride;
        for (int64_t r0 = 0; r0 < a.kv_mul; r0 += kMaxHeads) {
          const int64_t heads = std::min(kMaxHeads, a.kv_mul - r0);
          const int64_t hr0 = i * row_heads + g * a.kv_mul + r0;  // first head-row of this pass
          const float* qs = st.qs + hr0 * hd;
          if (heads == 2) {
            ScoreChunk<HD, 2>(d, qs, hd, heads, kb, cs, a.half, st.rk, b_start, b1, last_valid, rows, st.s, maxes);
          } else if (heads == 1) {
            ScoreChunk<HD, 1>(d, qs, hd, heads, kb, cs, a.half, st.rk, b_start, b1, last_valid, rows, st.s, maxes);
          } else {
            ScoreChunk<HD, 0>(d, qs, hd, heads, kb, cs, a.half, st.rk, b_start, b1, last_valid, rows, st.s, maxes);
          }
          int64_t r = 0;
          if constexpr (HD == 0) {  // four heads at a time share each value load
            for (; r + 4 <= heads; r += 4) {
              const int64_t hr = hr0 + r;
              Accumulate4(d, st.s + r * kernels::kAttendChunkKeys, maxes + r, vb, hd, b_start, b1, last_valid, rows,
                          st.m + hr, st.l + hr * kBlock, st.acc + hr * hd * kBlock);
            }
          }
          for (; r < heads; ++r) {
            const int64_t hr = hr0 + r;
            Accumulate<HD>(d, st.s + r * kernels::kAttendChunkKeys, maxes[r], vb, hd, b_start, b1, last_valid, rows,
                           st.m + hr, st.l + hr * kBlock, st.acc + hr * hd * kBlock);
          }
        }
      }
    }
  }
  constexpr size_t N = hn::MaxLanes(DF());
  for (int64_t i = 0; i < a.n_rows; ++i) {
    for (int64_t r = 0; r < row_heads; ++r) {
      const int64_t hr = i * row_heads + r;
      VF lv = hn::LoadU(d, st.l + hr * kBlock);
      for (size_t o = N; o < static_cast<size_t>(kBlock); o += N) lv = hn::Add(lv, hn::LoadU(d, st.l + hr * kBlock + o));
      const float sum = hn::GetLane(hn::SumOfLanes(d, lv));
      const float inv = 1.0f / sum;
      if (a.lse != nullptr) a.lse[i * a.lse_stride + r] = st.m[hr] + std::log2(sum);
      float* out = a.out + i * a.out_stride + r * hd;
      for (int64_t dd = 0; dd < hd; ++dd) {
        const float* ad = st.acc + (hr * hd + dd) * kBlock;
        VF v = hn::LoadU(d, ad);
        for (size_t o = N; o < static_cast<size_t>(kBlock); o += N) v = hn::Add(v, hn::LoadU(d, ad + o));
        out[dd] = hn::GetLane(hn::SumOfLanes(d, v)) * inv;
      }
    }
  }
}

void AttendTileImpl(const AttendTileArgs& a, float* scratch) {
  const int64_t hd = a.head_dim, n_hr = a.n_rows * a.n_groups * a.kv_mul;
  TileState st;
  st.m = scratch;
  st.l = st.m + n_hr;
  st.acc = st.l + n_hr * kBlock;
  st.qs = st.acc + n_hr * hd * kBlock;
  st.s = st.qs + n_hr * hd;
  st.rk = st.s + std::min(kMaxHeads, a.kv_mul) * kernels::kAttendChunkKeys;
  switch (hd) {  // stories260K's 8 (and 16): unrolled dot products, value accumulators in registers
    case 8: return AttendTileT<8>(a, st);
    case 16: return AttendTileT<16>(a, st);
    default: return AttendTileT<0>(a, st);
  }
}

// ---- backward (training) -----------------------------------------------------------------------------------

using kernels::AttendTileBackwardArgs;

constexpr float kLn2 = 0.693147180559945309f;

// Dot product of one key-block sub-vector (lanes o .. o + N of 8) with a broadcast row x [hd]: sum_d x[d] kv[d].
template <int HD>
HWY_INLINE VF BlockDot(DF d, const float* HWY_RESTRICT x, int64_t hd, const float* HWY_RESTRICT kv, size_t o) {
  VF acc = hn::Mul(hn::Set(d, x[0]), hn::LoadU(d, kv + o));
  const int64_t n = HD > 0 ? HD : hd;
  HWY_UNROLL(16)
  for (int64_t dd = 1; dd < n; ++dd) acc = hn::MulAdd(hn::Set(d, x[dd]), hn::LoadU(d, kv + dd * kBlock + o), acc);
  return acc;
}

// Backward of one tile. KM > 0: kv_mul known at compile time; with HD > 0 and KM * HD <= 16 the dq lane
// accumulators of the row live in registers (kRegs), else in scratch.
template <int HD, int KM>
void AttendTileBackwardT(const AttendTileBackwardArgs& a, float* scratch) {
  const DF d;
  constexpr size_t N = hn::MaxLanes(DF());
  constexpr size_t kSub = static_cast<size_t>(kBlock) / N;
  constexpr bool kRegs = HD > 0 && KM > 0 && HD * KM <= 16 && kSub == 1;
  const int64_t hd = HD > 0 ? HD : a.head_dim;
  const int64_t km = KM > 0 ? KM : a.kv_mul;
  const float qscale = a.scale * kLog2e;
  // scratch: qs [km, hd] | go [km, hd] | lse, dsum [km] each | dq lanes [km, hd, 8] | rk, ck [hd, 8] each
  float* qs = scratch;
  float* go = qs + km * hd;
  float* lse = go + km * hd;
  float* dsum = lse + km;
  float* dqm = dsum + km;
  float* rk = dqm + km * hd * kBlock;
  float* ck = rk + hd * kBlock;
  VF dqv[kRegs ? KM * HD : 1];
  VF p[KM > 0 ? KM : kMaxHeads];
  VF ds[KM > 0 ? KM : kMaxHeads];
  for (int64_t i = 0; i < a.n_rows; ++i) {
    const int64_t n_keys = a.pos0 + i + 1;
    const int64_t nb = (n_keys + kBlock - 1) / kBlock;
    const int64_t last_valid = n_keys - (nb - 1) * kBlock;
    const float* cs = a.cs != nullptr ? a.cs[i] : nullptr;
    for (int64_t r = 0; r < km; ++r) {
      const float* q = a.q + i * a.q_stride + r * hd;
      const float* o = a.out + i * a.out_stride + r * hd;
      const float* g = a.dout + i * a.dout_stride + r * hd;
      float dsr = 0.0f;
      for (int64_t x = 0; x < hd; ++x) {
        qs[r * hd + x] = q[x] * qscale;
        go[r * hd + x] = g[x];
        dsr += g[x] * o[x];
      }
      lse[r] = a.lse[i * a.lse_stride + r];
      dsum[r] = dsr;
    }
    if constexpr (kRegs) {
      for (int x = 0; x < KM * HD; ++x) dqv[x] = hn::Zero(d);
    } else {
      std::fill(dqm, dqm + km * hd * kBlock, 0.0f);
    }
    for (int64_t b = 0; b < nb; ++b) {
      const float* k = a.kb + b * hd * kBlock;
      const float* cb = cs != nullptr ? cs + b * 2 * a.half * kBlock : nullptr;
      if (cb != nullptr) {
        RotateBlock(d, k, cb, a.half, hd, rk);
        k = rk;
      }
      const float* v = a.vb + b * hd * kBlock;
      float* dk = a.dkb + b * hd * kBlock;
      float* dv = a.dvb + b * hd * kBlock;
      const bool partial = b + 1 == nb && last_valid < kBlock;
      for (size_t o = 0; o < kSub; ++o) {
        const size_t off = o * N;
        // weights and dS' = P (dP - D) ln 2 of every head for these lanes
        for (int64_t r = 0; r < km; ++r) {
          VF pr = Exp2(d, hn::Sub(BlockDot<HD>(d, qs + r * hd, hd, k, off), hn::Set(d, lse[r])));
          if (partial) pr = hn::IfThenElseZero(ValidLanes(d, last_valid, off), pr);
          const VF dp = BlockDot<HD>(d, go + r * hd, hd, v, off);
          p[r] = pr;
          ds[r] = hn::Mul(hn::Mul(pr, hn::Sub(dp, hn::Set(d, dsum[r]))), hn::Set(d, kLn2));
        }
        // dv += sum_r P_r dout_r;  dk += sum_r dS'_r qs_r (= scale * sum dS q);  dq lanes += dS'_r k
        HWY_UNROLL(16)
        for (int64_t x = 0; x < hd; ++x) {
          const size_t at = static_cast<size_t>(x * kBlock) + off;
          VF dvx = hn::LoadU(d, dv + at);
          VF ckx = cb != nullptr ? hn::Zero(d) : hn::LoadU(d, dk + at);
          const VF kx = hn::LoadU(d, k + at);
          for (int64_t r = 0; r < km; ++r) {
            dvx = hn::MulAdd(p[r], hn::Set(d, go[r * hd + x]), dvx);
            ckx = hn::MulAdd(ds[r], hn::Set(d, qs[r * hd + x]), ckx);
            if constexpr (kRegs) {
              dqv[r * HD + x] = hn::MulAdd(ds[r], kx, dqv[r * HD + x]);
            } else {
              float* dq = dqm + (r * hd + x) * kBlock + off;
              hn::StoreU(hn::MulAdd(ds[r], kx, hn::LoadU(d, dq)), d, dq);
            }
          }
          hn::StoreU(dvx, d, dv + at);
          if (cb != nullptr) {
            hn::StoreU(ckx, d, ck + at);
          } else {
            hn::StoreU(ckx, d, dk + at);
          }
        }
        if (cb != nullptr) {  // carry the rotated-frame gradient back to the raw key: R^T per interleaved pair
          const float* sn = cb + a.half * kBlock;
          for (int64_t pi = 0; pi < a.half; ++pi) {
            const size_t ia = static_cast<size_t>(2 * pi * kBlock) + off, ib = ia + kBlock;
            const VF ga = hn::LoadU(d, ck + ia), gb = hn::LoadU(d, ck + ib);
            const VF c = hn::LoadU(d, cb + pi * kBlock + off), sv = hn::LoadU(d, sn + pi * kBlock + off);
            hn::StoreU(hn::Add(hn::LoadU(d, dk + ia), hn::MulAdd(ga, c, hn::Mul(gb, sv))), d, dk + ia);
            hn::StoreU(hn::Add(hn::LoadU(d, dk + ib), hn::MulSub(gb, c, hn::Mul(ga, sv))), d, dk + ib);
          }
          for (int64_t x = 2 * a.half; x < hd; ++x) {
            const size_t at = static_cast<size_t>(x * kBlock) + off;
            hn::StoreU(hn::Add(hn::LoadU(d, dk + at), hn::LoadU(d, ck + at)), d, dk + at);
          }
        }
      }
    }
    // dq_i += qscale * sum over lanes (dS' carries ln 2: scale * dS = qscale * dS')
    for (int64_t r = 0; r < km; ++r) {
      float* dq = a.dq + i * a.dq_stride + r * hd;
      for (int64_t x = 0; x < hd; ++x) {
        VF acc;
        if constexpr (kRegs) {
          acc = dqv[r * HD + x];
        } else {
          acc = hn::LoadU(d, dqm + (r * hd + x) * kBlock);
          for (size_t o = N; o < static_cast<size_t>(kBlock); o += N) {
            acc = hn::Add(acc, hn::LoadU(d, dqm + (r * hd + x) * kBlock + o));
          }
        }
        dq[x] += hn::GetLane(hn::SumOfLanes(d, acc)) * qscale;
      }
    }
  }
}

void AttendTileBackwardImpl(const AttendTileBackwardArgs& a, float* scratch) {
  if (a.head_dim == 8 && a.kv_mul == 2) return AttendTileBackwardT<8, 2>(a, scratch);
  if (a.head_dim == 8 && a.kv_mul == 1) return AttendTileBackwardT<8, 1>(a, scratch);
  if (a.head_dim == 16 && a.kv_mul == 1) return AttendTileBackwardT<16, 1>(a, scratch);
  if (a.head_dim == 8) return AttendTileBackwardT<8, 0>(a, scratch);
  if (a.head_dim == 16) return AttendTileBackwardT<16, 0>(a, scratch);
  return AttendTileBackwardT<0, 0>(a, scratch);
}

const char* TargetImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <vector>

namespace posenc {
HWY_EXPORT(AttendTileImpl);
HWY_EXPORT(Exp2One);
HWY_EXPORT(TargetImpl);
HWY_EXPORT(AttendTileBackwardImpl);

namespace kernels {

void AttendTile(const AttendTileArgs& args) {
  const int64_t n_hr = args.n_rows * args.n_groups * args.kv_mul;
  const int64_t floats = n_hr * (1 + 8 + args.head_dim * 8 + args.head_dim) +
                         std::min<int64_t>(64, args.kv_mul) * kAttendChunkKeys + args.head_dim * 8;
  constexpr int64_t kStackFloats = 8192;  // 32 KiB: a tile of 16 rows x 2 heads of head_dim 8 fits
  if (floats <= kStackFloats) {
    alignas(64) float buf[kStackFloats];
    HWY_DYNAMIC_DISPATCH(AttendTileImpl)(args, buf);
  } else {
    thread_local std::vector<float> heap;
    if (static_cast<int64_t>(heap.size()) < floats) heap.resize(static_cast<size_t>(floats));
    HWY_DYNAMIC_DISPATCH(AttendTileImpl)(args, heap.data());
  }
}

void AttendTileBackward(const AttendTileBackwardArgs& args) {
  // scratch floats: qs, go [kv_mul, hd] | lse, dsum [kv_mul] | dq lanes [kv_mul, hd, 8] | rk, ck [hd, 8]
  // Groups of more than 64 query heads go in passes of 64 (the kernel keeps per-head vectors on the stack).
  constexpr int64_t kPass = 64;
  const int64_t km = std::min(args.kv_mul, kPass), hd = args.head_dim;
  const int64_t floats = 2 * km * hd + 2 * km + km * hd * 8 + 2 * hd * 8;
  thread_local std::vector<float> heap;
  if (static_cast<int64_t>(heap.size()) < floats) heap.resize(static_cast<size_t>(floats));
  for (int64_t r0 = 0; r0 < args.kv_mul; r0 += kPass) {
    AttendTileBackwardArgs a = args;
    a.kv_mul = std::min(kPass, args.kv_mul - r0);
    a.q += r0 * hd;
    a.out += r0 * hd;
    a.dout += r0 * hd;
    a.lse += r0;
    a.dq += r0 * hd;
    HWY_DYNAMIC_DISPATCH(AttendTileBackwardImpl)(a, heap.data());
  }
}

float Exp2Kernel(float x) { return HWY_DYNAMIC_DISPATCH(Exp2One)(x); }

const char* AttendTileTargetName() { return HWY_DYNAMIC_DISPATCH(TargetImpl)(); }

}  // namespace kernels
}  // namespace posenc
#endif  // HWY_ONCE
