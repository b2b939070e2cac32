// OpenBLAS's kernel selection: the levels of its core names, the rule that picks a core when OpenBLAS falls below
// the CPU, and the re-selection itself (through OpenBLAS's own DYNAMIC_ARCH code, checked by running sgemm on the
// kernels selected).
#include "posenc/blas/blas_core.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "posenc/blas/gemm.h"

namespace posenc {
namespace {

TEST(BlasCore, LevelsOfCoreNames) {
  EXPECT_EQ(OpenBlasCoreLevel("Prescott"), IsaLevel::kBaseline);
  EXPECT_EQ(OpenBlasCoreLevel("Nehalem"), IsaLevel::kBaseline);
  EXPECT_EQ(OpenBlasCoreLevel("Sandybridge"), IsaLevel::kAvx);
  EXPECT_EQ(OpenBlasCoreLevel("Haswell"), IsaLevel::kAvx2);
  EXPECT_EQ(OpenBlasCoreLevel("Zen"), IsaLevel::kAvx2);
  EXPECT_EQ(OpenBlasCoreLevel("SkylakeX"), IsaLevel::kAvx512);
  EXPECT_EQ(OpenBlasCoreLevel("cooperlake"), IsaLevel::kAvx512);
  EXPECT_EQ(OpenBlasCoreLevel("SapphireRapids"), IsaLevel::kAvx512);
  EXPECT_EQ(OpenBlasCoreLevel("unknown"), IsaLevel::kBaseline);
}

TEST(BlasCore, SelectsTheCpusLevelWhenOpenBlasFallsBelowIt) {
  // OpenBLAS 0.3.21 on an Intel Xeon it does not know (model 207) runs Prescott on an AVX-512 CPU.
  EXPECT_EQ(OpenBlasCoreToSelect("Prescott", IsaLevel::kAvx512, false), "SkylakeX");
  EXPECT_EQ(OpenBlasCoreToSelect("Haswell", IsaLevel::kAvx512, false), "SkylakeX");
  EXPECT_EQ(OpenBlasCoreToSelect("Prescott", IsaLevel::kAvx2, false), "Haswell");
  // Its own choice at the CPU's level (or above) is kept, and so is one the user made.
  EXPECT_EQ(OpenBlasCoreToSelect("SkylakeX", IsaLevel::kAvx512, false), "");
  EXPECT_EQ(OpenBlasCoreToSelect("Cooperlake", IsaLevel::kAvx512, false), "");
  EXPECT_EQ(OpenBlasCoreToSelect("Zen", IsaLevel::kAvx2, false), "");
  EXPECT_EQ(OpenBlasCoreToSelect("Prescott", IsaLevel::kBaseline, false), "");
  EXPECT_EQ(OpenBlasCoreToSelect("Prescott", IsaLevel::kAvx512, true), "");
}

TEST(BlasCore, StartLeavesNoKernelBelowTheCpuUnlessTheUserChoseIt) {
  const BlasCoreSelection& s = EnsureBlasCoreMatchesCpu();
  EXPECT_EQ(s.cpu, CpuIsaLevel());
  EXPECT_FALSE(s.detected.empty());
  if (!s.user_set && OpenBlasCoreLevel(s.detected) < s.cpu) {
    EXPECT_TRUE(s.switched) << "OpenBLAS chose " << s.detected << " and the selection did not take";
  }
  if (!s.user_set) {
    EXPECT_GE(OpenBlasCoreLevel(s.running), std::min(s.cpu, IsaLevel::kAvx512));
  }
  std::printf("OpenBLAS here: %s (%s); detected %s, cpu %s\n", DescribeBlas().c_str(), OpenBlasConfig().c_str(),
              s.detected.c_str(), std::string(IsaLevelName(s.cpu)).c_str());
}

// sgemm of a 37x29 by 29x41 product against float64, within gamma_29 sum |a b|.
void CheckSgemm() {
  const int64_t m = 37, n = 41, k = 29;
  std::vector<float> a(m * k), b(n * k), c(m * n);
  for (int64_t i = 0; i < m * k; ++i) a[i] = static_cast<float>((i * 7) % 11) - 5.0f;
  for (int64_t i = 0; i < n * k; ++i) b[i] = static_cast<float>((i * 5) % 13) * 0.25f - 1.5f;
  GemmNT(m, n, k, a.data(), k, b.data(), k, c.data(), n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, abs = 0;
      for (int64_t l = 0; l < k; ++l) {
        ref += static_cast<double>(a[i * k + l]) * b[j * k + l];
        abs += std::fabs(static_cast<double>(a[i * k + l]) * b[j * k + l]);
      }
      ASSERT_LE(std::fabs(c[i * n + j] - ref), 29 * 0x1p-24 * abs);
    }
  }
}

TEST(BlasCore, SwitchesKernelsThroughOpenBlasOwnSelection) {
  const std::string before = OpenBlasCoreName();
  if (!SwitchOpenBlasCore("Prescott")) GTEST_SKIP() << "this OpenBLAS has no DYNAMIC_ARCH selection";
  EXPECT_EQ(OpenBlasCoreName(), "Prescott");
  CheckSgemm();
  ASSERT_TRUE(SwitchOpenBlasCore(before));
  EXPECT_EQ(OpenBlasCoreName(), before);
  CheckSgemm();
}

}  // namespace
}  // namespace posenc
