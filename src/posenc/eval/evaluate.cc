#include "posenc/eval/evaluate.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>
#include <chrono>
#include <limits>

#include <fmt/format.h>
#include <omp.h>

#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/core/memory.h"
#include "posenc/core/threads.h"
#include "posenc/dist/fingerprint.h"
#include "posenc/dist/host.h"
#include "posenc/io/input_file.h"
#include "posenc/eval/documents.h"
#include "posenc/eval/windows.h"
#include "posenc/tokenizer/load.h"
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

// Memory one row at window length L needs at once on this machine: per thread the forward state (residual, q, k,
// v, attention output, FFN buffers, key blocks) of its tokens and the logits of up to 256 positions (WindowedNll's
// chunk); per row the cos/sin table, and for "dynamic" the pre-rotation tables of every query row ([L, L/8 blocks,
// 2, half, 8] floats). Context-parallel (cp_ranks > 0): one thread per rank holding at most 2 ceil(L / 2N)
// positions (its zigzag chunks) plus the two K/V blocks of the ring (4 kv_dim floats per position); the tables
// are whole on every rank. Everything times the ranks sharing this machine.
void CheckEvalMemory(int64_t L, int threads, bool pre_rotation, const ModelConfig& c, int ranks_here,
                     int cp_ranks) {
  const int64_t half = c.head_dim / 2;
  int64_t per_token = 2 * c.dim + 4 * c.q_dim() + 4 * c.kv_dim() + 2 * c.hidden_dim;  // floats
  int64_t tokens = L;
  if (cp_ranks > 0) {
    tokens = std::min<int64_t>(L, 2 * ((L + 2 * cp_ranks - 1) / (2 * cp_ranks)));
    per_token += 4 * c.kv_dim();
    threads = 1;
  }
  const int64_t per_thread = SaturatingAdd(SaturatingMul(tokens, per_token),
                                           SaturatingMul(std::min<int64_t>(tokens, 256), c.vocab_size));
  int64_t bytes = SaturatingMul(per_thread, 4 * static_cast<int64_t>(threads));
  bytes = SaturatingAdd(bytes, SaturatingMul(L, 2 * half * 4));
  if (pre_rotation) bytes = SaturatingAdd(bytes, SaturatingMul(SaturatingMul(L, L + 8), 2 * half * 4));
  bytes = SaturatingMul(bytes, ranks_here);
  const std::string who = cp_ranks > 0 ? fmt::format("split over {} ranks", cp_ranks)
                                       : fmt::format("with {} thread{}", threads, threads == 1 ? "" : "s");
  RequireMemory(bytes,
                fmt::format("ctx (--ctx) = {} {}{}", L, who,
                            ranks_here > 1 ? fmt::format(", {} ranks on this machine", ranks_here) : ""),
                fmt::format("activations of {} floats per token for {} tokens and logits of up to 256 positions per "
                            "thread{}{}", per_token, tokens,
                            pre_rotation ? ", and dynamic's per-row tables of L x L x head_dim floats" : "",
                            ranks_here > 1 ? ", per rank" : ""));
}

}  // namespace

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
  if (options.methods.empty()) throw ConfigError("methods must list at least one method, got none");
  if (options.context_parallel && options.comm == nullptr) {
    throw ConfigError("context_parallel (--context-parallel) splits every window over MPI ranks: run it under "
                      "mpirun -np N (N >= 1 ranks; each window must have at least N tokens)");
  }
  EvalReport report;
  report.model_path = options.model_path;
  report.tokenizer_path = options.tokenizer_path;
  report.text_path = options.text_path;
  report.n_pred = options.n_pred;
  report.threads = ResolveThreads(options.threads, "threads (--threads)");

  // Everything that can be checked before the work is checked first: N against every ctx, the input files
  // (regular files: a directory or FIFO is refused before anything is opened), then, with the model's header,
  // every (ctx, method) pair's parameters and position buckets and the memory of the largest ctx, then N
  // against the stream length once the text is tokenized.
  ValidateWindows(std::numeric_limits<int64_t>::max(), options.n_pred, options.ctx);
  if (!options.tokenizer_path.empty()) RequireRegularFile(options.tokenizer_path, "tokenizer");
  RequireRegularFile(options.text_path, "text file");
  const auto t_load = std::chrono::steady_clock::now();
  Transformer model = Transformer::Load(options.model_path, options.weights, options.compute, options.load);
  if (options.train_ctx) model.SetTrainCtx(*options.train_ctx);
  report.load_seconds = SecondsSince(t_load);
  report.config = model.config();
  report.model_summary = SummaryLine(model.summary());
  report.model_warnings = model.warnings();
  report.compute = DescribeComputePath(options.compute, ResolveComputePath(options.compute));
  if (options.on_loaded) {
    std::string line = fmt::format("{} (loaded in {:.2f} s)\ncompute: {}", report.model_summary,
                                   report.load_seconds, report.compute);
    for (const std::string& w : report.model_warnings) line += fmt::format("\nnote: {}", w);
    options.on_loaded(line);
  }
  const bool any_pre_rotation =
      std::find(options.methods.begin(), options.methods.end(), EvalMethod::kDynamic) != options.methods.end();
  Communicator* const comm = options.comm;
  report.ranks = comm != nullptr ? comm->size() : 1;
  report.context_parallel = options.context_parallel;
  report.context_split = options.context_split;
  report.complete = comm == nullptr || comm->rank() == 0;
  const int ranks_here = comm != nullptr ? CountRanksOnThisHost(*comm) : 1;
  for (int64_t L : options.ctx) {
    if (options.context_parallel) MakeContextSplit(L, comm->size(), options.context_split);  // L >= ranks
    PositionBuckets(L, report.config.train_ctx);
    for (EvalMethod m : options.methods) ValidateMethodRope(m, L, report.config, options.method_options);
    CheckEvalMemory(L, report.threads, any_pre_rotation, report.config, ranks_here,
                    options.context_parallel ? comm->size() : 0);
  }
  const std::unique_ptr<Tokenizer> tokenizer = LoadModelTokenizer(options.model_path, options.tokenizer_path);
  if (tokenizer->vocab_size() > report.config.vocab_size) {
    throw ConfigError(fmt::format("tokenizer '{}' has {} tokens but the model's vocab_size is {}: its ids would "
                                  "index past the embedding table",
                                  options.tokenizer_path.empty() ? options.model_path : options.tokenizer_path, tokenizer->vocab_size(), report.config.vocab_size));
  }

  const auto t_tok = std::chrono::steady_clock::now();
  const std::string text = ReadTextFile(options.text_path);
  if (text.empty()) throw IoError(fmt::format("text '{}' is empty (0 bytes): nothing to evaluate", options.text_path));
  const TokenStream stream = BuildTokenStream(text, *tokenizer, options.add_bos);
  report.add_bos = options.add_bos.value_or(tokenizer->add_bos_default());
  report.tokenize_seconds = SecondsSince(t_tok);
  report.n_documents = stream.n_documents;
  report.stream_length = static_cast<int64_t>(stream.ids.size());
  report.first_ids.assign(stream.ids.begin(),
                          stream.ids.begin() + std::min<int64_t>(40, report.stream_length));
  ValidateWindows(report.stream_length, options.n_pred, options.ctx);
  // Every rank has checked its own inputs; now they must all be evaluating the same thing.
  if (comm != nullptr) {
    const EvalInputsFingerprint fp = FingerprintEvalInputs(options, report.config.train_ctx);
    CheckSameOnAllRanks(*comm, fp.options, "eval options (--ctx, --methods, --tokens, L0, --weights, --compute, method "
                        "parameters, --no-reuse, --context-parallel, --context-split)");
    CheckSameOnAllRanks(*comm, fp.model, "the model's contents (--model)");
    CheckSameOnAllRanks(*comm, fp.tokenizer, "the tokenizer's contents (--tokenizer)");
    CheckSameOnAllRanks(*comm, fp.text, "the text's contents (--text)");
  }

  int64_t total_windows = 0;
  for (int64_t L : options.ctx) total_windows += static_cast<int64_t>(options.methods.size()) * (options.n_pred / L);
  int64_t done_before = 0;
  SetBlasThreads(1);  // parallelism is across windows
  const auto t_eval = std::chrono::steady_clock::now();
  for (int64_t L : options.ctx) {
    // Rows of this ctx computed so far that may be reused: (index in report.rows, its RoPE). Only ropes without
    // own pre-rotation rows are kept (the only ones IdenticalForwardInputs can accept; they are small).
    std::vector<std::pair<int64_t, MethodRope>> computed;
    for (EvalMethod m : options.methods) {
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
      if (row.same_as >= 0) {
        row.result = report.rows[static_cast<size_t>(row.same_as)].result;
        if (progress) progress(done_before + options.n_pred / L, total_windows);
      } else {
        std::function<void(int64_t, int64_t)> on_window;
        if (progress) on_window = [&](int64_t done, int64_t) { progress(done_before + done, total_windows); };
        std::vector<double> nll;
        try {
          if (comm == nullptr) {
            nll = WindowedNll(model, stream.ids, options.n_pred, rope, report.threads, on_window);
          } else if (options.context_parallel) {
            nll = ContextParallelNll(model, stream.ids, options.n_pred, rope, options.context_split, *comm,
                                     &report.context_parallel_stats, on_window);
          } else {
            nll = DataParallelNll(model, stream.ids, options.n_pred, rope, report.threads, *comm, on_window);
          }
        } catch (const NumericError& e) {
          throw NumericError(fmt::format("ctx {}, method {}: {}", L, EvalMethodName(m), e.what()));
        }
        if (report.complete) row.result = SummarizeNll(nll, L, report.config.train_ctx);
        if (NoOwnPreRotationRows(rope)) computed.emplace_back(static_cast<int64_t>(report.rows.size()), std::move(rope));
      }
      row.seconds = SecondsSince(t_row);
      report.rows.push_back(std::move(row));
      done_before += options.n_pred / L;
    }
  }
  report.eval_seconds = SecondsSince(t_eval);
  return report;
}

}  // namespace posenc
