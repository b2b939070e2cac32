// posenc demo learned: the hard end of the table and the toy training, against the closed form of gradient
// descent on a quadratic loss (each row's error shrinks by exactly 1 - lr c_p / n per step).
#include "posenc/demo/learned_demo.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/core/errors.h"
#include "posenc/demo/common.h"
#include "posenc/pe/learned.h"

namespace posenc::demo {
namespace {

TEST(LearnedDemo, PositionPastTheTableIsARangeErrorNamingIt) {
  const LearnedDemo demo = RunLearnedDemo();
  EXPECT_NE(demo.row_error.find("16"), std::string::npos) << demo.row_error;
  EXPECT_NE(demo.row_error.find("max_seq_len = 16"), std::string::npos) << demo.row_error;
  EXPECT_NE(demo.forward_error.find("offset = 12"), std::string::npos) << demo.forward_error;
  // the library call the demo reports really throws
  LearnedPositionalEmbedding pe(16, 8);
  EXPECT_THROW((void)pe.Row(16), RangeError);
  const std::string text = RenderLearnedDemo(demo);
  EXPECT_NE(text.find("RangeError: " + demo.row_error), std::string::npos);
}

TEST(LearnedDemo, VisitsCountRepeatedPositions) {
  const LearnedDemo demo = RunLearnedDemo();
  const std::vector<int64_t> expected = {2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(demo.visits, expected);
}

// The closed form: with e_p(0) = wpe0[p] - target[p], after k steps e_p(k) = (1 - lr c_p / n)^k e_p(0).
// float32 rounding per step and element: (out - target) and /n and lr*g each round once (3u relative to
// lr c e / n <= |e|), the subtraction once (u |w'|, |w'| <= |target| + |e| <= 1 + max|e0|); doubling a
// gradient is exact. The perturbation eta <= u (3 max|e0| + 1 + max|e0|) is contracted by <= 3/4 per step,
// so the accumulated error is at most eta / (1 - 3/4) = 4 eta.
double StepErrorBound(const LearnedDemo& demo) {
  double e0 = 0.0;
  for (size_t i = 0; i < demo.table_before.size(); ++i) {
    e0 = std::max(e0, std::fabs(static_cast<double>(demo.table_before[i]) - demo.target[i]));
  }
  return 4.0 * kF32Roundoff * (4.0 * e0 + 1.0);
}

TEST(LearnedDemo, TrainedRowsFollowTheClosedFormAndUnseenRowsNeverMove) {
  const LearnedDemo demo = RunLearnedDemo();
  const size_t d = static_cast<size_t>(demo.d_model);
  const double n = static_cast<double>(demo.position_ids.size());
  const double tol = StepErrorBound(demo);
  for (size_t p = 0; p < static_cast<size_t>(demo.max_seq_len); ++p) {
    const double rho = 1.0 - static_cast<double>(demo.learning_rate) * static_cast<double>(demo.visits[p]) / n;
    for (size_t c = 0; c < d; ++c) {
      const size_t i = p * d + c;
      if (demo.visits[p] == 0) {
        EXPECT_EQ(demo.table_after[i], demo.table_before[i]) << "row " << p;  // bit-identical
      } else {
        const double e0 = static_cast<double>(demo.table_before[i]) - demo.target[i];
        const double expected = demo.target[i] + std::pow(rho, demo.steps) * e0;
        EXPECT_NEAR(demo.table_after[i], expected, tol) << "row " << p << " channel " << c;
      }
    }
  }
  EXPECT_DOUBLE_EQ(0.5, 1.0 - 3.0 * 2.0 / 12.0);  // the shrink factors the demo prints
  EXPECT_DOUBLE_EQ(0.75, 1.0 - 3.0 * 1.0 / 12.0);
}

TEST(LearnedDemo, LossFollowsTheClosedForm) {
  const LearnedDemo demo = RunLearnedDemo();
  ASSERT_EQ(demo.loss.size(), static_cast<size_t>(demo.steps + 1));
  ASSERT_EQ(demo.loss_closed_form.size(), demo.loss.size());
  const size_t d = static_cast<size_t>(demo.d_model);
  const double n = static_cast<double>(demo.position_ids.size());
  const double eta = StepErrorBound(demo);
  for (int k = 0; k <= demo.steps; ++k) {
    // closed form recomputed here from the initial table
    double closed = 0.0, abs_sum = 0.0;
    for (int64_t p : demo.position_ids) {
      const double rho =
          1.0 - static_cast<double>(demo.learning_rate) * static_cast<double>(demo.visits[static_cast<size_t>(p)]) / n;
      for (size_t c = 0; c < d; ++c) {
        const size_t i = static_cast<size_t>(p) * d + c;
        const double e = std::pow(rho, k) * (static_cast<double>(demo.table_before[i]) - demo.target[i]);
        closed += e * e;
        abs_sum += std::fabs(e);
      }
    }
    closed /= 2.0 * n;
    EXPECT_NEAR(demo.loss_closed_form[static_cast<size_t>(k)], closed, 1e-12 * closed);
    // each element off by <= eta: |d loss| <= (1/(2n)) sum (2 |e| eta + eta^2)
    const double tol = (2.0 * abs_sum * eta + n * static_cast<double>(d) * eta * eta) / (2.0 * n) + 1e-12 * closed;
    EXPECT_NEAR(demo.loss[static_cast<size_t>(k)], closed, tol) << "step " << k;
    if (k > 0) {
      EXPECT_LT(demo.loss[static_cast<size_t>(k)], demo.loss[static_cast<size_t>(k - 1)]);
    }
  }
}

}  // namespace
}  // namespace posenc::demo
