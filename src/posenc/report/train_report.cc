#include "posenc/report/train_report.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

namespace posenc {

std::string FormatTrainRunReport(const TrainRunReport& r) {
  std::string s = fmt::format("model: {} ({})\nsplit: {}; {} training tokens, {} held-out tokens\n", r.model,
                              r.shape, r.split_rule, r.train_tokens, r.held_out_tokens);
  for (const std::string& note : r.notes) s += fmt::format("note: tokenizer: {}\n", note);
  s += fmt::format("RoPE method: {} (factor {}, L0 {}); ctx {}, batch {}, steps {}-{} of {}{}\n", r.method, r.factor,
                   r.original_ctx, r.ctx, r.batch, r.first_step + 1, r.steps_done, r.steps,
                   r.interrupted ? " (interrupted)" : "");
  if (!r.losses.empty()) s += fmt::format("training loss: first {:.4f}, last {:.4f}\n", r.losses.front(), r.losses.back());
  if (!r.held_out.empty()) {
    std::vector<int64_t> lens;
    for (const HeldOutPoint& p : r.held_out) {
      if (std::find(lens.begin(), lens.end(), p.ctx) == lens.end()) lens.push_back(p.ctx);
    }
    s += "\nheld-out perplexity\n| step |";
    for (int64_t L : lens) s += fmt::format(" L={} |", L);
    s += "\n|---:|";
    for (size_t i = 0; i < lens.size(); ++i) s += "---:|";
    int64_t row_step = -1;
    for (const HeldOutPoint& p : r.held_out) {
      if (p.step != row_step) {
        s += fmt::format("\n| {} |", p.step);
        row_step = p.step;
      }
      s += p.error.empty() ? fmt::format(" {:.3f} |", p.ppl) : std::string(" error |");
    }
    s += "\n";
    for (const HeldOutPoint& p : r.held_out) {
      if (!p.error.empty()) s += fmt::format("L={} at step {}: {}\n", p.ctx, p.step, p.error);
    }
  }
  s += fmt::format("\ncheckpoint: {}\nstate (to resume from): {}\nreport: {}\n",
                   r.checkpoints.empty() ? std::string("none") : r.checkpoints.back(), r.state_path, r.json_path);
  return s;
}

}  // namespace posenc
