// --compute: the names, auto's choice per matrix, f32 untouched, and the bf16 and int8 paths' deviations from f32
// in perplexity within the bounds derived from bfloat16 rounding and from Q8_0 quantization of the activations
// (below). The bf16 cases run where oneDNN has a bf16 matmul (AVX-512), the int8 cases where the CPU has
// AVX512-VNNI; they skip elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "formats/formats_test_util.h"
#include "model/model_test_util.h"
#include "posenc/blas/bf16_matmul.h"
#include "posenc/core/errors.h"
#include "posenc/eval/perplexity.h"
#include "posenc/kernels/q8_matmul.h"
#include "posenc/model/methods.h"
#include "posenc/model/weights.h"

namespace posenc {
namespace {

TEST(ComputePath, NamesRoundTrip) {
  for (ComputePath p : {ComputePath::kF32, ComputePath::kBf16, ComputePath::kInt8, ComputePath::kAuto}) {
    EXPECT_EQ(ParseComputePath(ComputePathName(p)), p);
  }
  testing::ExpectThrowWith<ConfigError>([] { ParseComputePath("int4"); }, {"'int4'", "f32, bf16, int8, auto"});
}

TEST(ComputePath, EachMatrixTakesThePathOfItsType) {
  const ComputePath other = Bf16MatmulHasUnits() ? ComputePath::kBf16 : ComputePath::kF32;
  EXPECT_EQ(ResolveMatrixCompute(ComputePath::kAuto, GgmlType::kQ8_0),
            Q8VnniAvailable() && !Bf16MatmulHasAmx() ? ComputePath::kInt8 : other);
  EXPECT_EQ(ResolveMatrixCompute(ComputePath::kAuto, GgmlType::kBF16), other);
  EXPECT_EQ(ResolveMatrixCompute(ComputePath::kF32, GgmlType::kQ8_0), ComputePath::kF32);
  if (Q8VnniAvailable()) {
    EXPECT_EQ(ResolveMatrixCompute(ComputePath::kInt8, GgmlType::kQ8_0), ComputePath::kInt8);
    EXPECT_EQ(ResolveMatrixCompute(ComputePath::kInt8, GgmlType::kQ4_K), ComputePath::kF32);
    EXPECT_EQ(ResolveMatrixCompute(ComputePath::kInt8, GgmlType::kF32), ComputePath::kF32);
  } else {
    testing::ExpectThrowWith<ConfigError>([] { ResolveComputePath(ComputePath::kInt8); },
                                          {"`compute` int8", "AVX512-VNNI"});
  }
}

TEST(ComputePath, ResolveChecksTheCpuAndDescribeNamesTheKernel) {
  EXPECT_EQ(ResolveComputePath(ComputePath::kAuto), ComputePath::kAuto);
  EXPECT_EQ(ResolveComputePath(ComputePath::kF32), ComputePath::kF32);
  if (Bf16MatmulAvailable()) {
    EXPECT_EQ(ResolveComputePath(ComputePath::kBf16), ComputePath::kBf16);
  } else {
    testing::ExpectThrowWith<ConfigError>([] { ResolveComputePath(ComputePath::kBf16); }, {"`compute` bf16"});
  }
  const std::string text = DescribeComputePath(ComputePath::kAuto, ComputePath::kBf16);
  EXPECT_EQ(text.rfind("auto -> bf16 (oneDNN ", 0), 0u) << text;
  EXPECT_NE(DescribeComputePath(ComputePath::kF32, ComputePath::kF32).find("OpenBLAS"), std::string::npos);
  EXPECT_EQ(DescribeComputePath(ComputePath::kInt8, ComputePath::kInt8),
            "int8 (Q8_0 blocks, " + Q8KernelDescription() + ")");
}

TEST(ComputePath, F32PacksNothing) {
  const Transformer model = Transformer::Load(testing::ModelPath(), WeightStorage::kAuto, ComputePath::kF32);
  EXPECT_EQ(model.weights().layers[0].wq.bf16, nullptr);
  EXPECT_EQ(model.weights().layers[0].wq.q8, nullptr);
  EXPECT_EQ(model.weights().token_embd.bf16, nullptr);
  EXPECT_NE(DescribeCompute(ComputePath::kF32, model.weights()).find("OpenBLAS"), std::string::npos);
}

TEST(ComputePath, Int8PacksTheQ8MatricesAndTheLoadLineCountsThem) {
  if (!Q8VnniAvailable()) GTEST_SKIP() << "this CPU has no AVX512-VNNI: no int8 path";
  const std::string path = testing::SharedModel("llama-mini-rand-q8_0.gguf");
  POSENC_SKIP_IF_ABSENT(path);
  const Transformer model = Transformer::Load(path, WeightStorage::kAuto, ComputePath::kInt8);
  const LayerWeights& l = model.weights().layers[0];
  for (const WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
    EXPECT_EQ(w->q8 != nullptr, w->source.type == GgmlType::kQ8_0) << w->source.name;
    EXPECT_EQ(w->bf16, nullptr);
  }
  const std::string text = DescribeCompute(ComputePath::kInt8, model.weights());
  EXPECT_NE(text.find("int8 (Q8_0 blocks, vnni"), std::string::npos) << text;
  EXPECT_EQ(ComputeKinds(model.weights()).rfind("int8", 0), 0u) << ComputeKinds(model.weights());
  // A file without Q8_0 matrices: every product f32, and the line says why.
  const Transformer f32 = Transformer::Load(testing::ModelPath(), WeightStorage::kAuto, ComputePath::kInt8);
  EXPECT_EQ(ComputeKinds(f32.weights()), "f32");
  const std::string none = DescribeCompute(ComputePath::kInt8, f32.weights());
  EXPECT_NE(none.find("no matrix is Q8_0"), std::string::npos) << none;
}

// Mean NLL of one window of `len` tokens under `model`, and the logits' spread: for every position t the rms of
// z_t about its mean (a shift common to all logits of a position leaves the NLL unchanged).
struct WindowNll {
  double mean_nll = 0.0;
  double mean_spread = 0.0;
};
WindowNll Score(const Transformer& model, const std::vector<int>& stream, int64_t len) {
  const MethodRope rope = BuildMethodRope(RopeMethod::kNone, len, model.config());
  ForwardState state;
  const int64_t vocab = model.config().vocab_size;
  std::vector<float> logits(static_cast<size_t>(len * vocab));
  const std::span<const int> in(stream.data(), static_cast<size_t>(len));
  std::vector<int64_t> positions(static_cast<size_t>(len));
  for (int64_t t = 0; t < len; ++t) positions[static_cast<size_t>(t)] = t;
  model.Forward(in, positions, rope.forward(), state, logits.data());
  WindowNll r;
  for (int64_t t = 0; t < len; ++t) {
    const float* z = logits.data() + t * vocab;
    r.mean_nll += TokenNll(z, vocab, stream[static_cast<size_t>(t + 1)]);
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < vocab; ++i) mean += z[i];
    mean /= static_cast<double>(vocab);
    for (int64_t i = 0; i < vocab; ++i) sq += (z[i] - mean) * (z[i] - mean);
    r.mean_spread += std::sqrt(sq / static_cast<double>(vocab));
  }
  r.mean_nll /= static_cast<double>(len);
  r.mean_spread /= static_cast<double>(len);
  return r;
}

// |mean NLL(path) - mean NLL(f32)| <= bound, and > 0 (the path ran); the figures printed for the record.
void ExpectDeviationWithin(const std::string& file, const char* path, const WindowNll& f32, const WindowNll& other,
                           double bound, const std::string& kernel) {
  const double dev = std::fabs(other.mean_nll - f32.mean_nll);
  std::printf("%s: mean NLL f32 %.6f, %s %.6f: |d| = %.3g (relative ppl deviation %.3g), bound %.3g (%s)\n",
              file.c_str(), f32.mean_nll, path, other.mean_nll, dev, std::expm1(dev), bound, kernel.c_str());
  EXPECT_GT(dev, 0.0) << path << " gave the f32 result bit for bit: the " << path << " path did not run";
  EXPECT_LE(dev, bound);
}

// The bound on |mean NLL(bf16) - mean NLL(f32)| (= |ln ppl_bf16 - ln ppl_f32|, so ~ the relative ppl deviation):
//  - One product y = sum_k x_k w_k on the bf16 path rounds x_k and w_k to bfloat16 (round to nearest even, unit
//    roundoff u = 2^-8; a weight already in bfloat16 is not rounded) and sums exactly-formed products in float32
//    (gamma_K ~ K 2^-24, negligible next to u). Each rounding is a relative error in [-u, u], over the mantissas
//    close to uniform: rms u / sqrt(3). So the product's error sum_k x_k w_k (d_k + e_k) has rms
//    u sqrt(r / 3) sqrt(sum_k (x_k w_k)^2), r = 2 (1 for bfloat16 weights): relative to the output's scale,
//    rho_1 = u sqrt(r / 3).
//  - The logits come at the end of P = 4 n_layers + 1 products in sequence (q/k/v -> o, gate/up -> down per layer,
//    then the classifier); RMSNorm rescales, residual additions carry each block's error on, and independent
//    roundings add in quadrature: the logits' error, relative to their spread s_t, has rms rho = u sqrt(r P / 3).
//  - NLL_t = logsumexp(z_t) - z_t[y]: its change is dz[y] - sum_i p_i dz_i, rms <= sqrt(2) rho s_t.
//  - |mean_t dNLL_t| <= mean_t |dNLL_t|; at four standard deviations: bound = 4 sqrt(2) rho mean_t s_t, with s_t
//    from the f32 (reference) run. No cancellation across positions is assumed (the weights' roundings are the
//    same at every position), so the bound is loose where the errors do cancel.
double Bf16NllBound(const Transformer& model, const WindowNll& f32, bool bf16_weights) {
  const double u = 1.0 / 256.0, r = bf16_weights ? 1.0 : 2.0;
  const double p = 4.0 * static_cast<double>(model.config().n_layers) + 1.0;
  return 4.0 * std::sqrt(2.0) * u * std::sqrt(r * p / 3.0) * f32.mean_spread;
}

void ExpectBf16WithinBound(const std::string& path, const std::vector<int>& stream, int64_t len, bool bf16_weights) {
  if (!Bf16MatmulAvailable()) GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU (" << OneDnnDescription() << ")";
  const Transformer f32 = Transformer::Load(path, WeightStorage::kAuto, ComputePath::kF32);
  const Transformer bf16 = Transformer::Load(path, WeightStorage::kAuto, ComputePath::kBf16);
  ASSERT_NE(bf16.weights().layers[0].w_gate.bf16, nullptr);
  const WindowNll a = Score(f32, stream, len), b = Score(bf16, stream, len);
  ExpectDeviationWithin(path, "bf16", a, b, Bf16NllBound(f32, a, bf16_weights), Bf16MatmulImplementation());
}

TEST(ComputePath, Bf16PerplexityWithinTheRoundingBoundStories260K) {
  const std::vector<int> stream = testing::StreamOf("tinystories_val_head.txt");
  ExpectBf16WithinBound(testing::ModelPath(), stream, 256, false);
}

TEST(ComputePath, Bf16PerplexityWithinTheRoundingBoundBf16File) {
  const std::string path = testing::SharedModel("stories260K-BF16.gguf");
  POSENC_SKIP_IF_ABSENT(path);
  ExpectBf16WithinBound(path, testing::StreamOf("tinystories_val_head.txt"), 256, true);
}

TEST(ComputePath, Bf16PerplexityWithinTheRoundingBoundLlamaShapedQ8) {
  const std::string path = testing::SharedModel("llama-mini-rand-q8_0.gguf");
  POSENC_SKIP_IF_ABSENT(path);
  // Its own tokenizer's ids: any ids below its vocabulary do; the stream of the bundled tokenizer is one.
  ExpectBf16WithinBound(path, testing::StreamOf("tinyshakespeare.txt"), 512, false);
}

// The bound on |mean NLL(int8) - mean NLL(f32)| for a model whose multiplied matrices are Q8_0 (used exactly):
//  - One product y = sum_c x_c w_c on the int8 path replaces x_c by dx_b q_c, q_c = round(x_c / d_b) with
//    d_b = max_{c in b} |x_c| / 127 per block b of 32: an error in [-d_b / 2, d_b / 2], over the values close to
//    uniform, rms d_b / sqrt(12). Relative to the block's rms r_b this is (max |x| / r_b) / (127 sqrt(12)); the
//    ratio max |x| / r_b of 32 values is at most sqrt(32) (all the energy in one value), so the product's error,
//    relative to the output's scale as for bf16 above, has rms rho_1 <= sqrt(32) / (127 sqrt(12)) = 0.0129; the
//    float16 rounding of the scale adds a relative error of rms 2^-11 / sqrt(3) per block, in quadrature; the
//    float32 sums are negligible.
//  - From there as for bf16: P = 4 n_layers + 1 products in sequence, rho = rho_1 sqrt(P), bound =
//    4 sqrt(2) rho mean_t s_t.
double Int8NllBound(const Transformer& model, const WindowNll& f32) {
  const double step = std::sqrt(32.0) / (127.0 * std::sqrt(12.0)), scale = std::ldexp(1.0, -11) / std::sqrt(3.0);
  const double rho1 = std::sqrt(step * step + scale * scale);
  const double p = 4.0 * static_cast<double>(model.config().n_layers) + 1.0;
  return 4.0 * std::sqrt(2.0) * rho1 * std::sqrt(p) * f32.mean_spread;
}

void ExpectInt8WithinBound(const std::string& path, const std::vector<int>& stream, int64_t len) {
  if (!Q8VnniAvailable()) GTEST_SKIP() << "this CPU has no AVX512-VNNI: no int8 path";
  const Transformer f32 = Transformer::Load(path, WeightStorage::kAuto, ComputePath::kF32);
  const Transformer int8 = Transformer::Load(path, WeightStorage::kAuto, ComputePath::kInt8);
  const LayerWeights& l = int8.weights().layers[0];
  for (const WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_up, &l.w_down}) {
    ASSERT_NE(w->q8, nullptr) << w->source.name << " is not Q8_0: the bound assumes every product is int8";
  }
  const WindowNll a = Score(f32, stream, len), b = Score(int8, stream, len);
  ExpectDeviationWithin(path, "int8", a, b, Int8NllBound(f32, a), Q8KernelDescription());
}

TEST(ComputePath, Int8PerplexityWithinTheQuantizationBoundLlamaShapedQ8) {
  const std::string path = testing::SharedModel("llama-mini-rand-q8_0.gguf");
  POSENC_SKIP_IF_ABSENT(path);
  ExpectInt8WithinBound(path, testing::StreamOf("tinyshakespeare.txt"), 512);
}

TEST(ComputePath, Int8PerplexityWithinTheQuantizationBoundQwen3Q8) {
  const std::string path = testing::SharedModel("arch/qwen3-Q8_0.gguf");
  POSENC_SKIP_IF_ABSENT(path);
  ExpectInt8WithinBound(path, testing::StreamOf("tinyshakespeare.txt"), 256);
}

}  // namespace
}  // namespace posenc
