// posenc inspect: the resolved RoPE parameters of a config (HF config.json or flags).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "option_flags.h"
#include "posenc/core/errors.h"
#include "posenc/model/loader.h"
#include "posenc/rope/hf_config.h"
#include "posenc/io/rope_json.h"
#include "posenc/rope/inspect.h"

namespace posenc::cli {
namespace {

struct InspectArgs {
  std::string config_path;
  std::string model_path;
  std::string rope_type;
  double rope_theta = 0, factor = 0, attention_factor = 0, beta_fast = 0, beta_slow = 0, mscale = 0,
         mscale_all_dim = 0, low_freq_factor = 0, high_freq_factor = 0, partial_rotary_factor = 0;
  int64_t head_dim = 0, rotary_dim = 0, max_position_embeddings = 0, original_max_position_embeddings = 0;
  bool no_truncate = false;
  std::vector<double> short_factor, long_factor;
  int64_t seq_len = 0;
  std::vector<int64_t> positions{0, 1};
  std::string precision = "exact";
  bool json = false;
  std::string layout;
};

// Flags override the config file field by field; an unset flag leaves the config's value alone.
RopeParams ResolveParams(const CLI::App& cmd, const InspectArgs& a, std::vector<std::string>& warnings,
                         RopeLayout& layout) {
  RopeParams p;
  if (!a.config_path.empty() && !a.model_path.empty()) {
    throw ConfigError("give either --config or --model, not both");
  }
  if (!a.config_path.empty()) {
    HfRopeConfig c = LoadHfRopeConfig(a.config_path);
    p = c.params;
    layout = c.layout;
    warnings = c.warnings;
  }
  if (!a.model_path.empty()) {
    throw ConfigError("--model is read by InspectModel (a model's RoPE per layer type)");
  }
  auto given = [&](const char* flag) { return cmd.count(flag) > 0; };
  if (given("--rope-type")) p.rope_type = ParseRopeType(a.rope_type);
  if (given("--rope-theta")) p.rope_theta = a.rope_theta;
  if (given("--head-dim")) p.head_dim = a.head_dim;
  if (given("--rotary-dim")) p.rotary_dim = a.rotary_dim;
  if (given("--partial-rotary-factor")) {
    if (!(a.partial_rotary_factor > 0.0 && a.partial_rotary_factor <= 1.0)) {
      throw ConfigError(fmt::format("--partial-rotary-factor must be in (0, 1], got {}", a.partial_rotary_factor));
    }
    p.rotary_dim = static_cast<int64_t>(static_cast<double>(p.head_dim) * a.partial_rotary_factor);
  }
  if (given("--max-position-embeddings")) p.max_position_embeddings = a.max_position_embeddings;
  if (given("--original-max-position-embeddings")) {
    p.original_max_position_embeddings = a.original_max_position_embeddings;
  }
  if (given("--factor")) p.factor = a.factor;
  if (given("--attention-factor")) p.attention_factor = a.attention_factor;
  if (given("--beta-fast")) p.beta_fast = a.beta_fast;
  if (given("--beta-slow")) p.beta_slow = a.beta_slow;
  if (given("--mscale")) p.mscale = a.mscale;
  if (given("--mscale-all-dim")) p.mscale_all_dim = a.mscale_all_dim;
  if (given("--no-truncate")) p.truncate = false;
  if (given("--low-freq-factor")) p.low_freq_factor = a.low_freq_factor;
  if (given("--high-freq-factor")) p.high_freq_factor = a.high_freq_factor;
  if (given("--short-factor")) p.short_factor = a.short_factor;
  if (given("--long-factor")) p.long_factor = a.long_factor;
  if (given("--layout")) layout = a.layout == "interleaved" ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;
  if (a.config_path.empty() && a.model_path.empty() && !given("--head-dim")) {
    throw ConfigError("--head-dim is required without --config or --model");
  }
  // yarn / llama3 / longrope without an explicit original length: HF's setdefault to max_position_embeddings
  const bool uses_original = p.rope_type == RopeType::kYarn || p.rope_type == RopeType::kLlama3 ||
                             p.rope_type == RopeType::kLongrope;
  if (uses_original && !p.original_max_position_embeddings && p.max_position_embeddings > 0) {
    p.original_max_position_embeddings = p.max_position_embeddings;
  }
  return p;
}

template <typename T>
void Row(const char* label, const T& value) {
  fmt::print("{:<34}{}\n", label, value);
}

void PrintText(const RopeReport& r, RopeLayout layout, const std::vector<std::string>& warnings) {
  const RopeParams& p = r.params;
  for (const auto& w : warnings) fmt::print("note: {}\n", WithFlags(w));
  Row("rope_type", RopeTypeName(p.rope_type));
  Row("rope_theta", p.rope_theta);
  Row("head_dim", p.head_dim);
  Row("rotary_dim", fmt::format("{}{}", p.RotaryDim(),
                                 p.RotaryDim() < p.head_dim
                                     ? fmt::format(" (partial: channels {}..{} pass through)", p.RotaryDim(),
                                                   p.head_dim - 1)
                                     : ""));
  Row("layout", RopeLayoutName(layout));
  if (p.max_position_embeddings > 0) Row("max_position_embeddings", p.max_position_embeddings);
  if (p.original_max_position_embeddings) {
    Row("original_max_position_embeddings", *p.original_max_position_embeddings);
  }
  if (p.factor) Row("factor", *p.factor);
  if (p.beta_fast) Row("beta_fast", *p.beta_fast);
  if (p.beta_slow) Row("beta_slow", *p.beta_slow);
  if (p.mscale) Row("mscale", *p.mscale);
  if (p.mscale_all_dim) Row("mscale_all_dim", *p.mscale_all_dim);
  if (p.rope_type == RopeType::kYarn && !p.truncate) Row("truncate", "false");
  if (p.low_freq_factor) Row("low_freq_factor", *p.low_freq_factor);
  if (p.high_freq_factor) Row("high_freq_factor", *p.high_freq_factor);
  if (!r.freq_factors.empty()) {
    std::string f;
    for (float x : r.freq_factors) f += fmt::format("{}{:.6g}", f.empty() ? "" : ",", x);
    Row("rope_freqs (divide inv_freq)", f);
  }
  if (r.magnitude != 1.0) Row("magnitude (multiplies cos, sin)", fmt::format("{:.17g}", r.magnitude));
  if (r.seq_len) Row("seq_len", *r.seq_len);
  Row("attention_factor", fmt::format("{:.17g}  (multiplies cos and sin; q.k scales by its square)",
                                     r.frequencies.attention_factor));
  Row("softmax_scale_multiplier", fmt::format("{:.17g}  (multiplies head_dim^-0.5)",
                                             r.frequencies.softmax_scale_multiplier));
  Row("precision", RopePrecisionName(r.precision));
  fmt::print("\n{:>5}  {:>16}  {:>16}  {}\n", "pair", "inv_freq", "wavelength", "regime");
  for (size_t i = 0; i < r.frequencies.inv_freq.size(); ++i) {
    fmt::print("{:>5}  {:>16.9g}  {:>16.6g}  {}\n", i, r.frequencies.inv_freq[i], r.wavelength[i],
               PairRegimeName(r.regimes[i]));
  }
  const int64_t half = r.cos_sin.half;
  for (int64_t row = 0; row < r.cos_sin.n_rows; ++row) {
    fmt::print("\nposition {}\n  cos:", r.positions[static_cast<size_t>(row)]);
    for (int64_t i = 0; i < half; ++i) fmt::print(" {:.9g}", r.cos_sin.cos[static_cast<size_t>(row * half + i)]);
    fmt::print("\n  sin:");
    for (int64_t i = 0; i < half; ++i) fmt::print(" {:.9g}", r.cos_sin.sin[static_cast<size_t>(row * half + i)]);
    fmt::print("\n");
  }
}

// `inspect --model`: the model's summary, then the RoPE of every layer group as the model applies it (the
// file's rope_freqs factors and magnitude included). --seq-len (dynamic, longrope) defaults to L0.
void InspectModel(const InspectArgs& a, RopePrecision precision, const std::optional<int64_t>& seq_len) {
  const ModelFile model = LoadModelFile(a.model_path, LoadOptions{/*allow_unused_tensors=*/true});
  const ModelConfig& c = model.config;
  const std::vector<LayerGroup> groups = GroupLayers(c);
  if (a.json) {
    nlohmann::json j;
    j["model"] = SummaryLine(model.Summary());
    j["architecture"] = c.architecture;
    j["train_ctx"] = c.train_ctx;
    j["layout"] = RopeLayoutName(c.rope_layout);
    j["absolute_positions"] = AbsolutePositionsName(c.absolute_positions);
    j["warnings"] = model.warnings;
    if (c.dual_chunk) {
      j["dual_chunk_attention_config"] = {{"chunk_size", c.dual_chunk->chunk_size},
                                          {"local_size", c.dual_chunk->local_size}};
      if (c.dual_chunk->original_max_position_embeddings) {
        j["dual_chunk_attention_config"]["original_max_position_embeddings"] =
            *c.dual_chunk->original_max_position_embeddings;
      }
    }
    j["layer_groups"] = nlohmann::json::array();
    for (const LayerGroup& g : groups) {
      const LayerSpec& l = c.layers[static_cast<size_t>(g.layers.front())];
      nlohmann::json e;
      e["layers"] = g.layers;
      e["type"] = l.type;
      e["sliding_window"] = l.sliding_window;
      e["rope"] = l.rope;
      if (l.rope) {
        e["report"] = RopeReportToJson(InspectRope(l.rope_params, seq_len, a.positions, precision,
                                                   l.rope_freq_factors, l.rope_magnitude));
      }
      j["layer_groups"].push_back(e);
    }
    fmt::print("{}\n", j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  fmt::print("{}\n", SummaryLine(model.Summary()));
  for (const std::string& w : model.warnings) fmt::print("note: {}\n", WithFlags(w));
  for (const LayerGroup& g : groups) {
    const LayerSpec& l = c.layers[static_cast<size_t>(g.layers.front())];
    std::string ids;
    for (int64_t i : g.layers) ids += (ids.empty() ? "" : ", ") + std::to_string(i);
    fmt::print("\n== layer{} {} {}\n", g.layers.size() == 1 ? "" : "s", ids, g.description);
    if (!l.rope) continue;
    PrintText(InspectRope(l.rope_params, seq_len, a.positions, precision, l.rope_freq_factors, l.rope_magnitude),
              c.rope_layout, {});
  }
}

}  // namespace

void RegisterInspectCommand(CLI::App& app, CommandMode mode) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Print the resolved RoPE parameters of a config: inv_freq, "
                                                "wavelengths, regimes, attention factor, cos/sin at positions");
  cmd->add_option("--config", args->config_path, "Hugging Face config.json");
  cmd->add_option("--model", args->model_path,
                  "a model's own RoPE: .gguf file, Hugging Face checkpoint folder or llama2.c .bin");
  cmd->add_option("--rope-type", args->rope_type, "default|linear|ntk|dynamic|yarn|llama3|longrope");
  cmd->add_option("--rope-theta", args->rope_theta, "RoPE base (default 10000)");
  cmd->add_option("--head-dim", args->head_dim, "channels per head");
  cmd->add_option("--rotary-dim", args->rotary_dim, "rotated channels (default head_dim)");
  cmd->add_option("--partial-rotary-factor", args->partial_rotary_factor, "rotary_dim = int(head_dim * f)");
  cmd->add_option("--max-position-embeddings", args->max_position_embeddings, "context length L, tokens");
  cmd->add_option("--original-max-position-embeddings", args->original_max_position_embeddings,
                  "pre-extension training length L0, tokens");
  cmd->add_option("--factor", args->factor, "scaling factor s");
  cmd->add_option("--attention-factor", args->attention_factor, "explicit cos/sin multiplier (yarn, longrope)");
  cmd->add_option("--beta-fast", args->beta_fast, "yarn (default 32)");
  cmd->add_option("--beta-slow", args->beta_slow, "yarn (default 1)");
  cmd->add_option("--mscale", args->mscale, "yarn (DeepSeek)");
  cmd->add_option("--mscale-all-dim", args->mscale_all_dim, "yarn (DeepSeek); sets the softmax multiplier");
  cmd->add_flag("--no-truncate", args->no_truncate, "yarn: keep the correction range fractional (gpt-oss)");
  cmd->add_option("--low-freq-factor", args->low_freq_factor, "llama3");
  cmd->add_option("--high-freq-factor", args->high_freq_factor, "llama3");
  cmd->add_option("--short-factor", args->short_factor, "longrope: rotary_dim/2 comma-separated values")
      ->delimiter(',');
  cmd->add_option("--long-factor", args->long_factor, "longrope: rotary_dim/2 comma-separated values")
      ->delimiter(',');
  cmd->add_option("--layout", args->layout, "half-split|interleaved (display only)")
      ->check(CLI::IsMember({"half-split", "interleaved"}));
  cmd->add_option("--seq-len", args->seq_len, "sequence length for dynamic and longrope, tokens");
  cmd->add_option("--positions", args->positions, "comma-separated position ids (default 0,1)")->delimiter(',');
  cmd->add_option("--precision", args->precision, "exact|hf (default exact)")
      ->check(CLI::IsMember({"exact", "hf"}));
  cmd->add_flag("--json", args->json, "print JSON instead of text");
  cmd->callback([cmd, args, mode] {
    std::vector<std::string> warnings;
    RopeLayout layout = RopeLayout::kHalfSplit;
    if (mode == CommandMode::kParseOnly) {  // the flags alone (no --config file is read)
      if (args->config_path.empty() && args->model_path.empty()) {
        ValidateRopeParams(ResolveParams(*cmd, *args, warnings, layout));
      }
      return;
    }
    std::optional<int64_t> seq_len;
    if (cmd->count("--seq-len")) seq_len = args->seq_len;
    const RopePrecision precision = args->precision == "hf" ? RopePrecision::kHf : RopePrecision::kExact;
    if (!args->model_path.empty()) {
      if (!args->config_path.empty()) throw ConfigError("give either --config or --model, not both");
      for (const char* flag : {"--rope-type", "--rope-theta", "--head-dim", "--rotary-dim", "--factor", "--layout"}) {
        if (cmd->count(flag)) throw ConfigError(fmt::format("{} cannot change a model's RoPE in inspect --model", flag));
      }
      InspectModel(*args, precision, seq_len);
      return;
    }
    const RopeParams params = ResolveParams(*cmd, *args, warnings, layout);
    const RopeReport report = InspectRope(params, seq_len, args->positions, precision);
    if (args->json) {
      nlohmann::json j = RopeReportToJson(report);
      j["layout"] = RopeLayoutName(layout);
      j["warnings"] = warnings;
      fmt::print("{}\n", j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      PrintText(report, layout, warnings);
    }
  });
}

}  // namespace posenc::cli
