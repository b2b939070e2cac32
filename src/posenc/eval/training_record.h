// What `posenc train` / `posenc finetune` recorded about a checkpoint in its report <checkpoint>.json, read back
// by `posenc eval` and `posenc passkey`: the RoPE the checkpoint was trained with (a llama2.c .bin cannot state
// it) and the held-out part of its text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/model/config.h"
#include "posenc/model/loader.h"
#include "posenc/model/transformer.h"

namespace posenc {

/// The fields of a training report (train/run.h TrainRunReportJson) that evaluation uses.
struct TrainingRecord {
  std::string report_path;     // <checkpoint>.json
  std::string method;          // rope.method: eval/methods.h name ("none", "yarn", ...)
  double factor = 1.0;         // rope.factor
  int64_t original_ctx = 0;    // rope.original_max_position_embeddings: L0 the method scaled from
  int64_t ctx = 0;             // the training window, tokens
  std::string split_rule;      // split.rule, in words
  bool has_split = false;      // the report states the texts and the split (older reports do not):
  std::string text_path;       //   text: the training text (absolute)
  std::string held_out_path;   //   held_out_text: empty when the text's own split held out
  int64_t n_documents = 0;     //   split.n_documents: documents of text_path at training time
  int64_t n_train_documents = 0;  // split.n_train_documents: the first ones trained, the rest held out
  std::string text_fingerprint;   //   split.text_fingerprint: FingerprintHex of the training text's bytes
                                  //   (dist/fingerprint.h); empty in older reports
};

/// What FindTrainingRecord found beside a checkpoint.
struct TrainingRecordLookup {
  std::optional<TrainingRecord> record;  // the checkpoint's training record, when found
  std::string note;  // when a file that could be the report exists but is not used: which and why; else empty
};

/// The training record of the checkpoint at `model_path`. The report looked for: `model_path + ".json"`; for a
/// checkpoint written after an --eval-at step, "<stem>.step<N><ext>", also "<stem><ext>.json" (the run's one
/// report); for a symbolic link, the same names beside the file it points to. The first that exists is used when
/// it is a posenc training report (`rope` and `split` objects) whose `checkpoints` name this file (by file
/// name, of the path or of the file it links to); otherwise `note` says which file was not used and why (not a
/// regular file, not JSON, not a training report, the report of other checkpoints). text, held_out_text and
/// split.n_documents / n_train_documents / text_fingerprint are read when present (has_split).
/// Errors: ConfigError naming the report and the key when it is a training report of this checkpoint with a key
///   missing or of the wrong type, a method a training run cannot record (none, linear, ntk, yarn, dynamic,
///   dynamic-hf are the ones it can), a factor < 1 or non-finite, an integer that is not one or out of range
///   (original_max_position_embeddings and ctx in [1, 2^31]; 1 <= n_train_documents <= n_documents <= 2^31).
TrainingRecordLookup FindTrainingRecord(const std::string& model_path);

/// The RoPE of every RoPE layer as the record states it, for a checkpoint whose format cannot (llama2.c):
/// MethodRopeParams(method, ctx, config with L0 = original_ctx, layer, factor) of each layer, and L0 =
/// original_ctx. A file that states its own RoPE (GGUF rope.scaling.*, an ntk-scaled rope.freq_base) keeps it;
/// only L0 is taken from the record, unless the file's scaling contradicts the record (another rope type, or a
/// factor that differs, for the linear and yarn the GGUF writer states): then the record is not applied at all
/// and a note says why. A recorded dynamic becomes the layers' dynamic NTK RoPE, which
/// native runs as dynamic-hf (BuildMethodRope), noted. Returns the notes to print (none when the record changes
/// nothing: method none at the file's own L0).
/// Errors: ConfigError if the model has no RoPE layer but the method is not none; as MethodRopeParams (llama3
///   and longrope need parameters a record does not hold) and ValidateModelConfig.
std::vector<std::string> ApplyTrainingRecord(const TrainingRecord& record, ModelFormat format, ModelConfig& config);

/// ApplyTrainingRecord on a loaded model (Transformer::SetPositionalSpec), its format from model_path
/// (DetectModelFormat). Returns the notes; errors as ApplyTrainingRecord.
std::vector<std::string> ApplyTrainingRecordTo(const TrainingRecord& record, const std::string& model_path,
                                               Transformer& model);

/// The held-out part in words: "documents 572-714 of 714 (held out by the training run, ft.bin.json)".
std::string HeldOutDescription(const TrainingRecord& record);

/// Which part of the record's texts `text_path` is, for the report (EvalReport::text_part): HeldOutDescription
/// when held_out_documents, "the held-out text of the training run (<report>)" when text_path is the run's
/// --holdout file, else empty.
std::string RecordTextPart(const TrainingRecord& record, const std::string& text_path, bool held_out_documents);

/// The held-out documents of the record's text: the bytes of `text` from the start of document
/// n_train_documents + 1 to the end, which SplitDocuments splits into exactly the held-out documents (a single
/// held-out document is returned as it is).
/// Errors: ConfigError if the record has no split (has_split), `text` is not the text the run read (its
///   fingerprint, when the record has one, or its number of documents differ: the text changed since training),
///   or nothing is held out.
std::string HeldOutDocuments(const TrainingRecord& record, const std::string& text);

}  // namespace posenc
