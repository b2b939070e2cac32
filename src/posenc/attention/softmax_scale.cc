#include "posenc/attention/softmax_scale.h"

#include <cmath>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {

double SoftmaxScale(int64_t head_dim, std::optional<double> query_pre_attn_scalar,
                    double softmax_scale_multiplier) {
  if (head_dim <= 0) throw ConfigError(fmt::format("head_dim must be > 0, got {}", head_dim));
  if (query_pre_attn_scalar && (!std::isfinite(*query_pre_attn_scalar) || *query_pre_attn_scalar <= 0.0)) {
    throw ConfigError(fmt::format("query_pre_attn_scalar must be a finite number > 0, got {}",
                                  *query_pre_attn_scalar));
  }
  if (!std::isfinite(softmax_scale_multiplier) || softmax_scale_multiplier <= 0.0) {
    throw ConfigError(fmt::format("softmax_scale_multiplier must be a finite number > 0, got {}",
                                  softmax_scale_multiplier));
  }
  const double s = query_pre_attn_scalar ? *query_pre_attn_scalar : static_cast<double>(head_dim);
  return softmax_scale_multiplier / std::sqrt(s);
}

}  // namespace posenc
