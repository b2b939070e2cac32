// KV cache: storing rules, the two cache modes agreeing under a fixed table, and re-rotation of cached keys.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "posenc/attention/kv_cache.h"
#include "posenc/core/errors.h"
#include "test_util.h"
#include "posenc/rope/frequencies.h"

namespace posenc {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) { return testing::RandomNormal(n, seed); }

RopeParams Params(RopeType type, double factor) {
  RopeParams p;
  p.rope_type = type;
  p.head_dim = 8;
  if (type != RopeType::kDefault) p.factor = factor;
  if (type == RopeType::kYarn) p.original_max_position_embeddings = 16;
  return p;
}

constexpr int64_t kLayers = 2, kLen = 50, kKv = 2, kHd = 8;

TEST(KvCacheTest, StoreRulesAndErrors) {
  KvCache cache(KvCacheMode::kRotated, kLayers, 4, kKv, kHd);
  const std::vector<float> kv(kKv * kHd, 1.0f);
  EXPECT_THROW(cache.Store(0, 1, kv.data(), kv.data()), RangeError);  // position 0 not written yet
  cache.Store(0, 0, kv.data(), kv.data());
  cache.Store(1, 0, kv.data(), kv.data());
  EXPECT_EQ(cache.length(), 1);
  EXPECT_THROW(cache.Store(2, 1, kv.data(), kv.data()), RangeError);  // layer 2 of 2
  for (int64_t p = 1; p < 4; ++p) cache.Store(0, p, kv.data(), kv.data());
  EXPECT_THROW(cache.Store(0, 4, kv.data(), kv.data()), RangeError);  // max_seq_len 4
  EXPECT_THROW(KvCache(KvCacheMode::kRotated, 0, 4, kKv, kHd), ShapeError);
}

// Fills a cache with keys k_j (raw) for j < kLen, rotated by `table` if the mode says so.
KvCache Filled(KvCacheMode mode, const std::vector<float>& k, const std::vector<float>& v, const CosSinView& table) {
  KvCache cache(mode, kLayers, kLen, kKv, kHd);
  std::vector<float> key(kKv * kHd);
  for (int64_t j = 0; j < kLen; ++j) {
    for (int64_t l = 0; l < kLayers; ++l) {
      std::copy(k.begin() + (l * kLen + j) * kKv * kHd, k.begin() + (l * kLen + j + 1) * kKv * kHd, key.begin());
      if (mode == KvCacheMode::kRotated) {
        const int64_t row[1] = {j};
        ApplyRope(HeadsView::Contiguous(key.data(), 1, kKv, kHd), row, table, RopeLayout::kInterleaved);
      }
      cache.Store(l, j, key.data(), v.data() + (l * kLen + j) * kKv * kHd);
    }
  }
  return cache;
}

TEST(KvCacheTest, RotatedAndUnrotatedCachesAttendAlike) {
  std::vector<int64_t> pos(kLen);
  std::iota(pos.begin(), pos.end(), int64_t{0});
  const CosSinTable table = ComputeCosSin(ComputeRopeFrequencies(Params(RopeType::kYarn, 4.0)), pos);
  const std::vector<float> k = Random(kLayers * kLen * kKv * kHd, 1), v = Random(kLayers * kLen * kKv * kHd, 2);
  const KvCache rotated = Filled(KvCacheMode::kRotated, k, v, View(table));
  const KvCache unrotated = Filled(KvCacheMode::kUnrotated, k, v, View(table));
  const AttentionDims dims{4, kKv, kHd};
  const std::vector<float> q = Random(4 * kHd, 3);
  std::vector<float> a(4 * kHd), b(4 * kHd);
  AttentionScratch scratch;
  for (int64_t l = 0; l < kLayers; ++l) {
    AttendToCache(dims, rotated, l, kLen - 1, q.data(), View(table), RopeLayout::kInterleaved, 1.0f, a.data(), scratch);
    AttendToCache(dims, unrotated, l, kLen - 1, q.data(), View(table), RopeLayout::kInterleaved, 1.0f, b.data(),
                  scratch);
    // Same keys rotated by the same float32 table, at store time or at use: identical arithmetic.
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "layer " << l << " element " << i;
  }
  EXPECT_THROW(AttendToCache(dims, rotated, 0, kLen, q.data(), View(table), RopeLayout::kInterleaved, 1.0f,
                             a.data(), scratch),
               RangeError);
}

TEST(KvCacheTest, RerotateKeysEqualsRotatingWithTheNewTable) {
  std::vector<int64_t> pos(kLen);
  std::iota(pos.begin(), pos.end(), int64_t{0});
  // from: plain RoPE; to: YaRN s = 4 (attention factor 1.139 folded into cos/sin, so kInverse must undo a
  // non-unit scale too).
  const CosSinTable from = ComputeCosSin(ComputeRopeFrequencies(Params(RopeType::kDefault, 1.0)), pos);
  const CosSinTable to = ComputeCosSin(ComputeRopeFrequencies(Params(RopeType::kYarn, 4.0)), pos);
  const std::vector<float> k = Random(kLayers * kLen * kKv * kHd, 4), v = Random(kLayers * kLen * kKv * kHd, 5);
  KvCache cache = Filled(KvCacheMode::kRotated, k, v, View(from));
  RerotateKeys(cache, View(from), View(to), RopeLayout::kInterleaved);
  const KvCache want = Filled(KvCacheMode::kRotated, k, v, View(to));
  // Two float32 rotations (inverse, forward) instead of one: a few ulp of the key magnitude (~3).
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t i = 0; i < kLen * kKv * kHd; ++i) {
      ASSERT_NEAR(cache.keys(l)[i], want.keys(l)[i], 2e-6) << "layer " << l << " element " << i;
    }
  }
  KvCache raw = Filled(KvCacheMode::kUnrotated, k, v, View(from));
  EXPECT_THROW(RerotateKeys(raw, View(from), View(to), RopeLayout::kInterleaved), ConfigError);
}

}  // namespace
}  // namespace posenc
