// llama2.c checkpoint reader: bytes -> validated Llama2cHeader + ModelWeights (karpathy/llama2.c run.c,
// "version 0" legacy export: a 7-int32 header, then every float32 tensor in file order).
#pragma once

#include <cstdint>
#include <istream>
#include <span>
#include <string>
#include <vector>

namespace posenc {

/// The 7-int32 header of a llama2.c checkpoint, validated, plus what follows from it.
struct Llama2cHeader {
  int64_t dim = 0;          // model width (token embedding size)
  int64_t hidden_dim = 0;   // SwiGLU inner width
  int64_t n_layers = 0;
  int64_t n_heads = 0;      // query heads
  int64_t n_kv_heads = 0;   // key/value heads (GQA when < n_heads)
  int64_t vocab_size = 0;   // |header value|; the sign only says whether the classifier is shared
  int64_t seq_len = 0;      // training context length L0, tokens
  bool shared_classifier = true;  // header vocab_size > 0: logits use the token embedding table

  int64_t head_dim() const { return dim / n_heads; }             // llama2.c head_size
  int64_t kv_dim() const { return n_kv_heads * head_dim(); }     // width of k and v per token
  int64_t kv_mul() const { return n_heads / n_kv_heads; }        // query heads per kv head
};

/// Every tensor of a llama2.c checkpoint, float32, row-major; each matrix is [out][in] (y = W x).
/// Per-layer tensors are stacked layer-major, as in the file.
struct ModelWeights {
  std::vector<float> token_embedding_table;  // [vocab_size, dim]
  std::vector<float> rms_att_weight;         // [n_layers, dim]
  std::vector<float> wq;                     // [n_layers, n_heads * head_dim, dim]
  std::vector<float> wk;                     // [n_layers, kv_dim, dim]
  std::vector<float> wv;                     // [n_layers, kv_dim, dim]
  std::vector<float> wo;                     // [n_layers, dim, n_heads * head_dim]
  std::vector<float> rms_ffn_weight;         // [n_layers, dim]
  std::vector<float> w1;                     // [n_layers, hidden_dim, dim] (gate)
  std::vector<float> w2;                     // [n_layers, dim, hidden_dim] (down)
  std::vector<float> w3;                     // [n_layers, hidden_dim, dim] (up)
  std::vector<float> rms_final_weight;       // [dim]
  std::vector<float> wcls;                   // [vocab_size, dim]; empty when the classifier is shared

  /// The classifier matrix [vocab_size, dim]: wcls, or the token embedding table when shared.
  const float* classifier() const { return wcls.empty() ? token_embedding_table.data() : wcls.data(); }
};

/// A loaded checkpoint.
struct Checkpoint {
  Llama2cHeader config;
  ModelWeights weights;
};

/// Parses and validates the 28-byte header against the size of the whole file.
///
/// Shapes:  header = the first 28 bytes (7 little-endian int32: dim, hidden_dim, n_layers, n_heads,
///          n_kv_heads, vocab_size, seq_len); file_bytes = size of the whole checkpoint in bytes.
/// Errors:  IoError if fewer than 28 header bytes are given ("checkpoint header needs 28 bytes, got n").
///          ConfigError naming the field and value if dim, hidden_dim, n_layers, n_heads, n_kv_heads,
///          vocab_size (absolute value) or seq_len is <= 0, dim % n_heads != 0, n_heads % n_kv_heads != 0 or
///          head_dim = dim / n_heads is odd (RoPE rotates pairs). IoError if file_bytes differs from
///          CheckpointBytes(config) ("checkpoint size: expected E bytes for <header>, got A").
/// Source:  llama2.c run.c `read_checkpoint` (which checks none of this).
Llama2cHeader ParseCheckpointHeader(std::span<const unsigned char> header, int64_t file_bytes);

/// Exact size in bytes of a checkpoint with this config: 28 + 4 * (every tensor + the legacy freq_cis block
/// of seq_len * head_dim floats + the classifier when not shared). Computed in int64 with overflow checks.
/// Errors: ConfigError if the size does not fit in int64.
int64_t CheckpointBytes(const Llama2cHeader& config);

/// Byte offsets of each tensor of a llama2.c checkpoint in the file (run.c `memory_map_weights` order). Per-layer
/// tensors are stacked layer-major: layer l of wq starts at wq + l * (dim * dim) * 4.
struct CheckpointLayout {
  int64_t token_embedding_table = 0;  // [vocab_size, dim]
  int64_t rms_att_weight = 0;         // [n_layers, dim]
  int64_t wq = 0;                     // [n_layers, dim, dim]
  int64_t wk = 0;                     // [n_layers, kv_dim, dim]
  int64_t wv = 0;                     // [n_layers, kv_dim, dim]
  int64_t wo = 0;                     // [n_layers, dim, dim]
  int64_t rms_ffn_weight = 0;         // [n_layers, dim]
  int64_t w1 = 0;                     // [n_layers, hidden_dim, dim]
  int64_t w2 = 0;                     // [n_layers, dim, hidden_dim]
  int64_t w3 = 0;                     // [n_layers, hidden_dim, dim]
  int64_t rms_final_weight = 0;       // [dim]
  int64_t wcls = -1;                  // [vocab_size, dim]; -1 when the classifier is shared
};

/// The tensor offsets of a validated config (ParseCheckpointHeader has checked that they fit the file).
CheckpointLayout CheckpointTensorOffsets(const Llama2cHeader& config);

/// Reads a llama2.c checkpoint from a stream of `file_bytes` bytes positioned at its start. The header is
/// read and validated (ParseCheckpointHeader) against file_bytes before any tensor is read; every tensor is
/// then read in file order and checked finite. `source` names the data in messages (the path).
/// Errors: IoError on a short read (names the tensor) or a non-finite weight ("tensor wq holds a non-finite
///         weight: element [layer, row, column] (flat index i of n) is nan"); plus ParseCheckpointHeader's.
/// Source: llama2.c run.c `read_checkpoint` / `memory_map_weights` (file order, skipped freq_cis tables).
Checkpoint ReadCheckpoint(std::istream& in, int64_t file_bytes, const std::string& source);

/// Reads a llama2.c checkpoint file: RequireRegularFile (a directory or FIFO is refused before opening),
/// then ReadCheckpoint.
/// Errors: IoError if the path is not a readable regular file, with the path; plus ReadCheckpoint's.
Checkpoint LoadCheckpoint(const std::string& path);

}  // namespace posenc
