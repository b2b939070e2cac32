// The training model: see train_model.h.
#include "posenc/train/train_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/core/random.h"
#include "posenc/model/decoder_layer.h"
#include "posenc/model/layers/classifier_loss.h"
#include "posenc/model/layers/embedding.h"
#include "posenc/model/layers/linear.h"
#include "posenc/model/layers/parallel.h"
#include "posenc/model/layers/position.h"
#include "posenc/model/layers/rmsnorm.h"
#include "posenc/model/layers/swiglu.h"
#include "posenc/pe/sinusoidal.h"

namespace posenc {
namespace {

constexpr double kInitStddev = 0.02;  // GPT-2 / nanoGPT

template <typename T>
void Grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// Sets v[0, n) to 0, in blocks spread over the threads (the backward's scratch is zeroed before every use).
template <typename T>
void Zero(std::vector<T>& v, int64_t n) {
  T* p = v.data();
  layers::ForEachBlock(n, int64_t{1} << 16, [p](int64_t i0, int64_t i1) { std::fill(p + i0, p + i1, T{0}); });
}

// First non-finite element of [p, p + n), or -1.
template <typename T>
int64_t FirstNonFinite(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(p[i])) return i;
  }
  return -1;
}

template <typename T>
std::optional<NonFiniteAt> Scan(const T* p, int64_t n, int64_t layer, std::string name) {
  const int64_t i = FirstNonFinite(p, n);
  if (i < 0) return std::nullopt;
  return NonFiniteAt{layer, std::move(name), i, static_cast<double>(p[i])};
}

// The per-head RMSNorm of q or k (Qwen3's q_norm / k_norm, before RoPE) on the columns [offset, offset + width)
// of the N rows of qkv (row stride W): saves them as projected in proj [N, width] (N * width / D heads of D
// channels, contiguous), normalises each head into tmp [N, width] and writes the result back into qkv.
template <typename T>
void HeadNormForward(T* qkv, int64_t N, int64_t W, int64_t offset, int64_t width, int64_t D, const T* w, double eps,
                     T* proj, T* rstd, T* tmp) {
  for (int64_t n = 0; n < N; ++n) std::copy_n(qkv + n * W + offset, width, proj + n * width);
  RmsNormForward<T>(proj, w, N * width / D, D, eps, tmp, rstd);
  for (int64_t n = 0; n < N; ++n) std::copy_n(tmp + n * width, width, qkv + n * W + offset);
}

// Backward of HeadNormForward: d_qkv's columns [offset, offset + width) hold dL/d(normed q or k) and are replaced
// by dL/d(q or k as projected); dw [D] +=. d_in, d_out: scratch [N, width].
template <typename T>
void HeadNormBackward(T* d_qkv, int64_t N, int64_t W, int64_t offset, int64_t width, int64_t D, const T* proj,
                      const T* w, const T* rstd, T* dw, T* d_in, T* d_out) {
  for (int64_t n = 0; n < N; ++n) std::copy_n(d_qkv + n * W + offset, width, d_in + n * width);
  std::fill(d_out, d_out + N * width, T{0});
  RmsNormBackward<T>(d_in, proj, w, rstd, N * width / D, D, d_out, dw);
  for (int64_t n = 0; n < N; ++n) std::copy_n(d_out + n * width, width, d_qkv + n * W + offset);
}

}  // namespace

template <typename T>
TrainModel<T>::TrainModel(const TrainShape& shape)
    : TrainModel((ValidateTrainShape(shape), ToModelConfig(shape, shape.max_seq_len))) {}

template <typename T>
TrainModel<T>::TrainModel(const ModelConfig& config)
    : config_(config), position_encoding_(TrainPositionEncoding(config)), layout_(config) {
  params_.assign(static_cast<size_t>(layout_.total()), T{0});
  grads_.assign(static_cast<size_t>(layout_.total()), T{0});
  if (position_encoding_ == PositionEncoding::kSinusoidal) {
    SinusoidalParams sp;
    sp.d_model = config_.dim;
    std::vector<int64_t> positions(static_cast<size_t>(config_.n_positions));
    std::iota(positions.begin(), positions.end(), int64_t{0});
    const std::vector<float> table = SinusoidalTable(sp, positions);  // ConfigError for an odd dim
    sinusoidal_.assign(table.begin(), table.end());
  }
}

template <typename T>
void TrainModel<T>::InitParameters(uint64_t seed) {
  std::mt19937_64 g(seed);
  const double residual_stddev = kInitStddev / std::sqrt(2.0 * static_cast<double>(config_.n_layers));
  std::vector<float> buf;
  for (const ParameterTensor& t : layout_.tensors()) {
    T* dst = params_.data() + t.offset;
    const std::string_view name = t.name;
    if (t.shape.size() < 2) {  // norms 1, biases 0
      const T value = name.ends_with("norm.weight") ? T{1} : T{0};
      std::fill(dst, dst + t.size(), value);
      continue;
    }
    const bool residual = name.ends_with("attn_output.weight") || name.ends_with("ffn_down.weight");
    buf.resize(static_cast<size_t>(t.size()));
    FillNormal(buf, g, residual ? residual_stddev : kInitStddev);
    std::copy(buf.begin(), buf.end(), dst);
  }
}

template <typename T>
void TrainModel<T>::ZeroGradients() {
  std::fill(grads_.begin(), grads_.end(), T{0});
}

namespace {

// Checks a batch against the model and the RoPE it comes with.
void CheckBatch(const ModelConfig& c, PositionEncoding pe, const TokenBatch& b, const AttentionRope& rope) {
  if (b.batch < 1 || b.ctx < 1) {
    throw ShapeError(fmt::format("batch and ctx must be >= 1, got {} and {}", b.batch, b.ctx));
  }
  const size_t n = static_cast<size_t>(b.batch * b.ctx);
  if (b.inputs.size() != n || b.targets.size() != n) {
    throw ShapeError(fmt::format("inputs and targets must hold batch * ctx = {} * {} = {} ids, got {} and {}", b.batch,
                                 b.ctx, n, b.inputs.size(), b.targets.size()));
  }
  const bool has_table = rope.table.half > 0;
  if (pe == PositionEncoding::kRope && !has_table) {
    throw ConfigError("position_encoding is rope, but no RoPE table was given");
  }
  if (pe != PositionEncoding::kRope && (has_table || rope.pre_rotation != nullptr)) {
    throw ConfigError(fmt::format("position_encoding is {}, but a RoPE table was given", PositionEncodingName(pe)));
  }
  if ((pe == PositionEncoding::kLearned || pe == PositionEncoding::kSinusoidal) && b.ctx > c.n_positions) {
    throw RangeError(fmt::format("ctx = {} is longer than the {} position table (max_seq_len = {}): positions past "
                                 "{} have no row", b.ctx, PositionEncodingName(pe), c.n_positions,
                                 c.n_positions - 1));
  }
}

template <typename T>
void Size(Activations<T>& a, const ModelConfig& c, int64_t batch, int64_t ctx) {
  const int64_t N = batch * ctx, L = c.n_layers, C = c.dim, F = c.hidden_dim, V = c.vocab_size;
  const int64_t Q = c.q_dim(), K = c.kv_dim(), H = c.n_heads;
  a.batch = batch;
  a.ctx = ctx;
  Grow(a.res, L * N * C);
  Grow(a.attn_rstd, L * N);
  Grow(a.ln1, L * N * C);
  Grow(a.qkv, L * N * (Q + 2 * K));
  Grow(a.qk_rot, L * N * (Q + K));
  Grow(a.att, L * N * Q);
  Grow(a.att_lse, L * N * H);
  if (c.qk_norm == QkNorm::kPerHead) {
    Grow(a.q_proj, L * N * Q);
    Grow(a.k_proj, L * N * K);
    Grow(a.q_rstd, L * N * H);
    Grow(a.k_rstd, L * N * c.n_kv_heads);
    Grow(a.d_qk_in, N * Q);
    Grow(a.d_qk_out, N * Q);
  }
  Grow(a.res_mid, L * N * C);
  Grow(a.ffn_rstd, L * N);
  Grow(a.ln2, L * N * C);
  Grow(a.gate_up, L * N * 2 * F);
  Grow(a.hb, L * N * F);
  Grow(a.res_out, N * C);
  Grow(a.final_rstd, N);
  Grow(a.lnf, N * C);
  Grow(a.logits, N * V);
  Grow(a.lse, N);
  Grow(a.d_res, N * C);
  Grow(a.d_ln, N * C);
  Grow(a.d_qkv, N * (Q + 2 * K));
  Grow(a.d_att, N * Q);
  Grow(a.d_gate_up, N * 2 * F);
  Grow(a.d_hb, N * F);
}

// The parts of DecoderLayerForward / DecoderLayerBackward over the flat parameters and the saved activations of
// layer `layer` (model/decoder_layer.h names the parts). The layer's input is res[layer], the residual after the
// attention part res_mid[layer], its output res[layer + 1] (res_out after the last); each part keeps what its
// backward reads. The backward's d_res is the gradient of the residual stream.
template <typename T>
struct TrainSteps {
  const ModelConfig& c;
  const SelfAttentionShape& shape;
  const AttentionRope& rope;
  Activations<T>& a;
  int64_t N = 0;
  int64_t layer = 0;
  const LayerParameters<const T>* w = nullptr;
  const LayerParameters<T>* gw = nullptr;  // gradients (backward only)

  int64_t C() const { return c.dim; }
  int64_t F() const { return c.hidden_dim; }
  int64_t Q() const { return c.q_dim(); }
  int64_t K() const { return c.kv_dim(); }
  int64_t W() const { return Q() + 2 * K(); }
  T* Res() const { return a.res.data() + layer * N * C(); }
  T* Ln1() const { return a.ln1.data() + layer * N * C(); }
  T* Qkv() const { return a.qkv.data() + layer * N * W(); }
  T* QkRot() const { return a.qk_rot.data() + layer * N * (Q() + K()); }
  T* Att() const { return a.att.data() + layer * N * Q(); }
  T* AttLse() const { return a.att_lse.data() + layer * N * c.n_heads; }
  T* Mid() const { return a.res_mid.data() + layer * N * C(); }
  T* Ln2() const { return a.ln2.data() + layer * N * C(); }
  T* GateUp() const { return a.gate_up.data() + layer * N * 2 * F(); }
  T* Hb() const { return a.hb.data() + layer * N * F(); }
  T* Next() const { return layer + 1 < c.n_layers ? a.res.data() + (layer + 1) * N * C() : a.res_out.data(); }

  // A part the training layers do not have (CheckTrainable refuses such models before any step).
  [[noreturn]] void Unsupported(const char* what) const {
    throw ConfigError(fmt::format("the training layers have no {} (layer {} of this {} model)", what, layer,
                                  c.architecture));
  }

  // forward
  void AttentionInput(bool pre_norm) {
    if (!pre_norm) Unsupported("attention input without a pre-norm");
    RmsNormForward<T>(Res(), w->attn_norm, N, C(), c.norm_eps, Ln1(), a.attn_rstd.data() + layer * N);
  }
  void ProjectQkv() { LinearForward<T>(Ln1(), w->wqkv, w->bqkv, N, C(), W(), Qkv()); }
  void NormQk(QkNorm norm) {
    if (norm != QkNorm::kPerHead) Unsupported("q/k norm over all heads together");
    const int64_t D = c.head_dim;
    HeadNormForward<T>(Qkv(), N, W(), 0, Q(), D, w->q_norm, c.norm_eps, a.q_proj.data() + layer * N * Q(),
                       a.q_rstd.data() + layer * N * c.n_heads, a.d_qk_out.data());
    HeadNormForward<T>(Qkv(), N, W(), Q(), K(), D, w->k_norm, c.norm_eps, a.k_proj.data() + layer * N * K(),
                       a.k_rstd.data() + layer * N * c.n_kv_heads, a.d_qk_out.data());
  }
  void Attend() { SelfAttentionForward<T>(shape, rope, Qkv(), QkRot(), Att(), AttLse(), a.attention); }
  void AttentionOutput(Into into) {
    if (into != Into::kResidual) Unsupported("attention output branch (post-norm or parallel residual)");
    std::copy(Res(), Res() + N * C(), Mid());
    LinearForward<T>(Att(), w->wo, nullptr, N, Q(), C(), Mid(), OutputMode::kAccumulate);
  }
  void FeedForwardInput(bool pre_norm) {
    if (!pre_norm) Unsupported("feed-forward input without a pre-norm");
    RmsNormForward<T>(Mid(), w->ffn_norm, N, C(), c.norm_eps, Ln2(), a.ffn_rstd.data() + layer * N);
  }
  void FeedForward(Into into) {
    if (into != Into::kResidual) Unsupported("feed-forward branch (post-norm or parallel residual)");
    LinearForward<T>(Ln2(), w->w_gate_up, nullptr, N, C(), 2 * F(), GateUp());
    SwiGluForward<T>(GateUp(), N, F(), Hb());
    std::copy(Mid(), Mid() + N * C(), Next());
    LinearForward<T>(Hb(), w->w_down, nullptr, N, F(), C(), Next(), OutputMode::kAccumulate);
  }
  void PostNorm(PostNormSite) { Unsupported("post-norm"); }
  void AddBranch() { Unsupported("branch added to the residual stream"); }
  // Training scans its saved activations after the step instead (FirstNonFiniteActivation), naming the tensor.
  void CheckResidual(const char*) {}

  // backward: d_res is dL/d(layer output) on entry and dL/d(layer input) on return
  void FeedForwardBackward() {
    Zero(a.d_hb, N * F());
    LinearBackward<T>(a.d_res.data(), Hb(), w->w_down, N, F(), C(), a.d_hb.data(), gw->w_down, nullptr);
    Zero(a.d_gate_up, N * 2 * F());
    SwiGluBackward<T>(a.d_hb.data(), GateUp(), N, F(), a.d_gate_up.data());
    Zero(a.d_ln, N * C());
    LinearBackward<T>(a.d_gate_up.data(), Ln2(), w->w_gate_up, N, C(), 2 * F(), a.d_ln.data(), gw->w_gate_up,
                      nullptr);
  }
  void FeedForwardInputBackward() {
    RmsNormBackward<T>(a.d_ln.data(), Mid(), w->ffn_norm, a.ffn_rstd.data() + layer * N, N, C(), a.d_res.data(),
                       gw->ffn_norm);
  }
  void AttentionOutputBackward() {  // d_res is now dL/d(x_mid)
    Zero(a.d_att, N * Q());
    LinearBackward<T>(a.d_res.data(), Att(), w->wo, N, Q(), C(), a.d_att.data(), gw->wo, nullptr);
  }
  void AttendBackward() {
    Zero(a.d_qkv, N * W());
    SelfAttentionBackward<T>(shape, rope, Qkv(), QkRot(), Att(), AttLse(), a.d_att.data(), a.d_qkv.data(),
                             a.attention);
  }
  void NormQkBackward(QkNorm norm) {
    if (norm != QkNorm::kPerHead) Unsupported("q/k norm over all heads together");
    const int64_t D = c.head_dim;
    HeadNormBackward<T>(a.d_qkv.data(), N, W(), 0, Q(), D, a.q_proj.data() + layer * N * Q(), w->q_norm,
                        a.q_rstd.data() + layer * N * c.n_heads, gw->q_norm, a.d_qk_in.data(), a.d_qk_out.data());
    HeadNormBackward<T>(a.d_qkv.data(), N, W(), Q(), K(), D, a.k_proj.data() + layer * N * K(), w->k_norm,
                        a.k_rstd.data() + layer * N * c.n_kv_heads, gw->k_norm, a.d_qk_in.data(),
                        a.d_qk_out.data());
  }
  void ProjectQkvBackward() {
    Zero(a.d_ln, N * C());
    LinearBackward<T>(a.d_qkv.data(), Ln1(), w->wqkv, N, C(), W(), a.d_ln.data(), gw->wqkv, gw->bqkv);
  }
  void AttentionInputBackward() {
    RmsNormBackward<T>(a.d_ln.data(), Res(), w->attn_norm, a.attn_rstd.data() + layer * N, N, C(), a.d_res.data(),
                       gw->attn_norm);
  }
};

}  // namespace

template <typename T>
double TrainModel<T>::Forward(const TokenBatch& batch, const AttentionRope& rope, Activations<T>& a) const {
  const ModelConfig& c = config_;
  CheckBatch(c, position_encoding_, batch, rope);
  Size(a, c, batch.batch, batch.ctx);
  const int64_t N = batch.batch * batch.ctx, C = c.dim;
  const SelfAttentionShape shape{batch.batch, batch.ctx, {c.n_heads, c.n_kv_heads, c.head_dim}};
  const ParameterTensors<const T> p = MakeParameterViews<const T>(c, layout_, params_.data());
  OneBlasThread one_blas_thread;  // the layers call BLAS from their own OpenMP threads

  T* x = a.res.data();
  EmbeddingForward<T>(batch.inputs, p.token_embd, c.vocab_size, C, x);
  if (position_encoding_ == PositionEncoding::kSinusoidal) {
    PositionTableForward<T>(sinusoidal_.data(), c.n_positions, C, batch.batch, batch.ctx, x);
  } else if (position_encoding_ == PositionEncoding::kLearned) {
    PositionTableForward<T>(p.position_embd, c.n_positions, C, batch.batch, batch.ctx, x);
  }
  TrainSteps<T> steps{c, shape, rope, a, N};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    steps.layer = l;
    steps.w = &p.layers[static_cast<size_t>(l)];
    DecoderLayerForward(c, steps);
  }
  RmsNormForward<T>(a.res_out.data(), p.output_norm, N, C, c.norm_eps, a.lnf.data(), a.final_rstd.data());
  return ClassifierLossForward<T>(a.lnf.data(), p.output, batch.targets, C, c.vocab_size, a.logits.data(),
                                  a.lse.data());
}

template <typename T>
void TrainModel<T>::Backward(const TokenBatch& batch, const AttentionRope& rope, Activations<T>& a) {
  const ModelConfig& c = config_;
  CheckBatch(c, position_encoding_, batch, rope);
  if (a.batch != batch.batch || a.ctx != batch.ctx) {
    throw ShapeError(fmt::format("Backward: the activations are of a [{}, {}] batch, this batch is [{}, {}]", a.batch,
                                 a.ctx, batch.batch, batch.ctx));
  }
  const int64_t N = batch.batch * batch.ctx, C = c.dim;
  const SelfAttentionShape shape{batch.batch, batch.ctx, {c.n_heads, c.n_kv_heads, c.head_dim}};
  const ParameterTensors<const T> p = MakeParameterViews<const T>(c, layout_, params_.data());
  const ParameterTensors<T> g = grads();
  OneBlasThread one_blas_thread;

  Zero(a.d_res, N * C);
  Zero(a.d_ln, N * C);
  ClassifierLossBackward<T>(a.lnf.data(), p.output, batch.targets, C, c.vocab_size, a.lse.data(), 1.0,
                            a.logits.data(), a.d_ln.data(), g.output);
  RmsNormBackward<T>(a.d_ln.data(), a.res_out.data(), p.output_norm, a.final_rstd.data(), N, C, a.d_res.data(),
                     g.output_norm);
  TrainSteps<T> steps{c, shape, rope, a, N};
  for (int64_t l = c.n_layers - 1; l >= 0; --l) {
    steps.layer = l;
    steps.w = &p.layers[static_cast<size_t>(l)];
    steps.gw = &g.layers[static_cast<size_t>(l)];
    DecoderLayerBackward(c, steps);
  }
  if (position_encoding_ == PositionEncoding::kLearned) {
    PositionTableBackward<T>(a.d_res.data(), c.n_positions, C, batch.batch, batch.ctx, g.position_embd);
  }
  EmbeddingBackward<T>(batch.inputs, a.d_res.data(), c.vocab_size, C, g.token_embd);
}

template <typename T>
std::optional<NonFiniteAt> TrainModel<T>::FirstNonFiniteParameter() const {
  for (const ParameterTensor& t : layout_.tensors()) {
    if (auto at = Scan(params_.data() + t.offset, t.size(), t.layer, t.name)) return at;
  }
  return std::nullopt;
}

template <typename T>
std::optional<NonFiniteAt> TrainModel<T>::FirstNonFiniteGradient() const {
  const std::vector<ParameterTensor>& ts = layout_.tensors();
  for (auto it = ts.rbegin(); it != ts.rend(); ++it) {  // buffer order reversed = backward order
    if (auto at = Scan(grads_.data() + it->offset, it->size(), it->layer, it->name)) return at;
  }
  return std::nullopt;
}

template <typename T>
std::optional<NonFiniteAt> TrainModel<T>::FirstNonFiniteActivation(const Activations<T>& a) const {
  const ModelConfig& c = config_;
  const int64_t N = a.batch * a.ctx, C = c.dim, F = c.hidden_dim, Q = c.q_dim(), K = c.kv_dim();
  if (N == 0) return std::nullopt;
  if (auto at = Scan(a.res.data(), N * C, -1, "input embeddings (token + position)")) return at;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string b = fmt::format("blk.{} ", l);
    const std::pair<const std::vector<T>*, std::pair<int64_t, const char*>> parts[] = {
        {&a.ln1, {C, "attn_norm output"}},        {&a.qkv, {Q + 2 * K, "q/k/v projection"}},
        {&a.att, {Q, "attention output"}},        {&a.res_mid, {C, "residual after attention"}},
        {&a.ln2, {C, "ffn_norm output"}},         {&a.gate_up, {2 * F, "ffn gate/up projection"}},
        {&a.hb, {F, "SwiGLU output"}}};
    for (const auto& [v, what] : parts) {
      if (auto at = Scan(v->data() + l * N * what.first, N * what.first, l, b + what.second)) return at;
    }
    const std::vector<T>& next = l + 1 < c.n_layers ? a.res : a.res_out;
    const int64_t off = l + 1 < c.n_layers ? (l + 1) * N * C : 0;
    if (auto at = Scan(next.data() + off, N * C, l, b + "block output")) return at;
  }
  if (auto at = Scan(a.lnf.data(), N * C, -1, "output_norm output")) return at;
  if (auto at = Scan(a.logits.data(), N * c.vocab_size, -1, "logits")) return at;
  return std::nullopt;
}

template class TrainModel<float>;
template class TrainModel<double>;

}  // namespace posenc
