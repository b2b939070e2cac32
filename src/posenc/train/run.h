// A training run from start to checkpoint: `posenc finetune` (a model file, a RoPE extension method, a longer
// context) and `posenc train` (a new model from a shape config): data split, batches, the step loop with its
// progress, held-out perplexity at chosen steps, interruption, resumption, and the checkpoints.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "posenc/train/config.h"

namespace posenc {

/// What a run trains and how.
struct TrainRunOptions {
  std::string model_path;                  // finetune: model file (LoadModelFile: GGUF, HF folder, llama2.c)
  std::optional<TrainShape> config;        // train: the shape of a new model (then model_path is empty)
  std::string config_path;                 // train: the file `config` was read from (checked against outputs)
  std::string tokenizer_path;              // empty: the model's own (GGUF / HF), else required for llama2.c
  bool parse_special = false;              // special tokens written in the text are matched as their ids
                                           // (Tokenizer::set_parse_special); default: plain characters
  std::string text_path;                   // UTF-8 text, "<|endoftext|>" lines split documents
  std::string held_out_path;               // empty: the last 20% of text_path's documents are held out
  std::string method = "none";             // RoPE while training and evaluating: eval/methods.h names
  std::optional<double> factor;            // scaling factor s; default max(1, ctx / L0)
  int64_t ctx = 0;                         // training window, tokens
  int64_t steps = 0;                       // optimizer steps in all (a resumed run continues up to it)
  int64_t batch = 8;                       // windows per step
  double lr = 3e-4;                        // peak learning rate
  double min_lr_fraction = 0.1;            // cosine floor as a fraction of lr
  std::optional<int64_t> warmup;           // warm-up steps (>= 0); unset: min(100, steps / 10)
  double weight_decay = 0.01;              // AdamW decoupled weight decay
  double grad_clip = 1.0;                  // max global gradient norm, 0: none
  uint64_t seed = 1;                       // data order and (train) initial weights
  std::vector<int64_t> eval_ctx;           // held-out perplexity at these window lengths (default: ctx)
  std::vector<int64_t> eval_at;            // ... after these steps, each with a checkpoint (default: steps)
  int64_t eval_tokens = 8192;              // held-out predictions per (step, length), rounded to whole windows
  std::string out_path;                    // checkpoint: ".bin" llama2.c, else GGUF F32
  std::string resume_path;                 // a state file written by an earlier run (<out>.state); the run
                                           // must have its method, factor, ctx, batch, lr, weight_decay,
                                           // grad_clip, seed and parse_special; steps may grow (the schedule then spans them)
};

/// One progress report, after each step.
struct TrainProgress {
  int64_t step = 0;          // steps finished
  int64_t steps = 0;         // steps in all
  double loss = 0;           // training loss of the last step (nats per token)
  double tokens_per_s = 0;   // training tokens per second over this run's steps so far
  double eta_s = 0;          // seconds left at that rate
};

/// Held-out perplexity of one checkpoint at one window length.
struct HeldOutPoint {
  int64_t step = 0;
  int64_t ctx = 0;
  double ppl = 0;           // exp(mean NLL) over `tokens` predictions; NaN when `error` is set
  int64_t tokens = 0;
  std::string error;        // why it could not be evaluated (e.g. a learned table shorter than ctx)
};

/// What a run did.
struct TrainRunReport {
  std::string model;                   // model path, or "new model (config)"
  std::string shape;                   // one line: dims, layers, heads, position encoding
  std::string split_rule;              // TrainText::rule
  std::string text_path;               // the training text (TrainRunOptions::text_path)
  std::string held_out_path;           // the held-out text, empty when the split of text_path holds out
  int64_t n_documents = 0;             // documents of text_path (TrainText::n_documents)
  int64_t n_train_documents = 0;       // of which the first n_train_documents trained
  std::string text_fingerprint;        // FingerprintHex of text_path's bytes (dist/fingerprint.h)
  std::vector<std::string> notes;      // the tokenizer's notes (Tokenizer::notes): a default it applied, a fallback
  bool parse_special = false;          // whether special tokens in the texts were matched (TrainRunOptions)
  int64_t train_tokens = 0, held_out_tokens = 0;
  std::string method;
  double factor = 1.0;
  int64_t original_ctx = 0;            // L0 the method scales from
  int64_t ctx = 0, batch = 0, steps = 0, first_step = 0;  // first_step > 0 when resumed
  std::vector<double> losses;          // training loss per step run here
  std::vector<HeldOutPoint> held_out;  // step-major
  std::vector<std::string> checkpoints;  // paths written, in step order
  std::string state_path;              // the resumable state
  std::string json_path;               // this report as JSON (also the record of the method)
  bool interrupted = false;            // stopped by the stop flag at step `steps_done`
  int64_t steps_done = 0;
  double seconds = 0;
};

/// Runs training. Checks everything it can before the first step: options, that --out (and <out>.state,
/// <out>.json) can be written and is none of the inputs, the text holds a batch, the held-out text holds every eval length, the resume
/// state belongs to this model. After every step `progress` is called (may be empty); when `*stop` becomes
/// true (Ctrl-C) the run saves a checkpoint and the state at the last finished step and returns with
/// interrupted set. A non-finite loss or gradient (NumericError naming step, layer and tensor) saves the last
/// good weights to <out>.state first and rethrows with that path added.
///
/// Writes: checkpoint `out` after the last step, "<stem>.step<N><ext>" after each other eval_at step,
/// "<out>.state" (GGUF: weights, AdamW moments, step) and "<out>.json" (this report; for a llama2.c checkpoint
/// it is where the method is recorded; also rewritten after each eval_at step, with the points so far). All
/// atomically.
/// Errors: ConfigError naming the flag and value (--steps < 1, --batch < 1, --ctx < 1, --warmup < 0, an unknown
///   method, a factor < 1, a method other than none for a model without RoPE, a model that already has RoPE
///   scaling, a --resume state trained with other settings: CheckResumeSettings); RangeError when the training
///   text is shorter than ctx + 1 tokens or than batch windows, the --holdout file holds no text, or the
///   held-out text is shorter than an eval length; IoError for an unwritable output, an output that is an input
///   (CheckRunPaths), or an unreadable input; the model reader's and ReadTrainState's errors (a damaged state);
///   NumericError as above.
TrainRunReport RunTraining(const TrainRunOptions& options, const std::function<void(const TrainProgress&)>& progress,
                           const std::atomic<bool>* stop);

/// The report as JSON (every field, the held-out table as rows {step, ctx, ppl, tokens, error}): what `posenc
/// eval` reads back of a checkpoint (eval/training_record.h): rope {method, factor,
/// original_max_position_embeddings}, ctx, text, held_out_text (null when the text's split holds out), split
/// {rule, n_documents, n_train_documents, text_fingerprint, train_tokens, held_out_tokens} and checkpoints.
std::string TrainRunReportJson(const TrainRunReport& report);

}  // namespace posenc
