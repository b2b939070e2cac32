#include "posenc/model/config.h"

#include <cmath>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {

std::string_view ArchitectureName(ModelArchitecture arch) {
  switch (arch) {
    case ModelArchitecture::kLlama: return "llama";
    case ModelArchitecture::kQwen2: return "qwen2";
  }
  return "unknown";
}

void ValidateLlamaConfig(const LlamaConfig& c, const std::string& source) {
  auto fail = [&](const std::string& what) { throw ConfigError(fmt::format("{}: {}", source, what)); };
  const std::pair<const char*, int64_t> sizes[] = {{"dim", c.dim},           {"hidden_dim", c.hidden_dim},
                                                   {"n_layers", c.n_layers}, {"n_heads", c.n_heads},
                                                   {"n_kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
                                                   {"vocab_size", c.vocab_size}, {"train_ctx", c.train_ctx}};
  for (const auto& [field, value] : sizes) {
    if (value < 1) fail(fmt::format("{} must be >= 1, got {}", field, value));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    fail(fmt::format("n_heads must be a multiple of n_kv_heads, got n_heads={} n_kv_heads={}", c.n_heads,
                     c.n_kv_heads));
  }
  if (c.head_dim % 2 != 0) fail(fmt::format("head_dim must be even for RoPE, got {}", c.head_dim));
  if (!std::isfinite(c.rms_norm_eps) || c.rms_norm_eps <= 0) {
    fail(fmt::format("rms_norm_eps must be finite and > 0, got {}", c.rms_norm_eps));
  }
  if (c.rope.head_dim != c.head_dim) {
    fail(fmt::format("rope.head_dim {} differs from head_dim {}", c.rope.head_dim, c.head_dim));
  }
  const int64_t rotary_dim = c.rope.RotaryDim();
  if (!c.rope_freq_factors.empty()) {
    if (static_cast<int64_t>(c.rope_freq_factors.size()) != rotary_dim / 2) {
      fail(fmt::format("rope_freqs must have rotary_dim / 2 = {} entries, got {}", rotary_dim / 2,
                       c.rope_freq_factors.size()));
    }
    for (size_t i = 0; i < c.rope_freq_factors.size(); ++i) {
      const float f = c.rope_freq_factors[i];
      if (!std::isfinite(f) || f <= 0) fail(fmt::format("rope_freqs[{}] must be finite and > 0, got {}", i, f));
    }
  }
  try {
    ValidateRopeParams(c.rope);
  } catch (const ConfigError& e) {
    fail(e.what());
  }
}

}  // namespace posenc
