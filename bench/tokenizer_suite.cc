// Tokenizer benchmark suite: see tokenizer_suite.h.
#include "tokenizer_suite.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "posenc/formats/mapped_file.h"
#include "posenc/tokenizer/bpe.h"
#include "posenc/tokenizer/llama2c.h"
#include "posenc/tokenizer/load.h"
#include "posenc/tokenizer/spm.h"
#include "suite_util.h"

#ifndef POSENC_DATA_DIR
#define POSENC_DATA_DIR "data"
#endif
#ifndef POSENC_TEST_DATA_DIR
#define POSENC_TEST_DATA_DIR "tests/data"
#endif

namespace posenc::bench {
namespace {

std::vector<int> Reference(const Tokenizer& t, std::string_view text) {
  if (const auto* s = dynamic_cast<const SpmTokenizer*>(&t)) return s->EncodeReference(text);
  if (const auto* b = dynamic_cast<const BpeTokenizer*>(&t)) return b->EncodeReference(text);
  if (const auto* l = dynamic_cast<const Llama2cTokenizer*>(&t)) return l->EncodeReference(text);
  return t.Encode(text, false);  // the sentencepiece library is its own reference
}

// A prefix of at most n bytes that ends on a character boundary.
std::string_view Prefix(std::string_view text, size_t n) {
  n = std::min(n, text.size());
  while (n > 0 && n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

}  // namespace

std::vector<TokenizerCase> DefaultTokenizerCases(const std::string& filter) {
  const std::string data = POSENC_DATA_DIR, vocab = std::string(POSENC_TEST_DATA_DIR) + "/tokenizer/";
  const std::vector<TokenizerCase> all = {
      {"tokenize_llama2c", data + "/tok512.bin", "llama2.c encode, 512 pieces"},
      {"tokenize_spm_gguf", vocab + "ggml-vocab-llama-spm.gguf", "SentencePiece BPE from GGUF, Llama 2 vocabulary"},
      {"tokenize_bpe_gpt2", vocab + "ggml-vocab-gpt-2.gguf", "byte-level BPE from GGUF, GPT-2 (one regex)"},
      {"tokenize_bpe_deepseek", vocab + "ggml-vocab-deepseek-llm.gguf",
       "byte-level BPE from GGUF, DeepSeek LLM (six regex splits)"},
      {"tokenize_sentencepiece", vocab + "llama2-tokenizer.model",
       "the sentencepiece library, Llama 2 tokenizer.model (reference)"},
  };
  std::vector<TokenizerCase> out;
  for (const TokenizerCase& c : all) {
    if (MatchesFilter(c.name, filter)) out.push_back(c);
  }
  return out;
}

TokenizerBenchReport RunTokenizerBench(const TokenizerBenchOptions& options) {
  TokenizerBenchReport rep;
  rep.text_path = options.text_path.empty() ? std::string(POSENC_DATA_DIR) + "/text/tinystories_val_stories.txt"
                                            : options.text_path;
  const std::shared_ptr<const MappedFile> file = MappedFile::Open(rep.text_path);
  const std::string text(reinterpret_cast<const char*>(file->data()), file->size());
  rep.text_bytes = static_cast<int64_t>(text.size());
  const std::vector<TokenizerCase> cases = DefaultTokenizerCases(options.filter);
  rep.cpu = CpuModel();
  rep.load_average_start = LoadAverage();
  std::vector<std::unique_ptr<Tokenizer>> tokenizers;
  std::vector<std::vector<double>> times(cases.size());
  for (const TokenizerCase& c : cases) {
    if (options.log) options.log(fmt::format("tokenizer: loading and validating {}", c.name));
    TokenizerResult r;
    r.c = c;
    const auto t0 = Clock::now();
    tokenizers.push_back(LoadTokenizer(c.vocab_path));
    r.load_seconds = Seconds(t0, Clock::now());
    const Tokenizer& t = *tokenizers.back();
    r.tokenizer = t.Describe();
    const std::string_view head = Prefix(text, 2000);
    if (t.Encode(head, false) != Reference(t, head)) {
      throw std::runtime_error(fmt::format("{}: Encode differs from the plain merge loop on the text's first "
                                           "{} bytes",
                                           c.name, head.size()));
    }
    const std::vector<int> ids = t.Encode(text, true);
    if (t.Decode(ids) != text) throw std::runtime_error(fmt::format("{}: Decode(Encode(text)) is not the text", c.name));
    r.n_tokens = static_cast<int64_t>(ids.size());
    rep.results.push_back(r);
  }
  for (int k = 0; k < options.reps; ++k) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto t0 = Clock::now();
      const std::vector<int> ids = tokenizers[i]->Encode(text, true);
      times[i].push_back(Seconds(t0, Clock::now()));
      if (static_cast<int64_t>(ids.size()) != rep.results[i].n_tokens) {
        throw std::runtime_error(fmt::format("{}: encode gave {} tokens, then {}", cases[i].name,
                                             rep.results[i].n_tokens, ids.size()));
      }
    }
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    TokenizerResult& r = rep.results[i];
    r.seconds = *std::min_element(times[i].begin(), times[i].end());
    r.seconds_median = Median(times[i]);
    r.tokens_per_second = static_cast<double>(r.n_tokens) / r.seconds;
    r.mib_per_second = static_cast<double>(rep.text_bytes) / r.seconds / (1 << 20);
  }
  rep.load_average_end = LoadAverage();
  auto find = [&](const char* name) -> const TokenizerResult* {
    for (const TokenizerResult& r : rep.results) {
      if (r.c.name == name) return &r;
    }
    return nullptr;
  };
  const TokenizerResult* spm = find("tokenize_spm_gguf");
  for (const char* bpe_name : {"tokenize_bpe_gpt2", "tokenize_bpe_deepseek"}) {
    const TokenizerResult* bpe = find(bpe_name);
    if (spm != nullptr && bpe != nullptr) {
      rep.notes.push_back(fmt::format("{} takes {:.2f}x the time of tokenize_spm_gguf per encode of the text "
                                      "({:.1f} vs {:.1f} ms)",
                                      bpe_name, bpe->seconds / spm->seconds, 1e3 * bpe->seconds, 1e3 * spm->seconds));
    }
  }
  return rep;
}

nlohmann::json TokenizerResultsJson(const TokenizerBenchReport& rep) {
  nlohmann::json out = nlohmann::json::array();
  for (const TokenizerResult& r : rep.results) {
    out.push_back({{"kernel", r.c.name},
                   {"load_average", {rep.load_average_start, rep.load_average_end}},
                   {"vocab", r.c.vocab_path},
                   {"tokenizer", r.tokenizer},
                   {"text_bytes", rep.text_bytes},
                   {"tokens", r.n_tokens},
                   {"tokens_per_s", r.tokens_per_second},
                   {"mib_per_s", r.mib_per_second},
                   {"s_per_encode", r.seconds},
                   {"s_per_encode_median", r.seconds_median},
                   {"load_s", r.load_seconds}});
  }
  return out;
}

std::string FormatTokenizerReport(const TokenizerBenchReport& rep) {
  std::string s = fmt::format(
      "\ntokenizer encode: {} ({} bytes, one document, BOS, one thread); cpu {}; load average (1 min) at start / "
      "end: {:.2f} / {:.2f}\n",
      rep.text_path, rep.text_bytes, rep.cpu, rep.load_average_start, rep.load_average_end);
  s += fmt::format("{:<24} {:>9} {:>12} {:>8} {:>10} {:>10} {:>8}  {}\n", "case", "tokens", "tokens/s", "MiB/s",
                   "ms/encode", "ms median", "load s", "what");
  for (const TokenizerResult& r : rep.results) {
    s += fmt::format("{:<24} {:>9} {:>12.0f} {:>8.2f} {:>10.1f} {:>10.1f} {:>8.2f}  {}\n", r.c.name, r.n_tokens,
                     r.tokens_per_second, r.mib_per_second, 1e3 * r.seconds, 1e3 * r.seconds_median, r.load_seconds,
                     r.c.what);
  }
  for (const std::string& n : rep.notes) s += "note: " + n + "\n";
  return s;
}

}  // namespace posenc::bench
