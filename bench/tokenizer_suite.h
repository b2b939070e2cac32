// The tokenizer part of `posenc bench` (cli/cmd_bench.cc, `--filter tokenize`) and of posenc_gbench
// (bench/bench_tokenizer.cc): encode throughput of each encoder family on one whole text, measured in the same
// process run so the ratios between families mean something on a shared machine.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace posenc::bench {

/// One timed encoder: a vocabulary file loaded through LoadTokenizer.
struct TokenizerCase {
  std::string name;        // "tokenize_llama2c", "tokenize_spm_gguf", ...
  std::string vocab_path;  // the file LoadTokenizer reads
  std::string what;        // one line for the report
};

/// tokenize_llama2c (data/tok512.bin), tokenize_spm_gguf (llama.cpp's llama-spm vocabulary, our SentencePiece
/// encoder), tokenize_bpe_gpt2 (GPT-2 byte-level BPE, one regex), tokenize_bpe_deepseek (DeepSeek LLM: six
/// regex splits, 100k merges), tokenize_sentencepiece (Llama 2's tokenizer.model through the sentencepiece
/// library: the same vocabulary as tokenize_spm_gguf, for reference). `filter`: MatchesFilter (suite_util.h).
std::vector<TokenizerCase> DefaultTokenizerCases(const std::string& filter = "");

struct TokenizerBenchOptions {
  std::string filter;
  std::string text_path;  // empty: data/text/tinystories_val_stories.txt (the eval's default text, 799 KB)
  int reps = 5;           // timed encodes per case (best reported, median kept)
  std::function<void(const std::string&)> log;
};

struct TokenizerResult {
  TokenizerCase c;
  std::string tokenizer;           // Tokenizer::Describe
  int64_t n_tokens = 0;            // Encode(text, add_bos = true).size()
  double load_seconds = 0;         // LoadTokenizer, once
  double seconds = 0;              // one encode of the whole text, best call
  double seconds_median = 0;
  double tokens_per_second = 0;    // n_tokens / seconds
  double mib_per_second = 0;       // text bytes / seconds / 2^20
};

struct TokenizerBenchReport {
  std::string text_path;
  int64_t text_bytes = 0;
  std::vector<TokenizerResult> results;
  std::vector<std::string> notes;  // e.g. the BPE / SPM ratio
  std::string cpu;                 // /proc/cpuinfo model name
  double load_average_start = -1;  // /proc/loadavg, 1 minute: other processes competing for the cores
  double load_average_end = -1;
};

/// Loads each case's vocabulary, validates it on the text (Encode equals the family's plain O(n^2) reference
/// loop on the first 2000 bytes; Decode(Encode(text)) gives the whole text back), then times Encode(text, BOS)
/// of the whole text as one document, single-threaded, `reps` times (best reported, median kept), cases
/// interleaved per repetition.
/// Errors: std::runtime_error naming the case if a validation fails; the loaders' errors if a file is missing.
TokenizerBenchReport RunTokenizerBench(const TokenizerBenchOptions& options);

/// Result entries: {kernel: case name, vocab, tokenizer, text_bytes, tokens, tokens_per_s, mib_per_s,
/// s_per_encode, s_per_encode_median, load_s}.
nlohmann::json TokenizerResultsJson(const TokenizerBenchReport& report);

/// A fixed-width text table of the report.
std::string FormatTokenizerReport(const TokenizerBenchReport& report);

}  // namespace posenc::bench
