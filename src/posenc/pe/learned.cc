// Learned absolute positional embedding: forward beside backward (llm.c style), init, SGD, save/load.
#include "posenc/pe/learned.h"

#include <fmt/format.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <system_error>

#include "posenc/core/errors.h"
#include "posenc/core/random.h"
#include "posenc/io/input_file.h"
#include "posenc/io/output_file.h"
#include "posenc/kernels/pe_kernels.h"

namespace posenc {
namespace {

constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / 8;  // bytes fit in int64, with room

// --- validation ------------------------------------------------------------------------------------------

std::string RangeMessage(std::string_view what, int64_t position, int64_t max_seq_len) {
  return fmt::format("{} = {} is outside the learned table [0, max_seq_len = {})", what, position, max_seq_len);
}

// Every position_ids[t] in [0, max_seq_len), checked before anything is written.
void CheckPositions(std::span<const int64_t> position_ids, int64_t max_seq_len) {
  for (std::size_t t = 0; t < position_ids.size(); ++t) {
    const int64_t p = position_ids[t];
    if (p < 0 || p >= max_seq_len) {
      throw RangeError(RangeMessage(fmt::format("position_ids[{}]", t), p, max_seq_len));
    }
  }
}

// Implicit positions offset + t, t in [0, n_tokens), all in [0, max_seq_len); no int64 overflow.
void CheckOffset(int64_t offset, int64_t n_tokens, int64_t max_seq_len) {
  if (n_tokens < 0) throw ShapeError(fmt::format("n_tokens must be >= 0, got {}", n_tokens));
  if (n_tokens == 0) return;
  if (offset < 0) {
    throw RangeError(fmt::format("{} (offset = {}, n_tokens = {})",
                                 RangeMessage("position offset + 0", offset, max_seq_len), offset, n_tokens));
  }
  if (offset > max_seq_len - n_tokens) {
    // First bad token: t = max(max_seq_len - offset, 0); its position offset + t does not overflow.
    const int64_t t = offset >= max_seq_len ? 0 : max_seq_len - offset;
    throw RangeError(fmt::format("{} (offset = {}, n_tokens = {})",
                                 RangeMessage(fmt::format("position offset + {}", t), offset + t, max_seq_len), offset,
                                 n_tokens));
  }
}

void CheckSize(std::string_view what, std::size_t size, int64_t n_rows, std::string_view rows_name, int64_t d_model) {
  const std::size_t d = static_cast<std::size_t>(d_model);
  const std::size_t rows = static_cast<std::size_t>(n_rows);
  if (rows > std::numeric_limits<std::size_t>::max() / d || size != rows * d) {
    throw ShapeError(
        fmt::format("{} has {} floats, expected {} * d_model = {} * {}", what, size, rows_name, n_rows, d_model));
  }
}

// Rows of a caller-owned table of `size` floats with d_model channels (size a positive multiple of d_model).
int64_t TableRows(std::size_t size, int64_t d_model) {
  if (d_model < 1) throw ConfigError(fmt::format("d_model must be >= 1, got {}", d_model));
  const std::size_t d = static_cast<std::size_t>(d_model);
  if (size == 0 || size % d != 0) {
    throw ShapeError(fmt::format("table has {} floats, expected max_seq_len * d_model with max_seq_len >= 1 and "
                                 "d_model = {}", size, d_model));
  }
  return static_cast<int64_t>(size / d);
}

// --- kernel calls (validated inputs only) ---------------------------------------------------------------

// The row move of one call: token rows [n_tokens, d_model] contiguous, the table [max_seq_len, d_model];
// row of token t = position_ids[t] (explicit) or offset + t (position_ids empty).
kernels::PeRowsArgs RowsArgs(kernels::PeRowsOp op, int64_t d_model, int64_t n_tokens, const float* tokens,
                             const float* table, const int64_t* position_ids, int64_t offset) {
  // The kernel takes non-const pointers for both sides; it writes only the side `op` names (tokens for the
  // gathers, the table for kScatterAdd), so the const_casts never lead to a write through a const object.
  return {.op = op,
          .n_tokens = n_tokens,
          .d_model = d_model,
          .tokens = const_cast<float*>(tokens),
          .token_stride = d_model,
          .table = const_cast<float*>(table),
          .table_stride = d_model,
          .rows = position_ids,
          .row_offset = offset};
}

std::string PathName(const std::filesystem::path& path) { return fmt::format("'{}'", path.string()); }

// Bytes as text, with anything outside printable ASCII shown as '?'.
std::string Printable(const unsigned char* bytes, std::size_t n) {
  std::string s(n, '?');
  for (std::size_t i = 0; i < n; ++i) {
    if (bytes[i] >= 0x20 && bytes[i] < 0x7f) s[i] = static_cast<char>(bytes[i]);
  }
  return s;
}

// --- little-endian byte helpers for the file format ------------------------------------------------------

void PutU32(unsigned char* p, uint32_t v) {
  for (int b = 0; b < 4; ++b) p[b] = static_cast<unsigned char>(v >> (8 * b));
}
void PutI64(unsigned char* p, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  for (int b = 0; b < 8; ++b) p[b] = static_cast<unsigned char>(u >> (8 * b));
}
uint32_t GetU32(const unsigned char* p) {
  uint32_t v = 0;
  for (int b = 0; b < 4; ++b) v |= static_cast<uint32_t>(p[b]) << (8 * b);
  return v;
}
int64_t GetI64(const unsigned char* p) {
  uint64_t u = 0;
  for (int b = 0; b < 8; ++b) u |= static_cast<uint64_t>(p[b]) << (8 * b);
  return static_cast<int64_t>(u);
}

}  // namespace

// ===== table ===============================================================================================

LearnedPositionalEmbedding::LearnedPositionalEmbedding(int64_t max_seq_len, int64_t d_model)
    : max_seq_len_(max_seq_len), d_model_(d_model) {
  if (max_seq_len < 1) throw ConfigError(fmt::format("max_seq_len must be >= 1, got {}", max_seq_len));
  if (d_model < 1) throw ConfigError(fmt::format("d_model must be >= 1, got {}", d_model));
  if (max_seq_len > kMaxElements / d_model) {
    throw ConfigError(fmt::format("max_seq_len * d_model = {} * {} is too large for one table", max_seq_len, d_model));
  }
  table_.assign(static_cast<std::size_t>(max_seq_len * d_model), 0.0f);
}

std::span<const float> LearnedPositionalEmbedding::Row(int64_t position) const {
  if (position < 0 || position >= max_seq_len_) throw RangeError(RangeMessage("position", position, max_seq_len_));
  const std::size_t d = static_cast<std::size_t>(d_model_);
  return std::span<const float>(table_).subspan(static_cast<std::size_t>(position) * d, d);
}

void InitLearnedPeNormal(LearnedPositionalEmbedding& pe, uint64_t seed, double stddev) {
  if (!std::isfinite(stddev) || stddev < 0.0) {
    throw ConfigError(fmt::format("stddev must be a finite number >= 0, got {}", stddev));
  }
  std::mt19937_64 g(seed);
  FillNormal(pe.table(), g, stddev);
}

// ===== forward =============================================================================================

void LearnedPeForward(const LearnedPositionalEmbedding& pe, std::span<const int64_t> position_ids,
                      std::span<float> out) {
  // position_ids [n_tokens], out [n_tokens, d_model], table [max_seq_len, d_model]
  const int64_t n_tokens = static_cast<int64_t>(position_ids.size());
  CheckSize("out", out.size(), n_tokens, "n_tokens", pe.d_model());
  CheckPositions(position_ids, pe.max_seq_len());
  kernels::PeRowsKernel(RowsArgs(kernels::PeRowsOp::kGather, pe.d_model(), n_tokens, out.data(), pe.table().data(),
                                 position_ids.data(), 0));
}

void LearnedPeForward(const LearnedPositionalEmbedding& pe, int64_t offset, int64_t n_tokens, std::span<float> out) {
  // out [n_tokens, d_model]; row of token t = offset + t
  CheckOffset(offset, n_tokens, pe.max_seq_len());
  CheckSize("out", out.size(), n_tokens, "n_tokens", pe.d_model());
  kernels::PeRowsKernel(
      RowsArgs(kernels::PeRowsOp::kGather, pe.d_model(), n_tokens, out.data(), pe.table().data(), nullptr, offset));
}

void LearnedPeForwardAdd(const LearnedPositionalEmbedding& pe, std::span<const int64_t> position_ids,
                         std::span<float> x) {
  // position_ids [n_tokens], x [n_tokens, d_model] (+=)
  const int64_t n_tokens = static_cast<int64_t>(position_ids.size());
  CheckSize("x", x.size(), n_tokens, "n_tokens", pe.d_model());
  CheckPositions(position_ids, pe.max_seq_len());
  kernels::PeRowsKernel(RowsArgs(kernels::PeRowsOp::kGatherAdd, pe.d_model(), n_tokens, x.data(), pe.table().data(),
                                 position_ids.data(), 0));
}

void LearnedPeForwardAdd(const LearnedPositionalEmbedding& pe, int64_t offset, int64_t n_tokens, std::span<float> x) {
  LearnedPeForwardAdd(pe.table(), pe.d_model(), offset, n_tokens, x);
}

void LearnedPeForwardAdd(std::span<const float> table, int64_t d_model, int64_t offset, int64_t n_tokens,
                         std::span<float> x) {
  // table [max_seq_len, d_model], x [n_tokens, d_model] (+=); row of token t = offset + t
  const int64_t max_seq_len = TableRows(table.size(), d_model);
  CheckOffset(offset, n_tokens, max_seq_len);
  CheckSize("x", x.size(), n_tokens, "n_tokens", d_model);
  kernels::PeRowsKernel(
      RowsArgs(kernels::PeRowsOp::kGatherAdd, d_model, n_tokens, x.data(), table.data(), nullptr, offset));
}

// ===== backward ============================================================================================

void LearnedPeBackward(const LearnedPositionalEmbedding& pe, std::span<const int64_t> position_ids,
                       std::span<const float> dout, std::span<float> dtable) {
  // position_ids [n_tokens], dout [n_tokens, d_model], dtable [max_seq_len, d_model] (+=)
  const int64_t n_tokens = static_cast<int64_t>(position_ids.size());
  CheckSize("dout", dout.size(), n_tokens, "n_tokens", pe.d_model());
  CheckSize("dtable", dtable.size(), pe.max_seq_len(), "max_seq_len", pe.d_model());
  CheckPositions(position_ids, pe.max_seq_len());
  kernels::PeRowsKernel(RowsArgs(kernels::PeRowsOp::kScatterAdd, pe.d_model(), n_tokens, dout.data(), dtable.data(),
                                 position_ids.data(), 0));
}

void LearnedPeBackward(const LearnedPositionalEmbedding& pe, int64_t offset, int64_t n_tokens,
                       std::span<const float> dout, std::span<float> dtable) {
  CheckSize("dtable", dtable.size(), pe.max_seq_len(), "max_seq_len", pe.d_model());
  LearnedPeBackward(pe.d_model(), offset, n_tokens, dout, dtable);
}

void LearnedPeBackward(int64_t d_model, int64_t offset, int64_t n_tokens, std::span<const float> dout,
                       std::span<float> dtable) {
  // dout [n_tokens, d_model], dtable [max_seq_len, d_model] (+=); row of token t = offset + t
  const int64_t max_seq_len = TableRows(dtable.size(), d_model);
  CheckOffset(offset, n_tokens, max_seq_len);
  CheckSize("dout", dout.size(), n_tokens, "n_tokens", d_model);
  kernels::PeRowsKernel(
      RowsArgs(kernels::PeRowsOp::kScatterAdd, d_model, n_tokens, dout.data(), dtable.data(), nullptr, offset));
}

void LearnedPeSgdStep(LearnedPositionalEmbedding& pe, std::span<const float> dtable, float learning_rate) {
  CheckSize("dtable", dtable.size(), pe.max_seq_len(), "max_seq_len", pe.d_model());
  if (!std::isfinite(learning_rate)) {
    throw ConfigError(fmt::format("learning_rate must be finite, got {}", learning_rate));
  }
  std::span<float> w = pe.table();
  kernels::PeSgdKernel(w.data(), dtable.data(), static_cast<int64_t>(w.size()), learning_rate);
}

// ===== save / load =========================================================================================

void SaveLearnedPe(const LearnedPositionalEmbedding& pe, const std::filesystem::path& path) {
  unsigned char header[kLearnedPeHeaderBytes] = {};
  std::memcpy(header, kLearnedPeMagic, 8);
  PutU32(header + 8, kLearnedPeVersion);
  PutU32(header + 12, 0);  // dtype: float32
  PutI64(header + 16, pe.max_seq_len());
  PutI64(header + 24, pe.d_model());
  std::span<const float> w = pe.table();
  std::string bytes(sizeof(header) + w.size() * 4, '\0');
  std::memcpy(bytes.data(), header, sizeof(header));
  for (std::size_t i = 0; i < w.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &w[i], 4);
    PutU32(reinterpret_cast<unsigned char*>(bytes.data()) + sizeof(header) + 4 * i, bits);
  }
  WriteFileAtomically(path.string(), bytes);
}

LearnedPositionalEmbedding LoadLearnedPe(const std::filesystem::path& path) {
  const auto file_bytes = static_cast<uintmax_t>(RequireRegularFile(path.string(), "learned-PE file"));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(fmt::format("cannot open {} for reading", PathName(path)));
  if (file_bytes < static_cast<uintmax_t>(kLearnedPeHeaderBytes)) {
    throw IoError(fmt::format("{} is truncated: {} bytes, expected at least the {}-byte header", PathName(path),
                              file_bytes, kLearnedPeHeaderBytes));
  }
  unsigned char header[kLearnedPeHeaderBytes];
  if (!f.read(reinterpret_cast<char*>(header), sizeof(header))) {
    throw IoError(fmt::format("cannot read the {}-byte header of {}", kLearnedPeHeaderBytes, PathName(path)));
  }
  if (std::memcmp(header, kLearnedPeMagic, 8) != 0) {
    throw IoError(
        fmt::format("{} is not a posenc learned-PE file: magic is '{}', expected 'posencPE'"
                    " (write it with SaveLearnedPe)",
                    PathName(path), Printable(header, 8)));
  }
  const uint32_t version = GetU32(header + 8);
  if (version != kLearnedPeVersion) {
    throw IoError(fmt::format("{}: version is {}, expected {}", PathName(path), version, kLearnedPeVersion));
  }
  const uint32_t dtype = GetU32(header + 12);
  if (dtype != 0) throw IoError(fmt::format("{}: dtype is {}, expected 0 (float32)", PathName(path), dtype));
  const int64_t max_seq_len = GetI64(header + 16);
  const int64_t d_model = GetI64(header + 24);
  if (max_seq_len < 1) throw IoError(fmt::format("{}: max_seq_len is {}, expected >= 1", PathName(path), max_seq_len));
  if (d_model < 1) throw IoError(fmt::format("{}: d_model is {}, expected >= 1", PathName(path), d_model));
  if (max_seq_len > kMaxElements / d_model) {
    throw IoError(
        fmt::format("{}: max_seq_len * d_model = {} * {} is too large", PathName(path), max_seq_len, d_model));
  }
  const uintmax_t expected_bytes =
      static_cast<uintmax_t>(kLearnedPeHeaderBytes) + 4u * static_cast<uintmax_t>(max_seq_len * d_model);
  if (file_bytes != expected_bytes) {
    throw IoError(fmt::format(
        "{} is {}: expected {} bytes (32-byte header + 4 * max_seq_len * d_model = 4 * {} * {}), got {} bytes",
        PathName(path), file_bytes < expected_bytes ? "truncated" : "longer than its header says", expected_bytes,
        max_seq_len, d_model, file_bytes));
  }
  std::vector<unsigned char> data(static_cast<std::size_t>(expected_bytes) - kLearnedPeHeaderBytes);
  if (!f.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size()))) {
    throw IoError(fmt::format("{}: read {} of {} table bytes", PathName(path), f.gcount(), data.size()));
  }
  LearnedPositionalEmbedding pe(max_seq_len, d_model);
  std::span<float> w = pe.table();
  for (std::size_t i = 0; i < w.size(); ++i) {
    const uint32_t bits = GetU32(data.data() + 4 * i);
    std::memcpy(&w[i], &bits, 4);
    if (!std::isfinite(w[i])) {
      throw IoError(fmt::format("{}: table[{}, {}] is {}, expected a finite float32", PathName(path),
                                static_cast<int64_t>(i) / d_model, static_cast<int64_t>(i) % d_model, w[i]));
    }
  }
  return pe;
}

}  // namespace posenc
