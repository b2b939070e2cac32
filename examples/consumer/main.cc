// Applies RoPE from a Hugging Face config.json with the installed posenc library: 2 heads of ones at 4 positions.
// Build with CMake (find_package(posenc), see CMakeLists.txt) or with pkg-config:
//   c++ -std=c++20 main.cc $(pkg-config --cflags --libs posenc)
#include <cmath>
#include <cstdio>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/rope/hf_config.h"
#include "posenc/rope/apply.h"

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: %s config.json\n", argv[0]), 2;
  try {
    const posenc::HfRopeConfig hf = posenc::LoadHfRopeConfig(argv[1]);  // rope_scaling / rope_parameters
    posenc::RopeCache cache(posenc::ComputeRopeFrequencies(hf.params));  // cos/sin rows, grown on demand
    const int64_t n_heads = 2, head_dim = hf.params.head_dim;
    const std::vector<int64_t> position_ids = {0, 1, 2, 4095};
    std::vector<float> q(position_ids.size() * n_heads * head_dim, 1.0f);  // [tokens, n_heads, head_dim]
    const auto view = posenc::HeadsView::Contiguous(q.data(), 4, n_heads, head_dim);
    posenc::ApplyRope(view, position_ids, cache, hf.layout);
    std::printf("rope_type %s, rotary_dim %lld, %s\n", posenc::RopeTypeName(hf.params.rope_type).data(),
                static_cast<long long>(hf.params.RotaryDim()), posenc::RopeLayoutName(hf.layout));
    for (size_t t = 0; t < position_ids.size(); ++t) {
      double norm2 = 0;
      for (int64_t j = 0; j < n_heads * head_dim; ++j) norm2 += std::pow(q[t * n_heads * head_dim + j], 2);
      std::printf("position %lld: q[0] = %.6f, |q| = %.4f\n", static_cast<long long>(position_ids[t]),
                  q[t * n_heads * head_dim], std::sqrt(norm2));
    }
  } catch (const posenc::Error& e) {
    return std::fprintf(stderr, "error: %s\n", e.what()), 1;
  }
  return 0;
}
