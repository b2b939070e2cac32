#include "posenc/formats/llama2c.h"

#include <cstring>
#include <fstream>
#include <initializer_list>
#include <istream>
#include <limits>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/io/input_file.h"
#include "posenc/kernels/finite_kernels.h"

namespace posenc {
namespace {

constexpr int64_t kHeaderBytes = 7 * 4;

int32_t ReadInt32Le(const unsigned char* p) {
  const uint32_t u = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                     (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
  int32_t v;
  std::memcpy(&v, &u, 4);
  return v;
}

void RequirePositive(const char* field, int64_t value) {
  if (value <= 0) throw ConfigError(fmt::format("checkpoint header: {} must be > 0, got {}", field, value));
}

// a * b + c with an overflow check (all operands >= 0).
int64_t MulAdd(int64_t a, int64_t b, int64_t c) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (a != 0 && b > (kMax - c) / a) throw ConfigError("checkpoint header: tensor sizes overflow int64");
  return a * b + c;
}

std::string HeaderText(const Llama2cHeader& c) {
  return fmt::format("dim={} hidden_dim={} n_layers={} n_heads={} n_kv_heads={} vocab_size={}{} seq_len={}",
                     c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.shared_classifier ? "" : "-",
                     c.vocab_size, c.seq_len);
}

// Reads tensor `name` of shape dims (row-major, float32 little-endian, as is every platform posenc builds on)
// and refuses NaN or infinity: weights are checked once here so that no forward pass has to suspect them.
std::vector<float> ReadTensor(std::istream& in, const std::string& source, const char* name,
                              std::initializer_list<int64_t> dims) {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;  // CheckpointBytes has bounded every product by the file size
  std::vector<float> v(static_cast<size_t>(count));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * 4));
  if (in.gcount() != static_cast<std::streamsize>(count * 4)) {
    throw IoError(fmt::format("{}: short read in tensor {}: expected {} bytes, got {}", source, name, count * 4,
                              static_cast<int64_t>(in.gcount())));
  }
  const int64_t bad = kernels::FirstNonFinite(v.data(), count);
  if (bad >= 0) {
    std::string index;  // [layer, row, column] of the flat index
    int64_t rest = bad, stride = count;
    for (int64_t d : dims) {
      stride /= d;
      index += fmt::format("{}{}", index.empty() ? "" : ", ", rest / stride);
      rest %= stride;
    }
    throw IoError(fmt::format("{}: tensor {} holds a non-finite weight: element [{}] (flat index {} of {}) is {}; "
                              "a checkpoint with NaN or infinite weights cannot give meaningful numbers",
                              source, name, index, bad, count, v[static_cast<size_t>(bad)]));
  }
  return v;
}

}  // namespace

int64_t CheckpointBytes(const Llama2cHeader& c) {
  const int64_t head_dim = c.head_dim();
  const int64_t kv_dim = c.kv_dim();
  int64_t floats = 0;
  floats = MulAdd(c.vocab_size, c.dim, floats);                    // token embedding
  floats = MulAdd(c.n_layers, c.dim, floats);                      // rms_att
  floats = MulAdd(c.n_layers, MulAdd(c.dim, c.dim, 0), floats);    // wq
  floats = MulAdd(c.n_layers, MulAdd(kv_dim, c.dim, 0), floats);   // wk
  floats = MulAdd(c.n_layers, MulAdd(kv_dim, c.dim, 0), floats);   // wv
  floats = MulAdd(c.n_layers, MulAdd(c.dim, c.dim, 0), floats);    // wo
  floats = MulAdd(c.n_layers, c.dim, floats);                      // rms_ffn
  floats = MulAdd(c.n_layers, MulAdd(c.hidden_dim, c.dim, 0), floats);   // w1
  floats = MulAdd(c.n_layers, MulAdd(c.dim, c.hidden_dim, 0), floats);   // w2
  floats = MulAdd(c.n_layers, MulAdd(c.hidden_dim, c.dim, 0), floats);   // w3
  floats = MulAdd(1, c.dim, floats);                               // rms_final
  floats = MulAdd(c.seq_len, head_dim, floats);                    // legacy freq_cis real + imag
  if (!c.shared_classifier) floats = MulAdd(c.vocab_size, c.dim, floats);  // wcls
  return MulAdd(floats, 4, kHeaderBytes);
}

CheckpointLayout CheckpointTensorOffsets(const Llama2cHeader& c) {
  const int64_t L = c.n_layers;
  CheckpointLayout o;
  int64_t at = kHeaderBytes;
  auto next = [&](int64_t floats) {
    const int64_t here = at;
    at += floats * 4;
    return here;
  };
  o.token_embedding_table = next(c.vocab_size * c.dim);
  o.rms_att_weight = next(L * c.dim);
  o.wq = next(L * c.dim * c.dim);
  o.wk = next(L * c.kv_dim() * c.dim);
  o.wv = next(L * c.kv_dim() * c.dim);
  o.wo = next(L * c.dim * c.dim);
  o.rms_ffn_weight = next(L * c.dim);
  o.w1 = next(L * c.hidden_dim * c.dim);
  o.w2 = next(L * c.dim * c.hidden_dim);
  o.w3 = next(L * c.hidden_dim * c.dim);
  o.rms_final_weight = next(c.dim);
  next(c.seq_len * c.head_dim());  // legacy freq_cis_real + freq_cis_imag
  if (!c.shared_classifier) o.wcls = next(c.vocab_size * c.dim);
  return o;
}

Llama2cHeader ParseCheckpointHeader(std::span<const unsigned char> header, int64_t file_bytes) {
  if (static_cast<int64_t>(header.size()) < kHeaderBytes) {
    throw IoError(fmt::format("checkpoint header needs {} bytes, got {}", kHeaderBytes, header.size()));
  }
  int32_t h[7];
  for (int i = 0; i < 7; ++i) h[i] = ReadInt32Le(header.data() + 4 * i);
  Llama2cHeader c;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.shared_classifier = h[5] > 0;
  c.vocab_size = h[5] < 0 ? -static_cast<int64_t>(h[5]) : h[5];
  c.seq_len = h[6];
  RequirePositive("dim", c.dim);
  RequirePositive("hidden_dim", c.hidden_dim);
  RequirePositive("n_layers", c.n_layers);
  RequirePositive("n_heads", c.n_heads);
  RequirePositive("n_kv_heads", c.n_kv_heads);
  RequirePositive("vocab_size", c.vocab_size);
  RequirePositive("seq_len", c.seq_len);
  if (c.dim % c.n_heads != 0) {
    throw ConfigError(fmt::format("checkpoint header: dim must be a multiple of n_heads, got dim={} n_heads={}",
                                  c.dim, c.n_heads));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    throw ConfigError(fmt::format(
        "checkpoint header: n_heads must be a multiple of n_kv_heads, got n_heads={} n_kv_heads={}", c.n_heads,
        c.n_kv_heads));
  }
  if (c.head_dim() % 2 != 0) {
    throw ConfigError(fmt::format("checkpoint header: head_dim = dim / n_heads must be even for RoPE, got {}",
                                  c.head_dim()));
  }
  const int64_t expected = CheckpointBytes(c);
  if (file_bytes != expected) {
    throw IoError(fmt::format("checkpoint size: expected {} bytes for header ({}), got {} ({})", expected,
                              HeaderText(c), file_bytes, file_bytes < expected ? "truncated" : "trailing data"));
  }
  return c;
}

Checkpoint ReadCheckpoint(std::istream& in, int64_t file_bytes, const std::string& source) {
  unsigned char header[kHeaderBytes] = {};
  in.read(reinterpret_cast<char*>(header), kHeaderBytes);
  const auto got = static_cast<size_t>(in.gcount());
  Checkpoint ck;
  try {
    ck.config = ParseCheckpointHeader(std::span<const unsigned char>(header, got), file_bytes);
  } catch (const IoError& e) {
    throw IoError(fmt::format("{}: {}", source, e.what()));
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", source, e.what()));
  }
  const Llama2cHeader& c = ck.config;
  ModelWeights& w = ck.weights;
  const int64_t L = c.n_layers;
  w.token_embedding_table = ReadTensor(in, source, "token_embedding_table", {c.vocab_size, c.dim});
  w.rms_att_weight = ReadTensor(in, source, "rms_att_weight", {L, c.dim});
  w.wq = ReadTensor(in, source, "wq", {L, c.dim, c.dim});
  w.wk = ReadTensor(in, source, "wk", {L, c.kv_dim(), c.dim});
  w.wv = ReadTensor(in, source, "wv", {L, c.kv_dim(), c.dim});
  w.wo = ReadTensor(in, source, "wo", {L, c.dim, c.dim});
  w.rms_ffn_weight = ReadTensor(in, source, "rms_ffn_weight", {L, c.dim});
  w.w1 = ReadTensor(in, source, "w1", {L, c.hidden_dim, c.dim});
  w.w2 = ReadTensor(in, source, "w2", {L, c.dim, c.hidden_dim});
  w.w3 = ReadTensor(in, source, "w3", {L, c.hidden_dim, c.dim});
  w.rms_final_weight = ReadTensor(in, source, "rms_final_weight", {c.dim});
  // Legacy freq_cis_real / freq_cis_imag tables [seq_len, head_dim/2] each: obsolete, skipped as run.c does
  // (the angles are recomputed by posenc/rope).
  in.seekg(static_cast<std::streamoff>(c.seq_len * c.head_dim() * 4), std::ios::cur);
  if (!c.shared_classifier) w.wcls = ReadTensor(in, source, "wcls", {c.vocab_size, c.dim});
  return ck;
}

Checkpoint LoadCheckpoint(const std::string& path) {
  const int64_t file_bytes = RequireRegularFile(path, "checkpoint");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot open checkpoint '{}'", path));
  return ReadCheckpoint(in, file_bytes, path);
}

}  // namespace posenc
