// Shared RoPE-method flags: see method_flags.h.
#include "method_flags.h"

#include <algorithm>
#include <initializer_list>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "option_flags.h"
#include "posenc/rope/hf_config.h"

namespace posenc::cli {

void AddMethodFlags(CLI::App* cmd, MethodFlags* f, const std::string& length) {
  cmd->add_option("--factor", f->factor, fmt::format("fix the scaling factor s instead of max(1, {} / L0)", length));
  cmd->add_option("--config", f->config,
                  "HF-style config.json with rope_scaling/rope_parameters for llama3 or longrope");
  cmd->add_option("--low-freq-factor", f->low_freq_factor, "llama3 low_freq_factor");
  cmd->add_option("--high-freq-factor", f->high_freq_factor, "llama3 high_freq_factor");
  cmd->add_option("--short-factor", f->short_factor, "longrope short_factor list (head_dim/2 values)")
      ->delimiter(',');
  cmd->add_option("--long-factor", f->long_factor, "longrope long_factor list (head_dim/2 values)")->delimiter(',');
  cmd->add_option("--beta-fast", f->yarn.beta_fast, "yarn beta_fast (default 32)");
  cmd->add_option("--beta-slow", f->yarn.beta_slow, "yarn beta_slow (default 1)");
  cmd->add_option("--mscale", f->yarn.mscale, "yarn mscale (DeepSeek; attention factor from it and --mscale-all-dim)");
  cmd->add_option("--mscale-all-dim", f->yarn.mscale_all_dim, "yarn mscale_all_dim (DeepSeek)");
  cmd->add_option("--attention-factor", f->yarn.attention_factor,
                  "yarn attention_factor: the cos/sin multiplier (default 0.1 ln s + 1)");
  cmd->add_flag("--no-truncate", f->yarn.no_truncate,
                "yarn: keep the correction range fractional (HF truncate: false, gpt-oss; default: floor / ceil)");
  cmd->add_option("--group", f->group,
                  fmt::format("self-extend: group size G (default: the smallest reaching {})", length));
  cmd->add_option("--window", f->window,
                  "self-extend neighbour window W (default L0/4); rerope / leaky-rerope window w (L0/2); sinks: "
                  "recent keys (L0 - sinks); lm-infinite: local window (L0)");
  cmd->add_option("--leak", f->leak, "leaky-rerope: k, distances past the window grow 1/k per token "
                                     "(default: the farthest key lands inside L0)");
  cmd->add_option("--sinks", f->sinks, "sinks: number of sink tokens (default 4)");
  cmd->add_option("--global", f->n_global, "lm-infinite: number of global tokens (default 10)");
  cmd->add_option("--chunk-size", f->chunk_size,
                  "dca chunk_size: chunks of chunk_size - local_size tokens, no distance past it (default: the "
                  "file's dual_chunk_attention_config, else 3 L0 / 4)");
  cmd->add_option("--local-size", f->local_size,
                  "dca local_size (default: the file's dual_chunk_attention_config, else L0 / 16)");
}

std::optional<TrainingRecord> FindRunTrainingRecord(const std::string& model_path, bool ignore, bool speak) {
  if (ignore) return std::nullopt;
  TrainingRecordLookup lookup = FindTrainingRecord(model_path);
  if (!lookup.note.empty() && speak) fmt::print(stderr, "note: {}\n", WithFlags(lookup.note));
  return std::move(lookup.record);
}

void CheckMethodFlagsUsed(const MethodFlags& f, const std::vector<RopeMethod>& methods) {
  auto uses = [&](std::initializer_list<RopeMethod> readers) {
    for (RopeMethod m : methods) {
      if (std::find(readers.begin(), readers.end(), m) != readers.end()) return true;
    }
    return false;
  };
  struct Flag {
    const char* name;
    bool given;
    std::initializer_list<RopeMethod> readers;
    const char* names;
  };
  using M = RopeMethod;
  const Flag flags[] = {
      {"--factor", f.factor.has_value(),
       {M::kLinear, M::kNtk, M::kYarn, M::kDynamic, M::kDynamicHf, M::kLlama3, M::kLongrope},
       "the scaling methods (linear, ntk, yarn, dynamic, dynamic-hf, llama3, longrope)"},
      {"--beta-fast", f.yarn.beta_fast.has_value(), {M::kYarn}, "yarn"},
      {"--beta-slow", f.yarn.beta_slow.has_value(), {M::kYarn}, "yarn"},
      {"--mscale", f.yarn.mscale.has_value(), {M::kYarn}, "yarn"},
      {"--mscale-all-dim", f.yarn.mscale_all_dim.has_value(), {M::kYarn}, "yarn"},
      {"--attention-factor", f.yarn.attention_factor.has_value(), {M::kYarn}, "yarn"},
      {"--no-truncate", f.yarn.no_truncate, {M::kYarn}, "yarn"},
      {"--low-freq-factor", f.low_freq_factor.has_value(), {M::kLlama3}, "llama3"},
      {"--high-freq-factor", f.high_freq_factor.has_value(), {M::kLlama3}, "llama3"},
      {"--short-factor", !f.short_factor.empty(), {M::kLongrope}, "longrope"},
      {"--long-factor", !f.long_factor.empty(), {M::kLongrope}, "longrope"},
      {"--config", !f.config.empty(), {M::kLlama3, M::kLongrope}, "llama3 and longrope"},
      {"--group", f.group.has_value(), {M::kSelfExtend}, "self-extend"},
      {"--window", f.window.has_value(), {M::kSelfExtend, M::kReRope, M::kLeakyReRope, M::kSinks, M::kLmInfinite},
       "self-extend, rerope, leaky-rerope, sinks and lm-infinite"},
      {"--leak", f.leak.has_value(), {M::kLeakyReRope}, "leaky-rerope"},
      {"--sinks", f.sinks.has_value(), {M::kSinks}, "sinks"},
      {"--global", f.n_global.has_value(), {M::kLmInfinite}, "lm-infinite"},
      {"--chunk-size", f.chunk_size.has_value(), {M::kDualChunk}, "dca"},
      {"--local-size", f.local_size.has_value(), {M::kDualChunk}, "dca"},
  };
  for (const Flag& flag : flags) {
    if (flag.given && !uses(flag.readers)) {
      throw ConfigError(fmt::format("{} is a parameter of {}, which the run does not use (--methods): it would be "
                                    "ignored", flag.name, flag.names));
    }
  }
}

MethodOptions BuildMethodOptions(const MethodFlags& f) {
  MethodOptions m;
  m.factor = f.factor;
  if (!f.config.empty()) {
    const HfRopeConfig cfg = LoadHfRopeConfig(f.config);
    if (cfg.params.rope_type == RopeType::kLlama3) {
      m.llama3 = cfg.params;
    } else if (cfg.params.rope_type == RopeType::kLongrope) {
      m.longrope = cfg.params;
    } else {
      throw ConfigError(fmt::format("--config {}: rope_type must be llama3 or longrope (the other methods take no "
                                    "parameters), got {}", f.config, RopeTypeName(cfg.params.rope_type)));
    }
  }
  if (f.low_freq_factor || f.high_freq_factor) {
    if (!f.low_freq_factor || !f.high_freq_factor) {
      throw ConfigError("llama3 needs both --low-freq-factor and --high-freq-factor");
    }
    RopeParams p;
    p.rope_type = RopeType::kLlama3;
    p.low_freq_factor = f.low_freq_factor;
    p.high_freq_factor = f.high_freq_factor;
    m.llama3 = p;
  }
  if (!f.short_factor.empty() || !f.long_factor.empty()) {
    RopeParams p;
    p.rope_type = RopeType::kLongrope;
    p.short_factor = f.short_factor;
    p.long_factor = f.long_factor;
    m.longrope = p;
  }
  m.yarn = f.yarn;
  m.position_map = {f.group, f.window, f.leak, f.sinks, f.n_global, f.chunk_size, f.local_size};
  return m;
}

}  // namespace posenc::cli
