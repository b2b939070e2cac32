#include "posenc/demo/learned_demo.h"

#include <fmt/format.h>

#include <cmath>

#include "posenc/core/errors.h"
#include "posenc/pe/learned.h"
#include "posenc/pe/sinusoidal.h"

namespace posenc::demo {
namespace {

// 1/(2n) sum_t |wpe[p_t] - target[p_t]|^2 in double; also fills dout = (out - target) / n.
double LossAndGrad(const LearnedPositionalEmbedding& pe, const std::vector<int64_t>& position_ids,
                   const std::vector<float>& target, std::vector<float>& dout) {
  const size_t n = position_ids.size(), d = static_cast<size_t>(pe.d_model());
  std::vector<float> out(n * d);
  LearnedPeForward(pe, position_ids, out);
  dout.assign(n * d, 0.0f);
  double loss = 0.0;
  for (size_t t = 0; t < n; ++t) {
    for (size_t c = 0; c < d; ++c) {
      const float y = out[t * d + c], want = target[static_cast<size_t>(position_ids[t]) * d + c];
      const double diff = static_cast<double>(y) - want;  // the reported loss in double
      loss += diff * diff;
      dout[t * d + c] = (y - want) / static_cast<float>(n);  // the gradient in float32, as training runs
    }
  }
  return loss / (2.0 * static_cast<double>(n));
}

std::vector<double> RowErrors(const LearnedPositionalEmbedding& pe, const std::vector<float>& target) {
  const size_t d = static_cast<size_t>(pe.d_model());
  std::vector<double> err(static_cast<size_t>(pe.max_seq_len()));
  for (size_t p = 0; p < err.size(); ++p) {
    double s = 0.0;
    for (size_t c = 0; c < d; ++c) {
      const double diff = static_cast<double>(pe.table()[p * d + c]) - target[p * d + c];
      s += diff * diff;
    }
    err[p] = std::sqrt(s);
  }
  return err;
}

}  // namespace

LearnedDemo RunLearnedDemo() {
  LearnedDemo demo;
  LearnedPositionalEmbedding pe(demo.max_seq_len, demo.d_model);
  InitLearnedPeNormal(pe, demo.init_seed);
  // the hard end of the table
  try {
    (void)pe.Row(demo.asked_position);
  } catch (const RangeError& e) {
    demo.row_error = e.what();
  }
  try {
    std::vector<float> out(static_cast<size_t>(8 * demo.d_model));
    LearnedPeForward(pe, /*offset=*/12, /*n_tokens=*/8, out);
  } catch (const RangeError& e) {
    demo.forward_error = e.what();
  }
  // toy training
  SinusoidalParams sp;
  sp.d_model = demo.d_model;
  std::vector<int64_t> all(static_cast<size_t>(demo.max_seq_len));
  for (size_t p = 0; p < all.size(); ++p) all[p] = static_cast<int64_t>(p);
  demo.target = SinusoidalTable(sp, all);
  demo.position_ids = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3};
  demo.visits.assign(static_cast<size_t>(demo.max_seq_len), 0);
  for (int64_t p : demo.position_ids) ++demo.visits[static_cast<size_t>(p)];
  demo.table_before.assign(pe.table().begin(), pe.table().end());
  demo.row_error_before = RowErrors(pe, demo.target);

  const double n = static_cast<double>(demo.position_ids.size());
  std::vector<float> dout, dtable(pe.table().size());
  for (int step = 0; step <= demo.steps; ++step) {
    const double loss = LossAndGrad(pe, demo.position_ids, demo.target, dout);
    demo.loss.push_back(loss);
    double closed = 0.0;
    for (size_t p = 0; p < demo.visits.size(); ++p) {
      const double c = static_cast<double>(demo.visits[p]);
      const double shrink = 1.0 - static_cast<double>(demo.learning_rate) * c / n;
      closed += c * std::pow(shrink, 2.0 * step) * demo.row_error_before[p] * demo.row_error_before[p];
    }
    demo.loss_closed_form.push_back(closed / (2.0 * n));
    if (step == demo.steps) break;
    std::fill(dtable.begin(), dtable.end(), 0.0f);  // backward accumulates: zero first (llm.c zero_grad)
    LearnedPeBackward(pe, demo.position_ids, dout, dtable);
    LearnedPeSgdStep(pe, dtable, demo.learning_rate);
  }
  demo.table_after.assign(pe.table().begin(), pe.table().end());
  demo.row_error_after = RowErrors(pe, demo.target);
  return demo;
}

std::string RenderLearnedDemo(const LearnedDemo& demo) {
  std::string out;
  out += "== learned: a trainable table wpe[max_seq_len, d_model] (GPT-2's wpe) ==\n\n";
  out += fmt::format(
      "A table of max_seq_len = {} rows (positions 0..{}), d_model = {}, GPT-2 init "
      "normal(0, 0.02).\n",
      demo.max_seq_len, demo.max_seq_len - 1, demo.d_model);
  out += fmt::format("Asking for row {}:\n  RangeError: {}\n", demo.asked_position, demo.row_error);
  out += fmt::format("A forward for 8 tokens after a KV cache of 12:\n  RangeError: {}\n", demo.forward_error);
  out +=
      "There is no row to return: the table never clamps or wraps. A longer context needs new rows,\n"
      "and new rows need training.\n\n";

  out += fmt::format("Training the table by gradient descent on a toy target (row p -> sinusoidal PE(p), d = {}):\n",
                     demo.d_model);
  out += fmt::format("  batch position_ids = [{}] (two sequences, lengths 8 and 4), n = {}\n",
                     fmt::join(demo.position_ids, ", "), demo.position_ids.size());
  out += fmt::format(
      "  loss = 1/(2n) sum_t |wpe[p_t] - target[p_t]|^2; backward scatter-adds (out - target)/n\n"
      "  into dwpe (positions 0..3 appear twice, so their gradient is doubled); SGD, lr = {}.\n",
      demo.learning_rate);
  out +=
      "  Closed form: row p's error shrinks by (1 - lr c_p / n) per step (c_p = visits): 1/2 for rows\n"
      "  0..3, 3/4 for rows 4..7, 1 for rows 8..15.\n";
  out += fmt::format("  {:>4}  {:>14}  {:>14}\n", "step", "loss", "closed form");
  for (size_t k = 0; k < demo.loss.size(); ++k) {
    out += fmt::format("  {:>4}  {:>14.8f}  {:>14.8f}\n", k, demo.loss[k], demo.loss_closed_form[k]);
  }
  out += "\n  |wpe[p] - target[p]| per row, before and after:\n";
  out += fmt::format("  {:>4}  {:>6}  {:>10}  {:>10}\n", "row", "visits", "before", "after");
  for (size_t p = 0; p < demo.row_error_before.size(); ++p) {
    out += fmt::format("  {:>4}  {:>6}  {:>10.6f}  {:>10.6f}{}\n", p, demo.visits[p], demo.row_error_before[p],
                       demo.row_error_after[p], demo.visits[p] == 0 ? "  (never seen: unchanged)" : "");
  }
  out +=
      "  Rows 8..15 got no gradient at all: a learned table knows only the positions it was trained on.\n"
      "  Rows past the longest training sequence stay at their random init, even inside max_seq_len.\n";
  return out;
}

}  // namespace posenc::demo
