// The C API (c_api.h) over the C++ library: argument checks, then one library call inside Guard, which turns
// every exception into a status code and the per-thread message.
#include "posenc/c_api.h"

#include <algorithm>
#include <exception>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/core/errors.h"
#include "posenc/rope/hf_config.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"

struct posenc_rope_config {
  posenc::HfRopeConfig hf;
};

namespace {

thread_local std::string g_last_error;

// Records a failure's message; returns its status.
posenc_status Fail(posenc_status status, std::string message) {
  try {
    g_last_error = std::move(message);
  } catch (...) {  // out of memory while copying the message: keep a fixed one
    g_last_error.clear();
  }
  return status;
}

struct InvalidArgument {
  std::string message;
};

// Runs body; maps every exception to its status (the only catch site of this file).
template <class F>
posenc_status Guard(F&& body) {
  try {
    body();
    return POSENC_OK;
  } catch (const InvalidArgument& e) {
    return Fail(POSENC_ERROR_INVALID_ARGUMENT, e.message);
  } catch (const posenc::ConfigError& e) {
    return Fail(POSENC_ERROR_CONFIG, e.what());
  } catch (const posenc::ShapeError& e) {
    return Fail(POSENC_ERROR_SHAPE, e.what());
  } catch (const posenc::RangeError& e) {
    return Fail(POSENC_ERROR_RANGE, e.what());
  } catch (const posenc::IoError& e) {
    return Fail(POSENC_ERROR_IO, e.what());
  } catch (const nlohmann::json::exception& e) {
    return Fail(POSENC_ERROR_CONFIG, fmt::format("config JSON: {}", e.what()));
  } catch (const std::bad_alloc&) {
    return Fail(POSENC_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return Fail(POSENC_ERROR_INTERNAL, e.what());
  } catch (...) {
    return Fail(POSENC_ERROR_INTERNAL, "unknown exception");
  }
}

void Require(bool ok, const char* what) {
  if (!ok) throw InvalidArgument{what};
}

posenc::RopeLayout Layout(posenc_layout layout, const posenc_rope_config* config) {
  switch (layout) {
    case POSENC_LAYOUT_HALF_SPLIT: return posenc::RopeLayout::kHalfSplit;
    case POSENC_LAYOUT_INTERLEAVED: return posenc::RopeLayout::kInterleaved;
    case POSENC_LAYOUT_FROM_CONFIG:
      if (config != nullptr) return config->hf.layout;
      break;
  }
  throw InvalidArgument{fmt::format("layout must be POSENC_LAYOUT_HALF_SPLIT (0) or POSENC_LAYOUT_INTERLEAVED (1){}, "
                                    "got {}", config != nullptr ? " or POSENC_LAYOUT_FROM_CONFIG (-1)" : "", layout)};
}

posenc::RopeDirection Direction(posenc_direction direction) {
  switch (direction) {
    case POSENC_FORWARD: return posenc::RopeDirection::kForward;
    case POSENC_BACKWARD: return posenc::RopeDirection::kBackward;
    case POSENC_INVERSE: return posenc::RopeDirection::kInverse;
  }
  throw InvalidArgument{fmt::format("direction must be POSENC_FORWARD (0), POSENC_BACKWARD (1) or POSENC_INVERSE "
                                    "(2), got {}", direction)};
}

posenc::RopePrecision Precision(posenc_precision precision) {
  switch (precision) {
    case POSENC_PRECISION_EXACT: return posenc::RopePrecision::kExact;
    case POSENC_PRECISION_HF: return posenc::RopePrecision::kHf;
  }
  throw InvalidArgument{fmt::format("precision must be POSENC_PRECISION_EXACT (0) or POSENC_PRECISION_HF (1), "
                                    "got {}", precision)};
}

posenc::HeadsView View(const posenc_heads_view* x) {
  Require(x != nullptr, "x (posenc_heads_view*) is null");
  posenc::DType dtype;
  switch (x->dtype) {
    case POSENC_DTYPE_F32: dtype = posenc::DType::kF32; break;
    case POSENC_DTYPE_BF16: dtype = posenc::DType::kBF16; break;
    case POSENC_DTYPE_F16: dtype = posenc::DType::kF16; break;
    default:
      throw InvalidArgument{fmt::format("x->dtype must be POSENC_DTYPE_F32 (0), POSENC_DTYPE_BF16 (1) or "
                                        "POSENC_DTYPE_F16 (2), got {}", x->dtype)};
  }
  return {x->data, dtype, x->n_tokens, x->n_heads, x->head_dim, x->token_stride, x->head_stride};
}

// seq_len argument -> the library's optional sequence length (POSENC_SEQ_LEN_FROM_POSITIONS: max + 1).
std::optional<int64_t> SeqLen(int64_t seq_len, std::span<const int64_t> position_ids, bool allow_from_positions) {
  if (seq_len > 0) return seq_len;
  if (seq_len == POSENC_SEQ_LEN_INIT) return std::nullopt;
  if (seq_len == POSENC_SEQ_LEN_FROM_POSITIONS && allow_from_positions) {
    if (position_ids.empty()) return std::nullopt;
    return std::max<int64_t>(*std::max_element(position_ids.begin(), position_ids.end()), 0) + 1;
  }
  throw InvalidArgument{fmt::format("seq_len must be > 0 or POSENC_SEQ_LEN_INIT (0){}, got {}",
                                    allow_from_positions ? " or POSENC_SEQ_LEN_FROM_POSITIONS (-1)" : "", seq_len)};
}

std::span<const int64_t> Ids(const int64_t* ids, size_t n, const char* name) {
  if (n > 0 && ids == nullptr) throw InvalidArgument{fmt::format("{} is null with n = {}", name, n)};
  return {ids, n};
}

}  // namespace

extern "C" {

int32_t posenc_c_api_version(void) { return POSENC_C_API_VERSION; }

const char* posenc_last_error(void) { return g_last_error.c_str(); }

const char* posenc_status_name(posenc_status status) {
  switch (status) {
    case POSENC_OK: return "ok";
    case POSENC_ERROR_INVALID_ARGUMENT: return "invalid_argument";
    case POSENC_ERROR_CONFIG: return "config";
    case POSENC_ERROR_SHAPE: return "shape";
    case POSENC_ERROR_RANGE: return "range";
    case POSENC_ERROR_IO: return "io";
    case POSENC_ERROR_OUT_OF_MEMORY: return "out_of_memory";
    case POSENC_ERROR_INTERNAL: return "internal";
  }
  return "unknown";
}

posenc_status posenc_rope_config_from_json(const char* json, size_t json_len, posenc_rope_config** out) {
  if (out != nullptr) *out = nullptr;
  return Guard([&] {
    Require(out != nullptr, "out (posenc_rope_config**) is null");
    Require(json != nullptr, "json is null");
    const nlohmann::json parsed = nlohmann::json::parse(std::string_view(json, json_len));
    *out = new posenc_rope_config{posenc::ParseHfRopeConfig(parsed)};
  });
}

void posenc_rope_config_free(posenc_rope_config* config) { delete config; }

posenc_status posenc_rope_config_dims(const posenc_rope_config* config, int64_t* rotary_dim, int64_t* head_dim) {
  return Guard([&] {
    Require(config != nullptr, "config is null");
    if (rotary_dim != nullptr) *rotary_dim = config->hf.params.RotaryDim();
    if (head_dim != nullptr) *head_dim = config->hf.params.head_dim;
  });
}

posenc_status posenc_rope_config_layout(const posenc_rope_config* config, posenc_layout* layout) {
  return Guard([&] {
    Require(config != nullptr, "config is null");
    Require(layout != nullptr, "layout (posenc_layout*) is null");
    *layout = config->hf.layout == posenc::RopeLayout::kInterleaved ? POSENC_LAYOUT_INTERLEAVED
                                                                      : POSENC_LAYOUT_HALF_SPLIT;
  });
}

const char* posenc_rope_config_rope_type(const posenc_rope_config* config) {
  if (config == nullptr) return nullptr;
  return posenc::RopeTypeName(config->hf.params.rope_type).data();  // views of string literals
}

posenc_status posenc_inv_freq(const posenc_rope_config* config, int64_t seq_len, float* inv_freq, size_t capacity,
                              double* attention_factor, double* softmax_scale_multiplier) {
  return Guard([&] {
    Require(config != nullptr, "config is null");
    Require(inv_freq != nullptr, "inv_freq is null");
    const posenc::RopeFrequencies f = posenc::ComputeRopeFrequencies(config->hf.params, SeqLen(seq_len, {}, false));
    if (capacity < f.inv_freq.size()) {
      throw InvalidArgument{fmt::format("inv_freq capacity must be >= rotary_dim / 2 = {}, got {}",
                                        f.inv_freq.size(), capacity)};
    }
    std::copy(f.inv_freq.begin(), f.inv_freq.end(), inv_freq);
    if (attention_factor != nullptr) *attention_factor = f.attention_factor;
    if (softmax_scale_multiplier != nullptr) *softmax_scale_multiplier = f.softmax_scale_multiplier;
  });
}

posenc_status posenc_cos_sin(const posenc_rope_config* config, const int64_t* position_ids, size_t n,
                             int64_t seq_len, posenc_precision precision, float* cos, float* sin, size_t capacity) {
  return Guard([&] {
    Require(config != nullptr, "config is null");
    const std::span<const int64_t> ids = Ids(position_ids, n, "position_ids");
    Require(n == 0 || (cos != nullptr && sin != nullptr), "cos or sin is null");
    const posenc::RopePrecision p = Precision(precision);
    const posenc::RopeFrequencies f = posenc::ComputeRopeFrequencies(config->hf.params, SeqLen(seq_len, ids, true));
    const size_t half = f.inv_freq.size();
    if (n > 0 && capacity / n < half) {
      throw InvalidArgument{fmt::format("cos/sin capacity must be >= n * rotary_dim / 2 = {} * {}, got {}", n, half,
                                        capacity)};
    }
    const posenc::CosSinTable t = posenc::ComputeCosSin(f, ids, p);
    std::copy(t.cos.begin(), t.cos.end(), cos);
    std::copy(t.sin.begin(), t.sin.end(), sin);
  });
}

posenc_status posenc_apply_rope(const posenc_rope_config* config, const posenc_heads_view* x,
                                const int64_t* position_ids, size_t n, int64_t seq_len, posenc_layout layout,
                                posenc_direction direction, posenc_precision precision) {
  return Guard([&] {
    Require(config != nullptr, "config is null");
    const posenc::HeadsView view = View(x);
    const std::span<const int64_t> ids = Ids(position_ids, n, "position_ids");
    const posenc::RopeLayout l = Layout(layout, config);
    const posenc::RopeDirection d = Direction(direction);
    const posenc::RopePrecision p = Precision(precision);
    const posenc::RopeFrequencies f = posenc::ComputeRopeFrequencies(config->hf.params, SeqLen(seq_len, ids, true));
    posenc::ApplyRope(view, ids, posenc::RopeOnTheFly::From(f, p), l, d);
  });
}

posenc_status posenc_apply_rope_table(const posenc_heads_view* x, const int64_t* rows, size_t n, const float* cos,
                                      const float* sin, int64_t n_rows, int64_t half, posenc_layout layout,
                                      posenc_direction direction) {
  return Guard([&] {
    const posenc::HeadsView view = View(x);
    const std::span<const int64_t> ids = Ids(rows, n, "rows");
    Require(n == 0 || (cos != nullptr && sin != nullptr), "cos or sin is null");
    Require(n_rows >= 0, "n_rows is negative");
    posenc::ApplyRope(view, ids, posenc::CosSinView{cos, sin, n_rows, half}, Layout(layout, nullptr),
                      Direction(direction));
  });
}

}  // extern "C"
