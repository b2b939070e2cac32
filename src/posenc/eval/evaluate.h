// `posenc eval` as a library call: one model, one text, every (ctx, method) pair -> perplexities.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "posenc/attention/context_split.h"
#include "posenc/core/errors.h"
#include "posenc/dist/communicator.h"
#include "posenc/eval/distributed.h"
#include "posenc/model/methods.h"
#include "posenc/eval/kl.h"
#include "posenc/eval/perplexity.h"
#include "posenc/eval/protocols.h"
#include "posenc/eval/training_record.h"
#include "posenc/eval/uncertainty.h"
#include "posenc/model/config.h"
#include "posenc/model/transformer.h"

namespace posenc {

/// One (ctx, method) row of the report.
struct EvalRow {
  int64_t ctx = 0;
  RopeMethod method = RopeMethod::kNone;
  double factor = 1.0;      // scaling factor handed to the library (see MethodRope::factor)
  PerplexityResult result;  // ppl, mean NLL, buckets
  double seconds = 0.0;     // wall time of this row (tables + forward passes + NLL; tables + check if reused)
  int64_t same_as = -1;     // >= 0: index in EvalReport::rows of the earlier row whose result this one copies
  std::string parameters;   // a position-map method's parameters as used (PositionMap::parameters), else empty
  std::optional<KlStats> kl;             // against the KL base (EvalOptions::kl_base_*) over the scored tokens
  std::vector<std::pair<PositionBucket, KlStats>> kl_buckets;  // per position bucket holding predictions
  std::optional<PairedDifference> diff;  // this row - the baseline row of the same ctx, paired over the units
                                         // (centre: the difference of the two mean_nll); unset for the baseline
                                         // row itself and when no baseline row exists
};

struct EvalReport;

/// Thrown by RunEval when EvalOptions::interrupt became true (Ctrl-C): the rows finished before were handed to
/// on_row; the row in progress is dropped.
class EvalInterrupted : public Error {
 public:
  using Error::Error;
};

/// What to evaluate. Defaults are the protocol's (the numpy oracle ref_llama2c.py, its docstring).
struct EvalOptions {
  std::string model_path;                                  // .gguf, Hugging Face folder or llama2.c .bin
  std::string tokenizer_path;                              // tokenizer (LoadModelTokenizer): llama2.c .bin,
                                                           // tokenizer.model, tokenizer.json or GGUF;
                                                           // empty: the model's own
  std::optional<int64_t> train_ctx;                        // overrides the file's training length L0, tokens
  WeightStorage weights = WeightStorage::kAuto;            // weight matrices: float32 at load or the file's
  ComputePath compute = ComputePath::kF32;                 // arithmetic of the prefill products (ComputePath)
  LoadOptions load;                                        // how strict the loader is (unused tensors)
  std::optional<bool> add_bos;                             // BOS at the start of each document; unset: the
                                                           // tokenizer's own rule (Tokenizer::add_bos_default)
  bool parse_special = false;                              // special tokens written in the text are matched
                                                           // (Tokenizer::set_parse_special); default: characters
  std::string text_path;                                   // UTF-8 text; <|endoftext|> lines split documents
  std::optional<TrainingRecord> training_record;           // the checkpoint's training report (FindTrainingRecord):
                                                           // its RoPE and L0 (ApplyTrainingRecord) before
                                                           // train_ctx; with held_out_documents, its split
  bool held_out_documents = false;                         // score only the record's held-out documents of
                                                           // text_path (HeldOutDocuments; needs the record and
                                                           // text_path == its text)
  std::vector<int64_t> ctx = {256, 512, 1024, 2048};       // window lengths L, tokens
  std::vector<RopeMethod> methods = DefaultRopeMethods();  // rows per ctx, in this order
  int64_t n_pred = 16384;                                  // N: the token budget (BuildProtocolPlan); posenc:
                                                           // first N+1 tokens of the stream
  bool all_tokens = false;                                 // --tokens all: the whole text (N ignored)
  ProtocolOptions protocol;                                // --protocol and its parameters
  std::optional<RopeMethod> baseline = RopeMethod::kNone;  // paired differences against this method's row of
                                                           // the same ctx (when it is among `methods`); unset:
                                                           // none
  std::optional<RopeMethod> kl_base_method;                // --kl-baseline METHOD: KL(base || row) per row
                                                           // against this method's distributions at each ctx
  std::string kl_base_file;                                // --kl-baseline FILE: the base's log-probabilities as
                                                           // --save-logits wrote them (LoadBaseLogProbs)
  std::string save_logits;                                 // --save-logits FILE: write kl_base_method's
                                                           // log-probabilities of every ctx (SaveBaseLogProbs)
  std::string resume_compute_kinds;                        // ComputeKinds of the run that wrote resume_rows
  std::vector<EvalRow> resume_rows;                        // rows of an earlier run (ReadResumeRows): a (ctx,
                                                           // method) found here is taken as it is, not computed
  const std::atomic<bool>* interrupt = nullptr;            // if set and true: stop at the next window, throwing
                                                           // EvalInterrupted (rows finished stay reported)
  std::function<void(const EvalReport& report, size_t row)> on_row;  // if set, called after every finished row
                                                           // (rows[0..row] final, their diffs as far as known)
  int threads = 0;                                         // OpenMP threads over windows (per rank); 0 = all
                                                           // cores
  MethodOptions method_options;                            // --factor, llama3 / longrope parameters
  std::function<void(const std::string& line)> on_loaded;  // if set, called once with the model's load line
                                                           // (SummaryLine + load time) before the work
  bool reuse_identical_rows = true;  // copy a row's result from an earlier row of the same ctx whose forward
                                     // inputs are identical bit for bit (IdenticalForwardInputs); false
                                     // computes every row
  Communicator* comm = nullptr;      // the ranks running this eval together (every rank calls RunEval with the
                                     // same options); null: this process alone
  bool context_parallel = false;     // with comm: split every window over the ranks (Ring Attention) instead of
                                     // dealing whole windows to them
  ContextSplitKind context_split = ContextSplitKind::kZigzag;  // positions per rank in context-parallel eval
};

/// Everything `posenc eval` prints.
struct EvalReport {
  std::string model_path;
  std::string tokenizer_path;
  std::string text_path;
  std::string text_part;          // which part of text_path was scored when not all of it, e.g. "documents
                                  // 572-714 of 714 (held out by the training run, ft.bin.json)"; else empty
  ModelConfig config;
  std::string model_summary;      // SummaryLine of the model file (format, dims, tensor types, L0, RoPE)
  std::vector<std::string> model_warnings;  // the loader's notes (ModelFile::warnings): defaults applied, details
                                            // the format's runtime ignores, unused tensors when allowed; then
                                            // the tokenizer's (Tokenizer::notes), each "tokenizer: ..."
  bool add_bos = true;            // whether each document began with BOS
  bool parse_special = false;     // whether special tokens in the text were matched (EvalOptions)
  std::string compute;            // DescribeCompute: the products' paths and the library kernels running them
  ComputePath compute_requested = ComputePath::kF32;  // EvalOptions::compute
  std::string compute_kinds;      // ComputeKinds: the paths the matrices took ("int8+f32"), what a resume checks
  WeightStorage weights = WeightStorage::kAuto;       // EvalOptions::weights
  double load_seconds = 0.0;      // LoadModelFile + weight conversion
  int64_t n_documents = 0;
  int64_t stream_length = 0;      // tokens in the whole stream
  int64_t n_pred = 0;             // N
  std::vector<int64_t> ctx;       // the window lengths asked, in order
  int64_t methods_per_ctx = 0;    // rows per ctx
  bool all_tokens = false;        // N = the whole text
  ProtocolOptions protocol;
  std::optional<RopeMethod> baseline;  // as EvalOptions::baseline
  std::string kl_base;            // the KL base: a method's name or a file; empty: no KL
  YarnOptions yarn;               // the yarn parameters set (EvalOptions::method_options.yarn)
  std::optional<RopeParams> llama3, longrope;  // the llama3 / longrope parameters given (method_options)
  std::vector<int> first_ids;     // the first min(40, stream_length) token ids
  std::vector<EvalRow> rows;      // ctx-major, methods in the order asked
  double tokenize_seconds = 0.0;  // reading + encoding the text
  double eval_seconds = 0.0;      // all rows
  int threads = 1;                // OpenMP threads used (per rank)
  int ranks = 1;                  // processes that ran the eval (comm's size)
  bool context_parallel = false;  // windows split over the ranks (else whole windows dealt to them)
  ContextSplitKind context_split = ContextSplitKind::kZigzag;
  ContextParallelStats context_parallel_stats;  // rank 0's, over every computed row (context-parallel only)
  bool complete = true;           // false on ranks other than 0 of a multi-rank run: rows hold no results
};

/// True if Transformer::Forward would run the very same computation for both: same ctx, the same cos/sin
/// table bit for bit (every entry; attention_factor is folded into it), the same softmax scale multiplier,
/// and neither uses pre-rotation rows with their own tables nor a position map (a PreRotationTables whose rows are all shared
/// counts as none: CausalAttentionPreRotation then calls CausalAttention). Forward is deterministic (windows
/// are independent; no result depends on the thread count), so equal inputs give equal NLLs bit for bit.
/// At ctx <= L0 every default method has factor 1 and passes this check against none; past L0 none does.
bool IdenticalForwardInputs(const MethodRope& a, const MethodRope& b);

/// Sets every row's diff against the baseline row (report.baseline) of its ctx: EstimatePairedDifference over
/// the rows' unit_nll, centred at the difference of their mean_nll. Rows without a baseline row (or the baseline
/// itself) get none. Errors: none (rows of one ctx share their units).
void UpdatePairedDifferences(EvalReport& report);

/// Progress of a run: windows finished so far and in total (all rows together).
using EvalProgress = std::function<void(int64_t done, int64_t total)>;

/// Runs the protocol: load the checkpoint and tokenizer, build the token stream of the text, then for every
/// ctx and method compute the NLL of the first N predictions in non-overlapping windows of ctx tokens, and
/// summarise (ppl, buckets). Every input is checked before any forward pass.
///
/// Order of the checks: N against every ctx; threads in [0, kMaxThreads]; the tokenizer (when given) and text
/// paths are regular files (a directory or FIFO is refused before opening); the model (LoadModelFile: a .gguf,
/// a Hugging Face folder or a llama2.c .bin; weights finite), then train_ctx; every (ctx, method)
/// pair's parameters and derived frequencies (ValidateMethodRope) and position buckets (L0 >= 2), and the memory
/// of each ctx; then the tokenizer (no more tokens than the model's vocab_size) and the text. So every error except a non-finite activation comes before the
/// first window.
/// Errors: IoError (checkpoint, tokenizer or text unreadable, not a regular file, truncated or inconsistent,
///   non-finite weights; "text '...' is empty"); ConfigError (N <= 0, N not a multiple of a ctx, text shorter
///   than N + 1 tokens, threads out of range, method parameters missing or invalid, a ctx needing more memory
///   than the machine has); NumericError naming ctx, method, window, layer and position if a forward pass meets
///   NaN or infinity; a tokenizer with more tokens than the
///   model's vocab_size; train_ctx < 2; everything LoadModelFile, LoadModelTokenizer and BuildMethodRope throw.
/// Reuse: with options.reuse_identical_rows, a row whose MethodRope passes IdenticalForwardInputs against an
///   earlier row of the same ctx copies that row's result (same_as set) instead of running the model again.
/// Threads: windows of one row run in parallel (OpenMP); the BLAS library is set to 1 thread meanwhile.
/// Results do not depend on the thread count.
/// Ranks: with options.comm (collective: every rank calls RunEval), every rank first checks its inputs as above,
///   then FingerprintEvalInputs is compared across the ranks (DistError on every rank naming the part that
///   differs: options, model, tokenizer or text), the memory check counts the ranks on this machine, then each
///   computed row's windows are dealt to the ranks (DataParallelNll: rows bit-identical to one process) or, with
///   context_parallel, every window is split over them (ContextParallelNll: within float32 rounding of
///   attention). Rank 0's report holds the results; the other ranks' rows hold ctx, method and factor only
///   (complete = false). Errors also: ConfigError if context_parallel is set without comm; RangeError if
///   context_parallel and a ctx is shorter than the number of ranks (before any window); DistError from the
///   communicator (a rank failed or timed out).
EvalReport RunEval(const EvalOptions& options, const EvalProgress& progress = {});

}  // namespace posenc
