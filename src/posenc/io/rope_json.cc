#include "posenc/io/rope_json.h"

namespace posenc {

nlohmann::json RopeReportToJson(const RopeReport& r) {
  using nlohmann::json;
  json j;
  j["rope_type"] = std::string(RopeTypeName(r.params.rope_type));
  j["head_dim"] = r.params.head_dim;
  j["rotary_dim"] = r.params.RotaryDim();
  j["rope_theta"] = r.params.rope_theta;
  j["seq_len"] = r.seq_len ? json(*r.seq_len) : json(nullptr);
  j["precision"] = RopePrecisionName(r.precision);
  j["inv_freq"] = json::array();
  for (float v : r.frequencies.inv_freq) j["inv_freq"].push_back(static_cast<double>(v));
  j["wavelength"] = r.wavelength;
  j["regime"] = json::array();
  for (PairRegime g : r.regimes) j["regime"].push_back(PairRegimeName(g));
  j["attention_factor"] = r.frequencies.attention_factor;
  j["softmax_scale_multiplier"] = r.frequencies.softmax_scale_multiplier;
  j["positions"] = r.positions;
  j["cos"] = json::array();
  j["sin"] = json::array();
  const int64_t half = r.cos_sin.half;
  for (int64_t row = 0; row < r.cos_sin.n_rows; ++row) {
    json c = json::array(), s = json::array();
    for (int64_t i = 0; i < half; ++i) {
      c.push_back(static_cast<double>(r.cos_sin.cos[static_cast<size_t>(row * half + i)]));
      s.push_back(static_cast<double>(r.cos_sin.sin[static_cast<size_t>(row * half + i)]));
    }
    j["cos"].push_back(c);
    j["sin"].push_back(s);
  }
  return j;
}

}  // namespace posenc
