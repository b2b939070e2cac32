// `posenc demo learned`: a learned position table has a hard end, and it only learns the rows it sees.
// Every number comes from posenc/pe/learned.h (forward, backward, SGD step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace posenc::demo {

/// Everything `posenc demo learned` prints.
///
/// Toy training: the table wpe[max_seq_len, d_model] (GPT-2 init, seed `init_seed`) learns the sinusoidal
/// table target[p] = PE(p) (d_model channels, Vaswani et al.) from one fixed batch of positions
/// `position_ids` (two sequences, of lengths 8 and 4: 0..7 and 0..3). Loss, in double:
///   loss = 1/(2 n) sum_t |wpe[position_ids[t]] - target[position_ids[t]]|^2,   n = n_tokens,
/// so dL/dout[t] = (out[t] - target[position_ids[t]]) / n; LearnedPeBackward scatter-adds it (a position seen
/// c_p times gets c_p of them) and LearnedPeSgdStep applies wpe -= learning_rate * dtable. Each row's error
/// then shrinks by exactly (1 - learning_rate c_p / n) per step, so
///   loss_k = 1/(2 n) sum_p c_p (1 - learning_rate c_p / n)^(2k) |e_p(0)|^2      (loss_closed_form)
/// and rows never seen (c_p = 0) never move.
struct LearnedDemo {
  int64_t max_seq_len = 16;  // rows: positions 0..15
  int64_t d_model = 8;
  uint64_t init_seed = 1;
  int64_t asked_position = 16;        // one past the last row
  std::string row_error;              // what() of the RangeError from Row(asked_position)
  std::string forward_error;          // what() of the RangeError from LearnedPeForward(offset 12, 8 tokens)
  std::vector<int64_t> position_ids;  // [n_tokens] = 0..7, 0..3
  std::vector<int64_t> visits;        // [max_seq_len]: c_p, how often position p is in the batch
  float learning_rate = 3.0f;         // with n = 12: rows 0..3 shrink by 1/2 per step, rows 4..7 by 3/4
  int steps = 10;
  std::vector<double> loss;              // [steps + 1]: loss before step 0, after step 1, ...
  std::vector<double> loss_closed_form;  // [steps + 1]
  std::vector<double> row_error_before;  // [max_seq_len]: |wpe[p] - target[p]| (L2) at init
  std::vector<double> row_error_after;   // [max_seq_len]: after `steps` steps
  std::vector<float> table_before;       // [max_seq_len, d_model]: the table at init
  std::vector<float> table_after;        // [max_seq_len, d_model]
  std::vector<float> target;             // [max_seq_len, d_model]: SinusoidalTable(d_model), positions 0..15
};

/// Runs the learned-PE demo (deterministic: InitLearnedPeNormal with init_seed, fixed batch).
/// Errors: none expected; the two RangeErrors are the demo's subject and are caught and recorded.
/// Source: karpathy/llm.c `encoder_forward` / `encoder_backward` (the wpe half); GPT-2 init.
LearnedDemo RunLearnedDemo();

/// The demo as terminal text.
std::string RenderLearnedDemo(const LearnedDemo& demo);

}  // namespace posenc::demo
