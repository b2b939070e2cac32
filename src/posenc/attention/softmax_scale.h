// The softmax scale of scaled dot-product attention, as an explicit value.
#pragma once

#include <cstdint>
#include <optional>

namespace posenc {

/// softmax scale = s^-0.5 * softmax_scale_multiplier, with s = query_pre_attn_scalar if given (Gemma-2),
/// else head_dim (qk_head_dim for MLA). Never derived from hidden_size / n_heads (Gemma 2's head_dim 256 differs from 3584 / 16).
///
/// Units:   dimensionless; multiplies q.k before the softmax.
/// Errors:  ConfigError naming the field and value if head_dim <= 0, query_pre_attn_scalar <= 0 or not
///          finite, or softmax_scale_multiplier <= 0 or not finite.
/// Source:  Vaswani et al. 2017 Sec. 3.2.1 (1/sqrt(d_k)); transformers Gemma2Attention
///          (query_pre_attn_scalar**-0.5); DeepseekV3Attention (x get_mscale(factor, mscale_all_dim)^2, the
///          RopeFrequencies::softmax_scale_multiplier).
double SoftmaxScale(int64_t head_dim, std::optional<double> query_pre_attn_scalar = std::nullopt,
                    double softmax_scale_multiplier = 1.0);

}  // namespace posenc
