// Google Benchmark for the tokenizers: Encode of the eval's default text (799 KB, one document) for each case
// of bench/tokenizer_suite.h. `posenc bench --filter tokenize` measures the same cases in one run with a table.
//
//   build/posenc_gbench --benchmark_filter='tokenize'
//
// items_per_second counts tokens. Each case is checked once before timing (Decode gives the text back).
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <string>

#include "posenc/formats/mapped_file.h"
#include "posenc/tokenizer/load.h"
#include "tokenizer_suite.h"

#ifndef POSENC_DATA_DIR
#define POSENC_DATA_DIR "data"
#endif

namespace posenc::bench {
namespace {

const std::string& Text() {
  static const std::string text = [] {
    const auto file = MappedFile::Open(std::string(POSENC_DATA_DIR) + "/text/tinystories_val_stories.txt");
    return std::string(reinterpret_cast<const char*>(file->data()), file->size());
  }();
  return text;
}

void BM_Tokenize(benchmark::State& state, TokenizerCase c) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  auto& t = loaded[c.name];
  if (!t) {
    t = LoadTokenizer(c.vocab_path);
    if (t->Decode(t->Encode(Text(), true)) != Text()) {
      state.SkipWithError("Decode(Encode(text)) is not the text");
      return;
    }
  }
  int64_t tokens = 0;
  for (auto _ : state) {
    const std::vector<int> ids = t->Encode(Text(), true);
    tokens += static_cast<int64_t>(ids.size());
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetItemsProcessed(tokens);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(Text().size()));
}

const bool kRegistered = [] {
  for (const TokenizerCase& c : DefaultTokenizerCases()) {
    benchmark::RegisterBenchmark(("tokenizer/" + c.name).c_str(), BM_Tokenize, c)->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace
}  // namespace posenc::bench
