#include "option_flags.h"

namespace posenc {

const std::map<std::string_view, std::string_view>& OptionFlags() {
  static const std::map<std::string_view, std::string_view> flags = {
      {"add_bos", "--add-bos"},
      {"all_tokens", "--tokens all"},
      {"allow_unused_tensors", "--allow-unused-tensors"},
      {"batch", "--batch"},
      {"chunks", "--chunks"},
      {"compute", "--compute"},
      {"config", "--config"},
      {"config_path", "--config"},
      {"context_parallel", "--context-parallel"},
      {"context_split", "--context-split"},
      {"ctx", "--ctx"},
      {"depths", "--depths"},
      {"documents", "--documents"},
      {"eval_at", "--eval-at"},
      {"eval_ctx", "--eval-ctx"},
      {"eval_tokens", "--eval-tokens"},
      {"factor", "--factor"},
      {"grad_clip", "--grad-clip"},
      {"held_out_path", "--holdout"},
      {"kl_base_file", "--kl-baseline"},
      {"kl_base_method", "--kl-baseline"},
      {"lengths", "--lengths"},
      {"lr", "--lr"},
      {"max_new_tokens", "--max-new-tokens"},
      {"max_tokens", "--max-tokens"},
      {"method", "--method"},
      {"methods", "--methods"},
      {"min_doc_tokens", "--min-doc-tokens"},
      {"model_path", "--model"},
      {"n_pred", "--tokens"},
      {"out_path", "--out"},
      {"parse_special", "--parse-special"},
      {"protocol", "--protocol"},
      {"resume_path", "--resume"},
      {"reuse_identical_rows", "--no-reuse"},
      {"save_logits", "--save-logits"},
      {"seed", "--seed"},
      {"steps", "--steps"},
      {"stride", "--stride"},
      {"text_path", "--text"},
      {"threads", "--threads"},
      {"tokenizer_path", "--tokenizer"},
      {"trials", "--trials"},
      {"warmup", "--warmup"},
      {"weight_decay", "--weight-decay"},
      {"weights", "--weights"},
  };
  return flags;
}

std::string WithFlags(std::string_view message) {
  const auto& flags = OptionFlags();
  std::string out;
  out.reserve(message.size());
  size_t i = 0;
  while (i < message.size()) {
    const size_t open = message.find('`', i);
    if (open == std::string_view::npos) break;
    const size_t close = message.find('`', open + 1);
    if (close == std::string_view::npos) break;
    const auto it = flags.find(message.substr(open + 1, close - open - 1));
    out.append(message.substr(i, open - i));
    if (it != flags.end()) {
      out.append(it->second);
      i = close + 1;
    } else {
      out.push_back('`');  // not an option: kept, and its closing backtick may open the next name
      i = open + 1;
    }
  }
  out.append(message.substr(i));
  return out;
}

}  // namespace posenc
