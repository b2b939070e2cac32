#include "posenc/model/tensors.h"

#include <cstring>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

int64_t ElementBytes(const TensorView& t, const std::string& why) {
  switch (t.type) {
    case GgmlType::kF32: return 4;
    case GgmlType::kF16:
    case GgmlType::kBF16: return 2;
    default:
      throw ConfigError(fmt::format("tensor '{}' has type {}: {} needs float32, float16 or bfloat16", t.name,
                                    GgmlTypeName(t.type), why));
  }
}

TensorView Owned(const TensorView& t, std::vector<uint8_t> bytes, std::vector<int64_t> shape) {
  TensorView out;
  out.name = t.name;
  out.type = t.type;
  out.shape = std::move(shape);
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  out.data = owned->data();
  out.n_bytes = static_cast<int64_t>(owned->size());
  out.owned = std::move(owned);
  return out;
}

}  // namespace

void ModelTensors::ForEach(const std::function<void(const TensorView&)>& f) const {
  auto norm = [&](const std::optional<NormTensors>& n) {
    if (!n) return;
    f(n->weight);
    if (n->bias) f(*n->bias);
  };
  auto opt = [&](const std::optional<TensorView>& t) {
    if (t) f(*t);
  };
  f(token_embd);
  opt(position_embd);
  norm(output_norm);
  opt(output);
  for (const LayerTensors& l : layers) {
    norm(l.attn_norm);
    for (const TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_up, &l.w_down}) f(*t);
    for (const std::optional<TensorView>* t : {&l.bq, &l.bk, &l.bv, &l.bo, &l.w_gate, &l.b_up, &l.b_down}) opt(*t);
    norm(l.q_norm);
    norm(l.k_norm);
    norm(l.attn_post_norm);
    norm(l.ffn_norm);
    norm(l.ffn_post_norm);
  }
}

TensorSource::TensorSource(std::string source, std::function<std::optional<TensorView>(std::string_view)> find,
                           std::vector<std::string> all_names)
    : source_(std::move(source)), find_(std::move(find)), all_(std::move(all_names)) {}

TensorView TensorSource::Require(const std::string& name) {
  std::optional<TensorView> t = Optional(name);
  if (!t) throw ConfigError(fmt::format("{}: required tensor '{}' is missing", source_, name));
  return *t;
}

std::optional<TensorView> TensorSource::Optional(const std::string& name) {
  std::optional<TensorView> t = find_(name);
  if (t) used_.insert(name);
  return t;
}

bool TensorSource::Has(const std::string& name) const { return find_(name).has_value(); }

void TensorSource::MarkUsed(const std::string& name) { used_.insert(name); }

std::vector<std::string> TensorSource::Unused() const {
  std::vector<std::string> out;
  for (const std::string& n : all_) {
    if (!used_.count(n)) out.push_back(n);
  }
  return out;
}

TensorView SliceRows(const TensorView& t, int64_t begin, int64_t count, const std::string& name) {
  if (t.shape.size() != 2) {
    throw ConfigError(fmt::format("tensor '{}' must be a matrix to take {} from it, got {} dimensions", t.name, name,
                                  t.shape.size()));
  }
  if (begin < 0 || count < 0 || begin + count > t.rows()) {
    throw ConfigError(fmt::format("tensor '{}' has {} rows; {} needs rows [{}, {})", t.name, t.rows(), name, begin,
                                  begin + count));
  }
  TensorView out = t;
  out.name = fmt::format("{} ({})", t.name, name);
  out.shape = {count, t.cols()};
  out.data = t.Row(begin);
  out.n_bytes = count * t.RowBytes();
  return out;
}

TensorView SliceVector(const TensorView& t, int64_t begin, int64_t count, const std::string& name) {
  if (t.shape.size() != 1) {
    throw ConfigError(fmt::format("tensor '{}' must be a vector to take {} from it, got {} dimensions", t.name, name,
                                  t.shape.size()));
  }
  if (begin < 0 || count < 0 || begin + count > t.cols()) {
    throw ConfigError(fmt::format("tensor '{}' has {} elements; {} needs [{}, {})", t.name, t.cols(), name, begin,
                                  begin + count));
  }
  const int64_t eb = ElementBytes(t, "slicing a vector");
  TensorView out = t;
  out.name = fmt::format("{} ({})", t.name, name);
  out.shape = {count};
  out.data = static_cast<const uint8_t*>(t.data) + begin * eb;
  out.n_bytes = count * eb;
  return out;
}

TensorView GatherRows(const TensorView& t, const std::vector<int64_t>& rows, const std::string& name) {
  const bool vector = t.shape.size() == 1;
  const int64_t n_rows = vector ? t.cols() : t.rows();
  const int64_t row_bytes = vector ? ElementBytes(t, "reordering a vector") : t.RowBytes();
  std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes * static_cast<int64_t>(rows.size())));
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= n_rows) {
      throw ConfigError(fmt::format("{}: row {} of tensor '{}' (of {}) does not exist", name, rows[i], t.name,
                                    n_rows));
    }
    std::memcpy(bytes.data() + static_cast<int64_t>(i) * row_bytes,
                static_cast<const uint8_t*>(t.data) + rows[i] * row_bytes, static_cast<size_t>(row_bytes));
  }
  std::vector<int64_t> shape = vector ? std::vector<int64_t>{static_cast<int64_t>(rows.size())}
                                      : std::vector<int64_t>{static_cast<int64_t>(rows.size()), t.cols()};
  return Owned(t, std::move(bytes), std::move(shape));
}

TensorView Transpose(const TensorView& t) {
  if (t.shape.size() != 2) {
    throw ConfigError(fmt::format("tensor '{}' must be a matrix to transpose, got {} dimensions", t.name,
                                  t.shape.size()));
  }
  const int64_t eb = ElementBytes(t, "transposing");
  const int64_t r = t.shape[0], c = t.shape[1];
  std::vector<uint8_t> bytes(static_cast<size_t>(r * c * eb));
  const uint8_t* src = static_cast<const uint8_t*>(t.data);
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      std::memcpy(bytes.data() + (j * r + i) * eb, src + (i * c + j) * eb, static_cast<size_t>(eb));
    }
  }
  return Owned(t, std::move(bytes), {c, r});
}

}  // namespace posenc
