// Training checkpoints: a model file in (any format LoadModelFile reads) fills the flat parameter buffer by GGUF
// tensor name; the trained weights go out as a llama2.c checkpoint or a GGUF F32 file with the RoPE method
// recorded; and the resumable training state (weights, AdamW moments, step) as a GGUF file of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "posenc/model/loader.h"
#include "posenc/formats/gguf.h"
#include "posenc/train/optimizer.h"
#include "posenc/train/train_model.h"

namespace posenc {

/// The RoPE a checkpoint was fine-tuned with (recorded so an evaluation applies the same one).
struct CheckpointRope {
  std::string method = "none";  // eval/methods.h name: none, linear, ntk, yarn, dynamic, ...
  double factor = 1.0;          // scaling factor s
  int64_t original_ctx = 0;     // L0: the context the base model was trained at
  int64_t ctx = 0;              // the context fine-tuned at
  double rope_theta = 10000.0;  // base of the unscaled frequencies
};

/// The training shape of a loaded model: its sizes, tied classifier and q/k/v biases, RoPE positions, and
/// max_seq_len = `max_seq_len` (the longest window that will be trained or evaluated).
/// Errors: ConfigError naming the file and the architecture if it has absolute positions or no RoPE layer; then
/// CheckTrainable's (naming the architecture and the part the training layers lack: another block, a rotary_dim
/// below head_dim, RoPE scaling already, ...) and ValidateTrainShape's. rope_theta is the file's. Either
/// pair order is accepted: LoadParameters puts half-split q/k rows into the training layers' interleaved order.
/// ToModelConfig (train/config.h) builds the training model's ModelConfig from it.
TrainShape TrainConfigFromModelFile(const ModelFile& file, int64_t max_seq_len);

/// Copies every tensor of `file` into `model`'s flat buffer by its GGUF name (token_embd.weight,
/// blk.N.attn_q.weight, ...; the ModelFile views carry each format's own names, mapped here), dequantizing
/// rows with DequantizeRow. Every tensor of the layout is written exactly once. A half-split file (Hugging Face
/// folders, qwen2) has its q and k rows (and biases) reordered into interleaved pairs within each head, the
/// order the training layers rotate (q . k unchanged; llama.cpp's converter reorders the same way).
/// Errors: ShapeError naming the tensor if its element count differs from the layout's.
void LoadParameters(const ModelFile& file, TrainModel<float>& model);

/// Throws ConfigError naming `path` if a model of `config` cannot be written as a llama2.c checkpoint: position
/// encoding other than rope, rope_theta other than 10000 (the format has no field for it; run.c assumes 10000),
/// q/k/v biases, q/k norms, or head_dim != dim / n_heads. A run calls it before its first step.
void CheckLlama2cCheckpoint(const ModelConfig& config, const std::string& path);

/// Writes `model` as a llama2.c checkpoint ("version 0": 7 int32 header, float32 tensors in run.c order, the
/// legacy freq_cis block of seq_len * head_dim / 2 cos then sin values of the unscaled RoPE), atomically
/// (io/output_file.h). seq_len in the header is `rope.original_ctx` (the L0 an evaluation scales from).
/// llama2.c has no place for a RoPE method: the caller records it beside the file (the run's JSON report).
/// Errors: ConfigError as CheckLlama2cCheckpoint; IoError from the write.
/// Source: karpathy/llama2.c export.py `legacy_export`, run.c `memory_map_weights`.
void WriteLlama2cCheckpoint(const TrainModel<float>& model, const CheckpointRope& rope, const std::string& path);

/// Writes `model` as a GGUF v3 file of F32 tensors (general.architecture "llama", llama.* shape keys,
/// llama.context_length = rope.ctx, llama.rope.freq_base, llama.rope.dimension_count; a model with per-head q/k
/// norms as "qwen3" with qwen3.* keys, its q/k rows and norm weights in half-split pairs as llama.cpp's NEOX
/// mode reads them) with the method in
/// llama.cpp's keys where it has them: linear and yarn as llama.rope.scaling.type / factor /
/// original_context_length; ntk as the enlarged llama.rope.freq_base (theta s^(d/(d-2)), which is all static NTK
/// is). Every method is also written as posenc.rope.method and posenc.rope.factor (the only record of dynamic,
/// which GGUF has no key for). Metadata of `source` (e.g. the tokenizer of a GGUF input) is copied first. A
/// model with absolute positions writes posenc.position_encoding and position_embd.weight.
/// Errors: IoError from the write.
void WriteGgufCheckpoint(const TrainModel<float>& model, const CheckpointRope& rope, const GgufFile* source,
                         const std::string& path);

/// The options of a run a resumed run must share (a different value would silently train something else:
/// other RoPE tables, other windows, another schedule). `steps` may grow, and the schedule's length with it.
struct TrainRunSettings {
  std::string method;         // RoPE method name (RopeMethodName)
  double factor = 1.0;        // the resolved scaling factor
  int64_t ctx = 0;            // training window
  int64_t batch = 0;          // windows per step
  double lr = 0;              // peak learning rate
  double weight_decay = 0;    // AdamW decoupled weight decay
  double grad_clip = 0;       // max global gradient norm
  bool parse_special = false; // special tokens written in the texts were matched as their ids
  std::string texts;          // the texts trained and held out: "text <FingerprintHex>, held out: the last 20%
                              // of its documents" or "..., held out: <FingerprintHex of held_out_path>"; empty in
                              // states written before it was recorded (then not compared)
};

/// What a resumable training state holds besides the model.
struct TrainStateInfo {
  int64_t step = 0;       // steps finished
  uint64_t seed = 0;      // data and initialisation seed of the run
  std::string model_key;  // identifies the model: the shape JSON (TrainShapeToJson) as text
  TrainRunSettings settings;
};

/// Writes the weights, AdamW's moments (m, v) and `info` as a GGUF file (tensors "parameters", "adam.m",
/// "adam.v"; keys posenc.train.step, posenc.train.seed, posenc.train.model, posenc.train.<setting> for each
/// TrainRunSettings field (texts only when set), and posenc.train.checksum: TrainStateChecksum of all of it), atomically.
/// Errors: IoError from the write.
void WriteTrainState(const TrainModel<float>& model, const AdamW<float>& adamw, const TrainStateInfo& info,
                     const std::string& path);

/// A training state read back: its info and AdamW's moments [layout.total()] each.
struct TrainState {
  TrainStateInfo info;
  std::vector<float> m, v;
};

/// Reads a state written by WriteTrainState into `model` (its weights) and returns the info and the moments.
/// Errors: IoError/ConfigError from the GGUF reader (naming the file); ConfigError "`resume_path` FILE was written
/// for another model (...)" if its posenc.train.model differs from `model_key` (TrainModelKey of the run's shape);
/// ShapeError if a tensor's size differs from the layout's; IoError "`resume_path` FILE is damaged: its checksum ..."
/// when the weights, moments or keys read back differ from what was written (a flipped bit), or the state has no
/// checksum.
TrainState ReadTrainState(const std::string& path, TrainModel<float>& model, const std::string& model_key);

/// Refuses to resume a state with other settings than this run's: ConfigError "`resume_path` FILE was
/// trained with `method` yarn; this run asks for `method` linear (a resumed run keeps the options it started
/// with; only `steps` may grow)", naming the first option that differs (method, factor, ctx, batch, lr,
/// weight_decay, grad_clip, seed, parse_special, the texts: text_path and held_out_path, compared when the state records
/// them).
void CheckResumeSettings(const std::string& path, const TrainStateInfo& state, const TrainStateInfo& run);

/// The checksum stored in a state: the 64-bit Fingerprint (dist/fingerprint.h) of its keys (step, AdamW step,
/// seed, model key, settings) and of the bytes of its weights and moments. Errors: none.
uint64_t TrainStateChecksum(const TrainStateInfo& info, int64_t adam_step, std::span<const float> parameters,
                            std::span<const float> m, std::span<const float> v);

/// The model key of a config (its shape JSON as compact text), as stored in a training state.
std::string TrainModelKey(const TrainShape& config);

}  // namespace posenc
