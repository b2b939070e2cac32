#include "posenc/eval/evaluate.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <chrono>
#include <limits>

#include <fmt/format.h>
#include <omp.h>

#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/core/threads.h"
#include "posenc/dist/fingerprint.h"
#include "posenc/dist/host.h"
#include "posenc/io/input_file.h"
#include "posenc/eval/documents.h"
#include "posenc/eval/run_checks.h"
#include "posenc/eval/windows.h"
#include "posenc/model/transformer.h"

namespace posenc {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool NoOwnPreRotationRows(const MethodRope& r) {
  for (const std::unique_ptr<PreRotationTables>& pre : r.pre_rotations) {
    if (pre == nullptr) continue;
    for (int64_t p = 0; p < std::min(r.ctx, pre->n_rows()); ++p) {
      if (!pre->shared(p)) return false;
    }
  }
  return true;
}

}  // namespace

void UpdatePairedDifferences(EvalReport& report) {
  if (!report.baseline) return;
  for (EvalRow& row : report.rows) {
    row.diff.reset();
    if (row.method == *report.baseline) continue;
    for (const EvalRow& base : report.rows) {
      if (base.ctx != row.ctx || base.method != *report.baseline) continue;
      if (base.result.unit_nll.size() != row.result.unit_nll.size() || row.result.unit_nll.empty()) break;
      row.diff = EstimatePairedDifference(row.result.unit_nll, base.result.unit_nll,
                                          row.result.mean_nll - base.result.mean_nll);
      break;
    }
  }
}

bool IdenticalForwardInputs(const MethodRope& a, const MethodRope& b) {
  if (a.ctx != b.ctx || a.layer_table.size() != b.layer_table.size() || a.absolute_scale != b.absolute_scale ||
      !NoOwnPreRotationRows(a) || !NoOwnPreRotationRows(b) || a.position_map || b.position_map) {
    return false;
  }
  for (size_t i = 0; i < a.layer_table.size(); ++i) {
    const int ta = a.layer_table[i], tb = b.layer_table[i];
    if ((ta < 0) != (tb < 0)) return false;
    if (ta < 0) continue;
    const CosSinTable& x = a.tables[static_cast<size_t>(ta)];
    const CosSinTable& y = b.tables[static_cast<size_t>(tb)];
    if (x.half != y.half || x.n_rows != y.n_rows || !SameBits(x.cos, y.cos) || !SameBits(x.sin, y.sin) ||
        std::bit_cast<uint32_t>(a.multipliers[static_cast<size_t>(ta)]) !=
            std::bit_cast<uint32_t>(b.multipliers[static_cast<size_t>(tb)])) {
      return false;
    }
  }
  return true;
}

EvalReport RunEval(const EvalOptions& options, const EvalProgress& progress) {
  if (options.ctx.empty()) throw ConfigError("ctx must list at least one context length, got none");
  CheckMethodList(options.methods);
  for (RopeMethod m : options.methods) {
    if (options.context_parallel && IsPositionMap(m)) {
      throw ConfigError(fmt::format("`context_parallel`: method '{}' is a position map, which the ring "
                                    "attention of context-parallel eval does not run; run it without "
                                    "`context_parallel`", RopeMethodName(m)));
    }
  }
  if (options.context_parallel && options.comm == nullptr) {
    throw ConfigError("`context_parallel` splits every window over MPI ranks: run it under "
                      "mpirun -np N (N >= 1 ranks; each window must have at least N tokens)");
  }
  EvalReport report;
  report.model_path = options.model_path;
  report.tokenizer_path = options.tokenizer_path;
  report.text_path = options.text_path;
  report.n_pred = options.n_pred;
  report.all_tokens = options.all_tokens;
  report.ctx = options.ctx;
  report.methods_per_ctx = static_cast<int64_t>(options.methods.size());
  report.protocol = options.protocol;
  report.baseline = options.baseline;
  report.yarn = options.method_options.yarn;
  report.llama3 = options.method_options.llama3;
  report.longrope = options.method_options.longrope;
  const bool posenc_protocol = options.protocol.protocol == EvalProtocol::kPosenc;
  if (options.comm != nullptr && (!posenc_protocol || options.all_tokens)) {
    throw ConfigError(fmt::format("`protocol` {}{} runs in one process; under mpirun only the posenc protocol with a "
                                  "number of tokens (`n_pred`) is split over the ranks",
                                  EvalProtocolName(options.protocol.protocol),
                                  options.all_tokens ? " with `all_tokens`" : ""));
  }
  const bool kl = options.kl_base_method.has_value() || !options.kl_base_file.empty();
  if (options.kl_base_method && !options.kl_base_file.empty()) {
    throw ConfigError("the KL base is a method (`kl_base_method`) or a file (`kl_base_file`), not both");
  }
  if (!options.save_logits.empty() && !options.kl_base_method) {
    throw ConfigError("`save_logits` writes the KL base method's log-probabilities: give `kl_base_method`");
  }
  if (kl && options.comm != nullptr) {
    throw ConfigError(fmt::format("{} runs in one process, not under mpirun",
                                  options.kl_base_method ? "`kl_base_method`" : "`kl_base_file`"));
  }
  report.kl_base = options.kl_base_method ? std::string(RopeMethodName(*options.kl_base_method)) : options.kl_base_file;
  report.threads = ResolveThreads(options.threads, "`threads`");

  // Everything that can be checked before the work is checked first: N against every ctx, the input files
  // (regular files: a directory or FIFO is refused before anything is opened), then, with the model's header,
  // every (ctx, method) pair's parameters and position buckets and the memory of the largest ctx, then N
  // against the stream length once the text is tokenized.
  if (posenc_protocol && !options.all_tokens) {
    ValidateWindows(std::numeric_limits<int64_t>::max(), options.n_pred, options.ctx);
  }
  if (options.held_out_documents && (!options.training_record || options.training_record->text_path !=
                                                                        options.text_path)) {
    throw ConfigError(fmt::format("held-out documents need the training record of text '{}'{}", options.text_path,
                                  options.training_record
                                      ? fmt::format(" ({} trained on '{}')", options.training_record->report_path,
                                                    options.training_record->text_path)
                                      : std::string()));
  }
  if (!options.tokenizer_path.empty()) RequireRegularFile(options.tokenizer_path, "tokenizer");
  RequireRegularFile(options.text_path, "text file");
  const auto t_load = std::chrono::steady_clock::now();
  std::vector<std::string> record_notes;
  Transformer model = LoadRunModel(options.model_path, options.weights, options.compute, options.load,
                                   options.training_record, options.train_ctx, record_notes);
  if (options.training_record) {
    const TrainingRecord& r = *options.training_record;
    std::error_code same_error;
    const bool training_text = r.has_split && !options.held_out_documents &&
                               std::filesystem::equivalent(options.text_path, r.text_path, same_error);
    if (training_text && r.held_out_path.empty()) {
      record_notes.push_back(fmt::format("the text is the one the checkpoint was trained on ({}): only documents "
                                         "{}-{} were held out", r.split_rule, r.n_train_documents + 1,
                                         r.n_documents));
    } else if (training_text) {
      record_notes.push_back(fmt::format("the text is the one the checkpoint was trained on, every document of it "
                                         "({}; the run held out {})", r.split_rule, r.held_out_path));
    }
    report.text_part = RecordTextPart(r, options.text_path, options.held_out_documents);
  }
  report.load_seconds = SecondsSince(t_load);
  // Each eval thread multiplies with its own OpenBLAS buffer: prove they fit under ulimit -v before any product.
  RequireBlasWorkspace(report.threads, fmt::format("eval with {} thread{} (`threads`)", report.threads,
                                                   report.threads == 1 ? "" : "s"),
                       "`threads`");
  report.config = model.config();
  report.model_summary = SummaryLine(model.summary());
  report.model_warnings = model.warnings();
  report.model_warnings.insert(report.model_warnings.end(), record_notes.begin(), record_notes.end());
  report.compute = DescribeCompute(options.compute, model.weights());
  report.compute_requested = options.compute;
  report.compute_kinds = ComputeKinds(model.weights());
  report.weights = options.weights;
  const bool any_pre_rotation =
      std::find(options.methods.begin(), options.methods.end(), RopeMethod::kDynamic) != options.methods.end();
  Communicator* const comm = options.comm;
  report.ranks = comm != nullptr ? comm->size() : 1;
  report.context_parallel = options.context_parallel;
  report.context_split = options.context_split;
  report.complete = comm == nullptr || comm->rank() == 0;
  const int ranks_here = comm != nullptr ? CountRanksOnThisHost(*comm) : 1;
  for (int64_t L : options.ctx) {
    if (options.context_parallel) MakeContextSplit(L, comm->size(), options.context_split);  // L >= ranks
    PositionBuckets(L, report.config.train_ctx);
    for (RopeMethod m : options.methods) ValidateMethodRope(m, L, report.config, options.method_options);
    CheckEvalMemory(L, report.threads, any_pre_rotation, report.config, ranks_here,
                    options.context_parallel ? comm->size() : 0);
  }
  const std::unique_ptr<Tokenizer> tokenizer = LoadRunTokenizer(options.model_path, options.tokenizer_path,
                                                                 options.parse_special, report.config.vocab_size,
                                                                 report.model_warnings);
  report.parse_special = options.parse_special;
  if (options.on_loaded) {
    std::string line = fmt::format("{} (loaded in {:.2f} s)\ncompute: {}", report.model_summary,
                                   report.load_seconds, report.compute);
    for (const std::string& w : report.model_warnings) line += fmt::format("\nnote: {}", w);
    options.on_loaded(line);
  }

  const auto t_tok = std::chrono::steady_clock::now();
  std::string text = ReadTextFile(options.text_path);
  if (text.empty()) throw IoError(fmt::format("text '{}' is empty (0 bytes): nothing to evaluate", options.text_path));
  if (options.held_out_documents) {
    const TrainingRecord& r = *options.training_record;  // checked above
    text = HeldOutDocuments(r, text);
  }
  const ProtocolTokens ptokens = TokenizeForProtocol(text, *tokenizer, options.protocol.protocol, options.add_bos);
  report.add_bos = ptokens.bos >= 0;
  report.tokenize_seconds = SecondsSince(t_tok);
  report.n_documents = ptokens.n_documents;
  report.stream_length = 0;
  for (const std::vector<int>& seq : ptokens.sequences) report.stream_length += static_cast<int64_t>(seq.size());
  for (const std::vector<int>& seq : ptokens.sequences) {
    for (size_t i = 0; i < seq.size() && report.first_ids.size() < 40; ++i) report.first_ids.push_back(seq[i]);
  }
  if (posenc_protocol && !options.all_tokens) ValidateWindows(report.stream_length, options.n_pred, options.ctx);
  // Every ctx's windows, before any forward pass (a text too short for one of them fails here).
  std::vector<ProtocolPlan> plans;
  for (int64_t L : options.ctx) {
    plans.push_back(BuildProtocolPlan(ptokens, L, options.protocol, options.n_pred, options.all_tokens));
  }
  const std::vector<int>& stream_ids = ptokens.sequences.at(0);  // posenc: the stream
  // A saved KL base must hold every ctx's predictions, token for token.
  std::vector<BaseLogProbs> file_bases;
  if (!options.kl_base_file.empty()) {
    file_bases = LoadBaseLogProbs(options.kl_base_file);
    for (const ProtocolPlan& plan : plans) {
      const auto it = std::find_if(file_bases.begin(), file_bases.end(),
                                   [&](const BaseLogProbs& b) { return b.ctx == plan.ctx; });
      if (it == file_bases.end()) {
        throw ConfigError(fmt::format("`kl_base_file` {}: no block for ctx {}", options.kl_base_file, plan.ctx));
      }
      if (it->vocab != report.config.vocab_size) {
        throw ConfigError(fmt::format("`kl_base_file` {}: vocabulary of {} tokens, the model's is {}",
                                      options.kl_base_file, it->vocab, report.config.vocab_size));
      }
      KlAccumulator check(plan, *it);  // ShapeError if its predictions are not this run's
    }
  }
  // A resumed row must be this run's row (compute paths, factor and position-map parameters), all checked before
  // any row is computed or written: a refused resume leaves its file as it was.
  if (!options.resume_rows.empty() && options.resume_compute_kinds != report.compute_kinds) {
    throw ConfigError(fmt::format("the resumed file's rows were computed on the compute path {}, this run's is {} "
                                  "({}): another run's arithmetic", options.resume_compute_kinds,
                                  report.compute_kinds, report.compute));
  }
  for (const EvalRow& resumed : options.resume_rows) {
    if (std::find(options.ctx.begin(), options.ctx.end(), resumed.ctx) == options.ctx.end() ||
        std::find(options.methods.begin(), options.methods.end(), resumed.method) == options.methods.end()) {
      continue;
    }
    const MethodRope rope = BuildMethodRope(resumed.method, resumed.ctx, report.config, options.method_options, 1);
    const std::string parameters = rope.position_map ? rope.position_map->parameters() : std::string();
    if (resumed.factor != rope.factor) {
      throw ConfigError(fmt::format("the resumed file's row ctx {} {} has factor {}, this run's is {}: another run",
                                    resumed.ctx, RopeMethodName(resumed.method), resumed.factor, rope.factor));
    }
    if (resumed.parameters != parameters) {
      throw ConfigError(fmt::format("the resumed file's row ctx {} {} has parameters '{}', this run's are '{}': "
                                    "another run", resumed.ctx, RopeMethodName(resumed.method), resumed.parameters,
                                    parameters));
    }
  }
  std::vector<BaseLogProbs> saved_bases;
  // Every rank has checked its own inputs; now they must all be evaluating the same thing.
  if (comm != nullptr) {
    const EvalInputsFingerprint fp = FingerprintEvalInputs(options, report.config.train_ctx);
    CheckSameOnAllRanks(*comm, fp.options, "eval options (`ctx`, `methods`, `n_pred`, L0, `weights`, `compute`, method "
                        "parameters, `reuse_identical_rows`, `context_parallel`, `context_split`)");
    CheckSameOnAllRanks(*comm, fp.model, "the model's contents (`model_path`)");
    CheckSameOnAllRanks(*comm, fp.tokenizer, "the tokenizer's contents (`tokenizer_path`)");
    CheckSameOnAllRanks(*comm, fp.text, "the text's contents (`text_path`)");
  }

  int64_t total_windows = 0;
  for (const ProtocolPlan& plan : plans) {
    total_windows += static_cast<int64_t>(options.methods.size()) * static_cast<int64_t>(plan.windows.size());
  }
  int64_t done_before = 0;
  SetBlasThreads(1);  // parallelism is across windows
  const auto t_eval = std::chrono::steady_clock::now();
  for (const ProtocolPlan& plan : plans) {
    const int64_t L = plan.ctx;
    const int64_t n_windows = static_cast<int64_t>(plan.windows.size());
    // Rows of this ctx computed so far that may be reused: (index in report.rows, its RoPE). Only ropes without
    // own pre-rotation rows are kept (the only ones IdenticalForwardInputs can accept; they are small).
    std::vector<std::pair<int64_t, MethodRope>> computed;
    // The KL base of this ctx: from the file, or one pass of the base method storing its log-probabilities.
    const BaseLogProbs* base = nullptr;
    BaseLogProbs own_base;
    if (!file_bases.empty()) {
      base = &*std::find_if(file_bases.begin(), file_bases.end(), [&](const BaseLogProbs& b) { return b.ctx == L; });
    } else if (options.kl_base_method) {
      own_base = MakeBaseLogProbs(plan, report.config.vocab_size);
      const MethodRope base_rope = BuildMethodRope(*options.kl_base_method, L, report.config, options.method_options);
      NllOfProtocolWindows(model, plan, base_rope, report.threads, {},
                           [&](int64_t k, const float* logits) { StoreBaseRow(own_base, k, logits); });
      base = &own_base;
    }
    for (RopeMethod m : options.methods) {
      const auto t_row = std::chrono::steady_clock::now();
      MethodRope rope = BuildMethodRope(m, L, report.config, options.method_options);
      EvalRow row;
      row.ctx = L;
      row.method = m;
      row.factor = rope.factor;
      if (rope.position_map) row.parameters = rope.position_map->parameters();
      if (options.reuse_identical_rows) {
        for (const auto& [index, earlier] : computed) {
          if (IdenticalForwardInputs(rope, earlier)) {
            row.same_as = index;
            break;
          }
        }
      }
      const EvalRow* resumed = nullptr;
      for (const EvalRow& r : options.resume_rows) {
        if (r.ctx == L && r.method == m) resumed = &r;
      }
      if (resumed != nullptr) {
        row = *resumed;
        const bool same_ctx_before = row.same_as >= 0 && row.same_as < static_cast<int64_t>(report.rows.size()) &&
                                     report.rows[static_cast<size_t>(row.same_as)].ctx == L;
        if (!same_ctx_before) row.same_as = -1;
        report.rows.push_back(std::move(row));
        done_before += n_windows;
        if (progress) progress(done_before, total_windows);
        if (report.complete) UpdatePairedDifferences(report);
        if (options.on_row) options.on_row(report, report.rows.size() - 1);
        continue;
      }
      if (row.same_as >= 0) {
        row.result = report.rows[static_cast<size_t>(row.same_as)].result;
        row.kl = report.rows[static_cast<size_t>(row.same_as)].kl;
        row.kl_buckets = report.rows[static_cast<size_t>(row.same_as)].kl_buckets;
        if (progress) progress(done_before + n_windows, total_windows);
      } else {
        std::function<void(int64_t, int64_t)> on_window;
        on_window = [&](int64_t done, int64_t) {
          if (options.interrupt != nullptr && options.interrupt->load()) {
            throw EvalInterrupted(fmt::format("interrupted in ctx {} {} after {} finished rows", L, RopeMethodName(m),
                                              report.rows.size()));
          }
          if (progress) progress(done_before + done, total_windows);
        };
        std::vector<double> nll;                      // posenc: [N], window-major
        std::vector<std::vector<double>> window_nll;  // other protocols: per window
        try {
          if (base != nullptr) {  // every protocol through the plan (the same bits for posenc windows)
            KlAccumulator acc(plan, *base);
            window_nll = NllOfProtocolWindows(model, plan, rope, report.threads, on_window,
                                              [&](int64_t k, const float* logits) { acc.Add(k, logits); });
            row.kl = acc.Total();
            row.kl_buckets = acc.Buckets(report.config.train_ctx);
          } else if (!posenc_protocol) {
            window_nll = NllOfProtocolWindows(model, plan, rope, report.threads, on_window);
          } else if (comm == nullptr) {
            nll = WindowedNll(model, stream_ids, plan.n_scored, rope, report.threads, on_window);
          } else if (options.context_parallel) {
            nll = ContextParallelNll(model, stream_ids, plan.n_scored, rope, options.context_split, *comm,
                                     &report.context_parallel_stats, on_window);
          } else {
            nll = DataParallelNll(model, stream_ids, plan.n_scored, rope, report.threads, *comm, on_window);
          }
        } catch (const NumericError& e) {
          throw NumericError(fmt::format("ctx {}, method {}: {}", L, RopeMethodName(m), e.what()));
        }
        if (report.complete) {
          row.result = posenc_protocol && window_nll.empty() ? SummarizeNll(nll, L, report.config.train_ctx)
                                                             : SummarizeProtocol(plan, window_nll, report.config.train_ctx);
        }
        if (NoOwnPreRotationRows(rope)) computed.emplace_back(static_cast<int64_t>(report.rows.size()), std::move(rope));
      }
      row.seconds = SecondsSince(t_row);
      report.rows.push_back(std::move(row));
      done_before += n_windows;
      if (report.complete) UpdatePairedDifferences(report);
      if (options.on_row) options.on_row(report, report.rows.size() - 1);
    }
    if (!options.save_logits.empty()) saved_bases.push_back(std::move(own_base));
  }
  report.eval_seconds = SecondsSince(t_eval);
  if (!options.save_logits.empty()) SaveBaseLogProbs(options.save_logits, saved_bases);
  return report;
}

}  // namespace posenc
