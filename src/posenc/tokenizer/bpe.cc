#include "posenc/tokenizer/bpe.h"

#include <limits>
#include <map>
#include <mutex>
#include <algorithm>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/byte_level.h"
#include "posenc/tokenizer/normalize.h"

namespace posenc {
namespace {

// Bytes of one word whose per-thread work buffers are kept between words (about 13 MiB); larger ones are freed.
constexpr size_t kKeepSymbols = size_t{1} << 20;

uint64_t PairKey(int left, int right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeVocab vocab, PreTokenizer pre_tokenizer)
    : vocab_(std::move(vocab)), pre_(std::move(pre_tokenizer)) {
  const size_t n = vocab_.tokens.size();
  const std::string& src = vocab_.source;
  if (n == 0) throw ConfigError(fmt::format("BPE vocabulary '{}' has no tokens", src));
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()) / 2) {
    throw ConfigError(fmt::format("BPE vocabulary '{}' has {} tokens, more than supported", src, n));
  }
  if (vocab_.types.size() != n) {
    throw ConfigError(fmt::format("BPE vocabulary '{}': {} tokens but {} token types", src, n, vocab_.types.size()));
  }
  for (const auto& [name, id] : {std::pair<const char*, int>{"bos_token_id", vocab_.bos_id},
                                 {"eos_token_id", vocab_.eos_id},
                                 {"unknown_token_id", vocab_.unk_id}}) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      throw ConfigError(fmt::format("BPE vocabulary '{}': {} must be in [0, {}), got {}", src, name, n, id));
    }
  }
  lookup_.reserve(n);
  for (int i = 0; i < static_cast<int>(n); ++i) {
    const std::string& t = vocab_.tokens[static_cast<size_t>(i)];
    if (t.empty()) continue;
    const auto [it, inserted] = lookup_.emplace(t, i);
    if (!inserted) {
      throw ConfigError(fmt::format("BPE vocabulary '{}': tokens {} and {} are both '{}'", src, it->second, i, t));
    }
  }
  for (const std::vector<AddedToken>* list : {&vocab_.added, &vocab_.special}) {
    for (const AddedToken& a : *list) {
      if (a.id < 0 || a.id >= static_cast<int64_t>(n)) {
        throw ConfigError(fmt::format("BPE vocabulary '{}': {} token '{}' has id {}, outside [0, {})", src,
                                      list == &vocab_.added ? "added" : "special", a.content, a.id, n));
      }
    }
  }
  added_ = AddedTokenMatcher(vocab_.added);
  merges_.reserve(vocab_.merges.size());
  for (size_t r = 0; r < vocab_.merges.size(); ++r) {
    const std::string& a = vocab_.merges[r].first;
    const std::string& b = vocab_.merges[r].second;
    auto id_of = [&](const std::string& t, const char* what) {
      const auto it = lookup_.find(t);
      if (it == lookup_.end()) {
        throw ConfigError(fmt::format("BPE vocabulary '{}': merge {} '{} {}' names {} '{}', which is not a token",
                                      src, r, a, b, what, t));
      }
      return it->second;
    };
    const int l = id_of(a, "left side"), rr = id_of(b, "right side"), m = id_of(a + b, "merged text");
    merges_.emplace(PairKey(l, rr), Merge{static_cast<int>(r), m});  // a repeated merge keeps its first rank
  }
  const ByteLevelMap& map = ByteLevelMap::Get();
  for (int b = 0; b < 256; ++b) {
    const auto it = lookup_.find(map.Char(static_cast<unsigned char>(b)));
    byte_token_[b] = it == lookup_.end() ? -1 : it->second;
  }
  decoded_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const TokenType t = vocab_.types[i];
    if (t == TokenType::kControl) continue;
    if (t == TokenType::kUserDefined || !map.Decode(vocab_.tokens[i], decoded_[i])) decoded_[i] = vocab_.tokens[i];
  }
}

template <typename F>
void BpeTokenizer::ForEachWord(std::string_view text, F&& f) const {
  for (const AddedTokenMatcher::Segment& seg : added_.Split(text)) {
    if (seg.id >= 0) {
      f(seg.id, std::string_view());
      continue;
    }
    const std::string_view run = text.substr(seg.begin, seg.end - seg.begin);
    std::string normalized;
    if (vocab_.nfc) normalized = NormalizeNfc(run);
    pre_.ForEachWord(vocab_.nfc ? std::string_view(normalized) : run, [&](std::string_view w) { f(-1, w); });
  }
}

std::vector<AddedToken> BpeTokenizer::SpecialTokens() const {
  return vocab_.special.empty() ? Tokenizer::SpecialTokens() : vocab_.special;
}

void BpeTokenizer::EmitUnmappable(unsigned char byte, std::vector<int>& out) const {
  if (vocab_.unk_id >= 0) {
    out.push_back(vocab_.unk_id);
    return;
  }
  throw ConfigError(fmt::format("BPE vocabulary '{}' cannot represent byte 0x{:02X}: its byte-level character is not "
                                "a token and there is no unknown token",
                                vocab_.source, byte));
}

void BpeTokenizer::EncodeWord(std::string_view word, std::vector<int>& out) const {
  if (vocab_.ignore_merges) {
    const auto it = lookup_.find(ByteLevelMap::Get().Encode(word));
    if (it != lookup_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const int n = static_cast<int>(word.size());
  // Symbols: one per byte (its character's token); merged symbols keep the left index.
  thread_local std::vector<int> id, next, prev;
  thread_local std::vector<char> alive;
  id.resize(static_cast<size_t>(n));
  next.resize(static_cast<size_t>(n));
  prev.resize(static_cast<size_t>(n));
  alive.assign(static_cast<size_t>(n), 1);
  for (int a = 0; a < n; ++a) {
    id[a] = byte_token_[static_cast<unsigned char>(word[static_cast<size_t>(a)])];
    next[a] = a + 1;
    prev[a] = a - 1;
  }
  if (n > 1) {
    struct Entry {
      int rank, pos, left, right, merged;
    };
    // Lowest rank first, then leftmost: a binary heap under `worse` in a buffer reused across words.
    auto worse = [](const Entry& x, const Entry& y) { return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos; };
    thread_local std::vector<Entry> heap;
    heap.clear();
    auto push = [&](int a, int b) {
      if (id[a] < 0 || id[b] < 0) return;
      const auto it = merges_.find(PairKey(id[a], id[b]));
      if (it == merges_.end()) return;
      heap.push_back({it->second.rank, a, id[a], id[b], it->second.id});
      std::push_heap(heap.begin(), heap.end(), worse);
    };
    for (int a = 0; a + 1 < n; ++a) push(a, a + 1);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), worse);
      const Entry e = heap.back();
      heap.pop_back();
      const int a = e.pos;
      if (!alive[a] || id[a] != e.left) continue;
      const int b = next[a];
      if (b >= n || id[b] != e.right) continue;
      id[a] = e.merged;
      alive[b] = 0;
      next[a] = next[b];
      if (next[a] < n) {
        prev[next[a]] = a;
        push(a, next[a]);
      }
      if (prev[a] >= 0) push(prev[a], a);
    }
    if (heap.capacity() > kKeepSymbols) std::vector<Entry>().swap(heap);
  }
  for (int a = 0; a < n; a = next[a]) {
    if (id[a] >= 0) {
      out.push_back(id[a]);
    } else {
      EmitUnmappable(static_cast<unsigned char>(word[static_cast<size_t>(a)]), out);
    }
  }
  if (id.capacity() > kKeepSymbols) {  // a huge word: give the memory back rather than keep it per thread
    for (auto* v : {&id, &next, &prev}) std::vector<int>().swap(*v);
    std::vector<char>().swap(alive);
  }
}

std::vector<int> BpeTokenizer::EncodeText(std::string_view text) const {
  std::vector<int> out;
  out.reserve(text.size() / 3 + 1);
  ForEachWord(text, [&](int added, std::string_view word) {
    if (added >= 0) {
      out.push_back(added);
    } else {
      EncodeWord(word, out);
    }
  });
  return out;
}

std::vector<int> BpeTokenizer::EncodeReference(std::string_view text) const {
  // Ranks by the two symbols' texts, built from the merge list on first use (independent of the id table).
  std::call_once(reference_once_, [&] {
    for (size_t r = 0; r < vocab_.merges.size(); ++r) reference_ranks_.emplace(vocab_.merges[r], static_cast<int>(r));
  });
  const std::map<std::pair<std::string, std::string>, int>& rank = reference_ranks_;
  const ByteLevelMap& map = ByteLevelMap::Get();
  std::vector<int> out;
  ForEachWord(text, [&](int added, std::string_view word) {
    if (added >= 0) {
      out.push_back(added);
      return;
    }
    if (vocab_.ignore_merges) {
      const auto it = lookup_.find(map.Encode(word));
      if (it != lookup_.end()) {
        out.push_back(it->second);
        return;
      }
    }
    std::vector<std::string> symbols;
    for (char c : word) symbols.push_back(map.Char(static_cast<unsigned char>(c)));
    while (true) {
      int best = -1, best_rank = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const auto it = rank.find({symbols[i], symbols[i + 1]});
        if (it != rank.end() && (best < 0 || it->second < best_rank)) {
          best = static_cast<int>(i);
          best_rank = it->second;
        }
      }
      if (best < 0) break;
      symbols[static_cast<size_t>(best)] += symbols[static_cast<size_t>(best) + 1];
      symbols.erase(symbols.begin() + best + 1);
    }
    // Every merged symbol is a token (checked at load); an unmerged one is one byte's character.
    size_t byte = 0;
    for (const std::string& s : symbols) {
      const auto it = lookup_.find(s);
      if (it != lookup_.end()) {
        out.push_back(it->second);
      } else {
        EmitUnmappable(static_cast<unsigned char>(word[byte]), out);
      }
      std::string bytes;
      map.Decode(s, bytes);
      byte += bytes.size();
    }
  });
  return out;
}

std::string BpeTokenizer::Decode(std::span<const int> ids) const {
  CheckTokenIds(ids, vocab_size());
  std::string out;
  for (int id : ids) out += decoded_[static_cast<size_t>(id)];
  return out;
}

const std::string& BpeTokenizer::Piece(int id) const {
  CheckTokenId(id, vocab_size());
  return vocab_.tokens[static_cast<size_t>(id)];
}

TokenType BpeTokenizer::Type(int id) const {
  CheckTokenId(id, vocab_size());
  return vocab_.types[static_cast<size_t>(id)];
}

std::string BpeTokenizer::Describe() const {
  return fmt::format("byte-level BPE ({}, {}pre-tokenizer {}), {} tokens", vocab_.source,
                     vocab_.nfc ? "normalizer NFC, " : "", pre_.name(), vocab_size());
}

}  // namespace posenc
