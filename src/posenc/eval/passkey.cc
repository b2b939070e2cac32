#include "posenc/eval/passkey.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <omp.h>

#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/core/threads.h"
#include "posenc/eval/documents.h"
#include "posenc/eval/run_checks.h"
#include "posenc/eval/window_loop.h"
#include "posenc/model/sampler.h"

namespace posenc {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Uniform in [0, 1) from the generator's next raw 64-bit output (std::uniform_*_distribution differ between
// standard libraries).
double DrawUnit(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }

// A key uniform in [1, kPasskeyMaxKey].
int64_t DrawKey(std::mt19937_64& g) {
  return 1 + static_cast<int64_t>(DrawUnit(g) * static_cast<double>(kPasskeyMaxKey));
}

// Prompt tokens of (key, n filler characters, the key at depth).
FittedPasskeyPrompt MakePrompt(const Tokenizer& tokenizer, bool add_bos, int64_t key, int64_t n, double depth) {
  FittedPasskeyPrompt p;
  p.filler_chars = n;
  p.prefix_chars = PasskeyPrefixChars(n, depth);
  p.text = PasskeyPromptText(key, n, p.prefix_chars);
  p.ids = tokenizer.Encode(p.text, add_bos);
  return p;
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string PasskeyKeyLine(int64_t key) {
  return fmt::format("The pass key is {}. Remember it. {} is the pass key.", key, key);
}

std::string PasskeyFillerText(int64_t n_chars) {
  if (n_chars < 0) throw RangeError(fmt::format("filler_chars must be >= 0, got {}", n_chars));
  std::string out;
  out.reserve(static_cast<size_t>(n_chars));
  while (static_cast<int64_t>(out.size()) < n_chars) {
    if (!out.empty()) out += ' ';
    out += kPasskeyFiller;
  }
  out.resize(static_cast<size_t>(n_chars));
  return out;
}

std::string PasskeyPromptText(int64_t key, int64_t filler_chars, int64_t prefix_chars) {
  if (prefix_chars < 0 || prefix_chars > filler_chars) {
    throw RangeError(fmt::format("prefix_chars must be in [0, filler_chars = {}], got {}", filler_chars, prefix_chars));
  }
  return fmt::format("{}\n{}\n{}\n{}\n{}", kPasskeyTask, PasskeyFillerText(prefix_chars), PasskeyKeyLine(key),
                     PasskeyFillerText(filler_chars - prefix_chars), kPasskeyQuestion);
}

int64_t PasskeyPrefixChars(int64_t filler_chars, double depth) {
  if (!(depth >= 0.0 && depth <= 1.0)) throw RangeError(fmt::format("depth must be in [0, 1], got {}", depth));
  if (filler_chars < 0) throw RangeError(fmt::format("filler_chars must be >= 0, got {}", filler_chars));
  return static_cast<int64_t>(std::llround(depth * static_cast<double>(filler_chars)));
}

std::vector<int64_t> PasskeyKeys(uint64_t seed, int64_t trials) {
  if (trials < 0) throw RangeError(fmt::format("trials must be >= 0, got {}", trials));
  std::mt19937_64 g(seed);
  std::vector<int64_t> keys(static_cast<size_t>(trials));
  for (int64_t& k : keys) k = DrawKey(g);
  return keys;
}

FittedPasskeyPrompt FitPasskeyPrompt(const Tokenizer& tokenizer, bool add_bos, int64_t max_tokens, int64_t key,
                                     double depth) {
  FittedPasskeyPrompt lo = MakePrompt(tokenizer, add_bos, key, 0, depth);
  if (static_cast<int64_t>(lo.ids.size()) > max_tokens) {
    throw ConfigError(fmt::format("the passkey prompt without filler has {} tokens, more than the {} it may hold",
                                  lo.ids.size(), max_tokens));
  }
  // Find hi with tokens(hi) > max_tokens (each token holds at least one character, so 2 x tokens + 64 characters
  // of filler always overflow once doubled enough), then bisect [lo, hi).
  int64_t hi = std::max<int64_t>(64, 2 * max_tokens);
  while (static_cast<int64_t>(MakePrompt(tokenizer, add_bos, key, hi, depth).ids.size()) <= max_tokens) hi *= 2;
  int64_t a = 0;  // tokens(a) <= max_tokens < tokens(hi)
  while (hi - a > 1) {
    const int64_t mid = a + (hi - a) / 2;
    FittedPasskeyPrompt p = MakePrompt(tokenizer, add_bos, key, mid, depth);
    if (static_cast<int64_t>(p.ids.size()) <= max_tokens) {
      a = mid;
      lo = std::move(p);
    } else {
      hi = mid;
    }
  }
  return lo;
}

std::optional<FirstInteger> FindFirstInteger(std::string_view text) {
  const auto start = std::find_if(text.begin(), text.end(), IsDigit);
  if (start == text.end()) return std::nullopt;
  const auto end = std::find_if_not(start, text.end(), IsDigit);
  return FirstInteger{std::string(start, end), end != text.end()};
}

bool SameInteger(std::string_view digits, int64_t key) {
  const size_t nz = digits.find_first_not_of('0');
  const std::string_view stripped = nz == std::string_view::npos ? std::string_view("0") : digits.substr(nz);
  return stripped == std::to_string(key);
}

std::vector<int> PasskeyDraft(const Tokenizer& tokenizer, bool add_bos, const std::string& prompt_text,
                              std::span<const int> prompt_ids, int64_t key) {
  const std::vector<int> full = tokenizer.Encode(fmt::format("{} {}.", prompt_text, key), add_bos);
  if (full.size() <= prompt_ids.size() || !std::equal(prompt_ids.begin(), prompt_ids.end(), full.begin())) return {};
  return std::vector<int>(full.begin() + static_cast<std::ptrdiff_t>(prompt_ids.size()), full.end());
}

PasskeyAnswer GreedyPasskeyAnswer(const Transformer& model, const ForwardRope& rope, const Tokenizer& tokenizer,
                                  std::span<const int> prompt, std::span<const int> draft, int64_t key,
                                  int64_t max_new_tokens, ForwardState& state) {
  if (prompt.empty()) throw ConfigError("the passkey prompt is empty");
  if (max_new_tokens < 1) throw ConfigError(fmt::format("max_new_tokens must be >= 1, got {}", max_new_tokens));
  const int64_t vocab = model.config().vocab_size;
  PasskeyAnswer a;
  std::vector<int> seq(prompt.begin(), prompt.end());
  std::vector<int64_t> positions;
  std::vector<float> logits, row;
  Sampler greedy(0.0f, 0.0f, 1);
  bool done = false;
  while (!done && static_cast<int64_t>(a.generated.size()) < max_new_tokens) {
    // The draft's remaining tokens while every token so far agreed with it; the pass then yields one token
    // more than it checks, so at most the budget left minus one.
    std::vector<int> check;
    const size_t g = a.generated.size();
    if (g < draft.size() && std::equal(a.generated.begin(), a.generated.end(), draft.begin())) {
      const size_t room = static_cast<size_t>(max_new_tokens) - g - 1;
      check.assign(draft.begin() + static_cast<std::ptrdiff_t>(g),
                   draft.begin() + static_cast<std::ptrdiff_t>(std::min(draft.size(), g + room)));
    }
    std::vector<int> tokens = seq;
    tokens.insert(tokens.end(), check.begin(), check.end());
    const int64_t n = static_cast<int64_t>(tokens.size());
    positions.resize(static_cast<size_t>(n));
    std::iota(positions.begin(), positions.end(), int64_t{0});
    const int64_t from = static_cast<int64_t>(seq.size()) - 1;
    logits.resize(static_cast<size_t>((n - from) * vocab));
    model.Forward(tokens, positions, rope, state, logits.data(), from);
    ++a.forwards;
    for (int64_t r = 0; r < n - from; ++r) {
      row.assign(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
      const int next = greedy.Sample(row);
      if (next == tokenizer.eos_id()) {
        done = true;
        break;
      }
      a.generated.push_back(next);
      seq.push_back(next);
      const std::optional<FirstInteger> first = FindFirstInteger(tokenizer.Decode(a.generated));
      if ((first && first->complete) || static_cast<int64_t>(a.generated.size()) >= max_new_tokens) {
        done = true;
        break;
      }
      if (r < static_cast<int64_t>(check.size()) && next != check[static_cast<size_t>(r)]) break;
    }
  }
  a.response = tokenizer.Decode(a.generated);
  if (const std::optional<FirstInteger> first = FindFirstInteger(a.response)) {
    a.answer = first->digits;
    a.correct = SameInteger(first->digits, key);
  }
  return a;
}

PasskeyReport RunPasskey(const PasskeyOptions& options,
                         const std::function<void(const PasskeyReport&, size_t, size_t)>& on_rows) {
  if (options.depths.empty()) throw ConfigError("`depths` must list at least one depth, got none");
  CheckMethodList(options.methods);
  if (options.trials < 1) throw ConfigError(fmt::format("`trials` must be >= 1, got {}", options.trials));
  if (options.max_new_tokens < 1) {
    throw ConfigError(fmt::format("`max_new_tokens` must be >= 1, got {}", options.max_new_tokens));
  }
  for (double d : options.depths) {
    if (!(d >= 0.0 && d <= 1.0)) throw ConfigError(fmt::format("`depths`: each must be in [0, 1], got {}", d));
  }
  PasskeyReport report;
  report.model_path = options.model_path;
  report.tokenizer_path = options.tokenizer_path;
  report.seed = options.seed;
  report.max_new_tokens = options.max_new_tokens;
  report.depths = options.depths;
  report.methods = options.methods;
  report.yarn = options.method_options.yarn;
  report.threads = ResolveThreads(options.threads, "`threads`");
  std::vector<std::string> record_notes;
  Transformer model = LoadRunModel(options.model_path, options.weights, options.compute, options.load,
                                   options.training_record, options.train_ctx, record_notes);
  RequireBlasWorkspace(report.threads,
                       fmt::format("passkey with {} thread{} (`threads`)", report.threads,
                                   report.threads == 1 ? "" : "s"),
                       "`threads`");
  report.config = model.config();
  report.model_summary = SummaryLine(model.summary());
  report.compute = DescribeCompute(options.compute, model.weights());
  report.compute_kinds = ComputeKinds(model.weights());
  report.model_warnings = model.warnings();
  report.model_warnings.insert(report.model_warnings.end(), record_notes.begin(), record_notes.end());
  const int64_t L0 = report.config.train_ctx;
  report.lengths = options.lengths.empty() ? std::vector<int64_t>{L0, 2 * L0, 4 * L0} : options.lengths;
  const bool any_pre_rotation =
      std::find(options.methods.begin(), options.methods.end(), RopeMethod::kDynamic) != options.methods.end();
  for (int64_t L : report.lengths) {
    if (L <= options.max_new_tokens) {
      throw ConfigError(fmt::format("length (`lengths`) {}{} must exceed `max_new_tokens` = {}, the "
                                    "answer's tokens", L,
                                    options.lengths.empty() ? fmt::format(" (the default, from L0 = {})", L0) : "",
                                    options.max_new_tokens));
    }
    for (RopeMethod m : options.methods) ValidateMethodRope(m, L, report.config, options.method_options);
    CheckEvalMemory(L, report.threads, any_pre_rotation, report.config, 1, 0, "length (`lengths`)");
  }
  const std::unique_ptr<Tokenizer> tokenizer = LoadRunTokenizer(options.model_path, options.tokenizer_path,
                                                                 /*parse_special=*/false, report.config.vocab_size,
                                                                 report.model_warnings);
  report.add_bos = options.add_bos.value_or(tokenizer->add_bos_default());
  if (report.add_bos && tokenizer->bos_id() < 0) {
    throw ConfigError("`add_bos` is on but the tokenizer has no BOS token");
  }
  report.keys = PasskeyKeys(options.seed, options.trials);
  SetBlasThreads(1);  // the trials run in parallel, one BLAS thread each

  const int64_t n_depths = static_cast<int64_t>(options.depths.size());
  const int64_t n_cells = n_depths * options.trials;  // (depth, trial), depth-major
  for (int64_t L : report.lengths) {
    // The prompts of this length: the same for every method.
    std::vector<FittedPasskeyPrompt> prompts(static_cast<size_t>(n_cells));
    std::vector<std::vector<int>> drafts(static_cast<size_t>(n_cells));
    ForEachWindow(n_cells, report.threads, 0, {}, [&](int64_t c, ForwardState&, std::vector<float>&) {
      const int64_t key = report.keys[static_cast<size_t>(c % options.trials)];
      const double depth = options.depths[static_cast<size_t>(c / options.trials)];
      FittedPasskeyPrompt p;
      try {
        p = FitPasskeyPrompt(*tokenizer, report.add_bos, L - options.max_new_tokens, key, depth);
      } catch (const ConfigError& e) {
        throw ConfigError(fmt::format("length (`lengths`) {}: {}", L, e.what()));
      }
      drafts[static_cast<size_t>(c)] = PasskeyDraft(*tokenizer, report.add_bos, p.text, p.ids, key);
      prompts[static_cast<size_t>(c)] = std::move(p);
    });
    for (RopeMethod m : options.methods) {
      if (options.interrupt != nullptr && options.interrupt->load()) {
        throw PasskeyInterrupted("interrupted");
      }
      const auto t0 = std::chrono::steady_clock::now();
      const MethodRope rope = BuildMethodRope(m, L, report.config, options.method_options);
      const ForwardRope forward = rope.forward();
      std::vector<PasskeyAnswer> answers(static_cast<size_t>(n_cells));
      ForEachWindow(n_cells, report.threads, 0, {}, [&](int64_t c, ForwardState& state, std::vector<float>&) {
        const size_t i = static_cast<size_t>(c);
        const int64_t key = report.keys[i % static_cast<size_t>(options.trials)];
        try {
          answers[i] = GreedyPasskeyAnswer(model, forward, *tokenizer, prompts[i].ids, drafts[i], key,
                                           options.max_new_tokens, state);
        } catch (const NumericError& e) {  // which prompt met the non-finite value
          throw NumericError(fmt::format("passkey at length {}, method {}, depth {}, key {}: {}", L, RopeMethodName(m),
                                         options.depths[i / static_cast<size_t>(options.trials)], key, e.what()));
        }
      });
      const double seconds = SecondsSince(t0);
      const size_t first = report.rows.size();
      for (int64_t d = 0; d < n_depths; ++d) {
        PasskeyRow row;
        row.length = L;
        row.depth = options.depths[static_cast<size_t>(d)];
        row.method = m;
        row.factor = rope.factor;
        if (rope.position_map) row.parameters = rope.position_map->parameters();
        row.trials = options.trials;
        row.seconds = seconds;
        for (int64_t t = 0; t < options.trials; ++t) {
          const size_t i = static_cast<size_t>(d * options.trials + t);
          const PasskeyAnswer& a = answers[i];
          PasskeyTrial trial;
          trial.key = report.keys[static_cast<size_t>(t)];
          trial.prompt_tokens = static_cast<int64_t>(prompts[i].ids.size());
          trial.filler_chars = prompts[i].filler_chars;
          trial.prefix_chars = prompts[i].prefix_chars;
          trial.response = a.response;
          trial.answer = a.answer;
          trial.correct = a.correct;
          row.correct += a.correct ? 1 : 0;
          row.forwards += a.forwards;
          row.results.push_back(std::move(trial));
        }
        row.accuracy = static_cast<double>(row.correct) / static_cast<double>(row.trials);
        report.rows.push_back(std::move(row));
      }
      if (on_rows) on_rows(report, first, report.rows.size() - first);
    }
  }
  report.complete = true;
  return report;
}

std::string PasskeyTrainingText(const Tokenizer& tokenizer, bool add_bos, int64_t documents, int64_t max_tokens,
                                int64_t answer_tokens, uint64_t seed) {
  if (documents < 1) throw ConfigError(fmt::format("`documents` must be >= 1, got {}", documents));
  if (answer_tokens < 0) throw ConfigError(fmt::format("answer_tokens must be >= 0, got {}", answer_tokens));
  // The draws first (one generator, in document order, from its raw 64-bit outputs as PasskeyKeys:
  // std::uniform_*_distribution differ between standard libraries), then the prompts in parallel: the text does
  // not depend on the thread count.
  std::mt19937_64 g(seed);
  struct Draw {
    double length, depth;
    int64_t key;
  };
  std::vector<Draw> draws(static_cast<size_t>(documents));
  for (Draw& d : draws) {
    d.length = DrawUnit(g);
    d.depth = DrawUnit(g);
    d.key = DrawKey(g);
  }
  std::vector<std::string> docs(static_cast<size_t>(documents));
  ForEachWindow(documents, omp_get_max_threads(), 0, {}, [&](int64_t i, ForwardState&, std::vector<float>&) {
    const Draw& d = draws[static_cast<size_t>(i)];
    try {
      // The shortest document is the prompt without filler and the answer's room; the longest max_tokens.
      const int64_t bare = static_cast<int64_t>(tokenizer.Encode(PasskeyPromptText(d.key, 0, 0), add_bos).size());
      const int64_t shortest = bare + answer_tokens;
      if (shortest > max_tokens) {
        throw ConfigError(fmt::format("`max_tokens` {} cannot hold the prompt without filler ({} tokens "
                                      "for key {}) and the answer's {}", max_tokens, bare, d.key, answer_tokens));
      }
      const int64_t length =
          shortest + static_cast<int64_t>(d.length * static_cast<double>(max_tokens - shortest + 1));
      const FittedPasskeyPrompt p = FitPasskeyPrompt(tokenizer, add_bos, length - answer_tokens, d.key, d.depth);
      docs[static_cast<size_t>(i)] = fmt::format("{} {}.", p.text, d.key);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("training document {}: {}", i, e.what()));
    }
  });
  std::string out;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (i > 0) out += fmt::format("\n{}\n", kDocumentSeparator);
    out += docs[i];
  }
  out += '\n';
  return out;
}

}  // namespace posenc
