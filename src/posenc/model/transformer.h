// A decoder-only transformer of any architecture posenc reads (model/arch/), ready to run: a forward pass over
// tokens at explicit positions (prefill, for eval), the same pass split over MPI ranks (context parallelism), and
// a KV-cache decode step (for generate). All three run the one decoder block (model/block.h) and differ only in
// their attention step.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "posenc/attention/kv_cache.h"
#include "posenc/attention/ring_attention.h"
#include "posenc/dist/communicator.h"
#include "posenc/model/block.h"
#include "posenc/model/config.h"
#include "posenc/model/loader.h"
#include "posenc/model/weights.h"

namespace posenc {

class Transformer {
 public:
  /// Builds the model from a loaded file (LoadModelFile): F32 tensors are used in place from the file's mapping
  /// (which this object keeps), other matrices converted to float32 once or kept encoded (`storage`), vectors
  /// (norms, biases) converted, Gemma's (1 + w) norms formed; every weight is checked finite.
  /// Errors:  IoError naming the file, the tensor, the element [row, column] and the value if a weight is NaN
  ///          or infinite (a NaN weight would otherwise become a plausible perplexity).
  /// `storage` says whether non-F32 matrices are converted at load or kept encoded (see WeightStorage); encoded
  /// matrices are checked finite row by row at load all the same. `compute` is the arithmetic of the prefill
  /// products (ComputePath; kBf16 also packs a bfloat16 copy of every matrix multiplied, see MakeWeightMatrix).
  /// Errors also: ConfigError from ResolveComputePath (bf16 on a CPU without oneDNN's bf16 matmul).
  explicit Transformer(const ModelFile& file, WeightStorage storage = WeightStorage::kAuto,
                       ComputePath compute = ComputePath::kF32);

  /// LoadModelFile(path, options), then the constructor. `path`: a .gguf file, a Hugging Face checkpoint folder
  /// or a llama2.c .bin. Errors: as LoadModelFile and the constructor.
  static Transformer Load(const std::string& path, WeightStorage storage = WeightStorage::kAuto,
                          ComputePath compute = ComputePath::kF32, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const TransformerWeights& weights() const { return weights_; }
  /// What the load message shows (format, dims, tensor types, L0, RoPE).
  const ModelFileSummary& summary() const { return summary_; }
  /// The loader's notes (defaults applied, details the format's runtime ignores).
  const std::vector<std::string>& warnings() const { return warnings_; }
  /// Overrides the training length L0 (a file whose metadata is wrong). Errors: ConfigError if l0 < 1.
  void SetTrainCtx(int64_t l0);
  /// Replaces every layer's positional spec and L0 by those of `config`, which must be this model's config
  /// otherwise (a training record's RoPE for a llama2.c checkpoint, which cannot state it).
  /// Errors: ConfigError if the number of layers differs, or as ValidateModelConfig(config).
  void SetPositionalSpec(const ModelConfig& config);

  /// Causal forward pass of one sequence: token t sits at position positions[t] (RoPE rows and absolute
  /// position rows are taken at it; the causal mask and sliding windows follow the row order, as transformers'
  /// masks follow cache positions). Every block (RunDecoderBlocks) with attention per layer: RoPE on q and k
  /// with rope.layers[l] (none for NoPE layers; pre-rotation rows for dynamic scaling), then causal attention
  /// with the layer's window, the model's query scale and soft-cap; a layer with a position map attends through
  /// MappedCausalAttention (positions must then not decrease). Then logits = classifier * hidden (final
  /// soft-cap if the model has one) for rows [logits_from, n_tokens) only.
  ///
  /// Shapes:  tokens [n], positions [n]; logits [n - logits_from, vocab_size], row-major, overwritten.
  /// Errors:  RangeError if a token id is outside [0, vocab_size), positions are not one per token or
  ///          negative, logits_from is outside [0, n], a layer's table lacks a position's row, or pre-rotation is
  ///          asked for with positions other than 0, 1, ..., n - 1; ShapeError if rope.layers has not one entry
  ///          per layer, a table's 2 * half exceeds head_dim, or pre-rotation tables' half differs from the
  ///          table's; NumericError naming the layer, the position, the head and channel, and the value if a
  ///          query, key or value (after RoPE), the residual stream after a block, or a logit is NaN or infinite.
  /// Source:  llama2.c run.c `forward` (one position at a time there; here all positions of the window);
  ///          transformers' *ForCausalLM.forward of each family; llama.cpp's graphs (src/models/*.cpp).
  void Forward(std::span<const int> tokens, std::span<const int64_t> positions, const ForwardRope& rope,
               ForwardState& state, float* logits, int64_t logits_from = 0) const;

  /// Forward without the classifier: every block, then the final norm. Afterwards state.xb holds the final
  /// hidden states [n, dim] (row t at positions[t]), ready for Logits() on any rows. Errors: as Forward.
  void ForwardHidden(std::span<const int> tokens, std::span<const int64_t> positions, const ForwardRope& rope,
                     ForwardState& state) const;

  /// ForwardHidden of one window computed by the ranks of `comm` together (context parallelism): this rank runs
  /// embeddings, norms, projections and the feed-forward for its rows only (split.ranges[comm.rank()], in
  /// ascending order), and attention with RingCausalAttention, so K/V blocks travel around the ring. q and k are
  /// rotated at their positions by the rank that holds them (for pre-rotation rows, by the rank that owns the
  /// query: keys travel unrotated, and positions must be 0, 1, ...). Collective: every rank calls it with the
  /// same tokens, positions, split and RoPE. Afterwards state.positions holds this rank's positions [n_local] and
  /// state.xb their final hidden states [n_local, dim], ready for Logits().
  ///
  /// Equals ForwardHidden within float32 rounding (attention merges the blocks in ring order: the bound of
  /// RingCausalAttention); the same on every transport and timing (deterministic merge order).
  /// Shapes:  tokens [L], positions [L] (the whole window, every rank); split of L rows over comm.size() ranks.
  /// Errors:  ShapeError if split.n_tokens != L or split.n_ranks() != comm.size(); ConfigError for a model with
  ///          sliding windows, attention soft-capping or a query_pre_attn_scalar (the ring has none of them), or
  ///          a layer with a position map; as
  ///          ForwardHidden; as RingCausalAttention (DistError when a peer fails or times out).
  /// stats:   if set, the ring's counts and times summed over the layers.
  /// Source:  Liu et al. 2023, Ring Attention (Sec. 3); NVIDIA TransformerEngine context parallelism (zigzag).
  void ForwardHiddenContextParallel(std::span<const int> tokens, std::span<const int64_t> positions,
                                    const ContextSplit& split, const ForwardRope& rope, ForwardState& state,
                                    Communicator& comm, RingScratch& ring, RingStats* stats = nullptr) const;

  /// logits = classifier * hidden for n rows (through Linear: one sgemm), soft-capped (final_logit_softcapping).
  /// Shapes:  hidden [n, dim] (row stride dim); logits [n, vocab_size], overwritten.
  /// Errors:  NumericError naming the position pos0 + t, the channel and the value if a logit is not finite.
  void Logits(const float* hidden, int64_t n, int64_t pos0, float* logits) const;

  /// One decode step: `token` at position `position` into cache slot s = cache.length() (the next slot), in
  /// every layer, then attention over slots [0, s] (within each layer's window). q and the new k are rotated at
  /// `position` with each layer's table; a kRotated cache stores that rotated key, a kUnrotated cache stores the
  /// raw key and rotates all keys at their own positions with the layer's table at use. So the tables are those
  /// current at this step: the same every step for static scalings, the one for length position + 1 for
  /// dynamic NTK.
  ///
  /// Shapes:  logits [vocab_size], overwritten; each table must have a row for every cached position.
  /// Errors:  RangeError if token is outside [0, vocab_size), the cache is full, position < 0 or a table lacks
  ///          a row; ShapeError if the cache's layers / kv heads / head_dim differ from the model's or rope.layers
  ///          has not one entry per layer; ConfigError if a layer has a position map (prefill only);
  ///          NumericError as Forward.
  /// Threads: the matrix-vector products are too small for BLAS threads to pay off; callers decoding in a
  ///          loop should SetBlasThreads(1) first (Generate does), else OpenBLAS may thread and spin-wait.
  /// Source:  llama2.c run.c `forward` + `generate`.
  void DecodeStep(int token, int64_t position, const ForwardRope& rope, KvCache& cache, ForwardState& state,
                  float* logits) const;

 private:
  const WeightMatrix& classifier() const;
  // ConfigError naming `path` and the layer if a layer of `rope` attends through a position map.
  void RefusePositionMaps(const ForwardRope& rope, const char* path) const;
  void CheckRope(const ForwardRope& rope, std::span<const int64_t> positions) const;

  ModelConfig config_;
  TransformerWeights weights_;
  ModelFileSummary summary_;
  std::vector<std::string> warnings_;
  std::vector<std::shared_ptr<const MappedFile>> files_;  // keeps in-place F32 weights mapped
};

}  // namespace posenc
