#include "posenc/tokenizer/spm.h"

#include <cmath>
#include <limits>
#include <algorithm>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/utf8.h"

namespace posenc {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space

// Symbols whose per-thread work buffers are kept between calls (about 20 MiB); larger ones are freed.
constexpr size_t kKeepSymbols = size_t{1} << 20;

uint64_t PairKey(int left, int right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// The symbols of s: one valid UTF-8 character each; a byte that does not start a valid sequence is a symbol of
// its own (so it can never swallow the "▁" or the character after it).
template <typename F>
void ForEachSymbol(std::string_view s, F&& f) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = std::max<size_t>(1, ValidUtf8Length(s, pos));
    f(pos, n);
    pos += n;
  }
}

// A character (1 to 4 bytes) as one integer: its bytes and its length.
uint64_t PackChar(std::string_view c) {
  uint64_t v = static_cast<uint64_t>(c.size()) << 32;
  for (size_t i = 0; i < c.size(); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(c[i])) << (8 * i);
  return v;
}

void AppendEscaped(std::string_view text, std::string& out) {
  for (char c : text) {
    if (c == ' ') {
      out += kSpace;
    } else {
      out += c;
    }
  }
}

}  // namespace

SpmTokenizer::SpmTokenizer(SpmVocab vocab) : vocab_(std::move(vocab)) {
  const size_t n = vocab_.tokens.size();
  const std::string& src = vocab_.source;
  if (n == 0) throw ConfigError(fmt::format("SentencePiece vocabulary '{}' has no tokens", src));
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()) / 2) {
    throw ConfigError(fmt::format("SentencePiece vocabulary '{}' has {} tokens, more than supported", src, n));
  }
  if (vocab_.scores.size() != n || vocab_.types.size() != n) {
    throw ConfigError(fmt::format("SentencePiece vocabulary '{}': {} tokens but {} scores and {} token types", src,
                                  n, vocab_.scores.size(), vocab_.types.size()));
  }
  for (const auto& [name, id] : {std::pair<const char*, int>{"bos_token_id", vocab_.bos_id},
                                 {"eos_token_id", vocab_.eos_id},
                                 {"unknown_token_id", vocab_.unk_id}}) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      throw ConfigError(fmt::format("SentencePiece vocabulary '{}': {} must be in [0, {}), got {}", src, name, n, id));
    }
  }
  std::unordered_map<std::string, int> all;
  std::vector<AddedToken> user_defined;
  for (int i = 0; i < static_cast<int>(n); ++i) {
    const std::string& t = vocab_.tokens[static_cast<size_t>(i)];
    if (std::isnan(vocab_.scores[static_cast<size_t>(i)])) {
      throw ConfigError(fmt::format("SentencePiece vocabulary '{}': token {} '{}' has score NaN (merges need an "
                                    "order)",
                                    src, i, t));
    }
    if (t.empty()) continue;  // never formed from text; kept so ids stay aligned
    const auto [it, inserted] = all.emplace(t, i);
    if (!inserted) {
      throw ConfigError(
          fmt::format("SentencePiece vocabulary '{}': tokens {} and {} are both '{}'", src, it->second, i, t));
    }
    if (Mergeable(i)) mergeable_.emplace(t, i);
    if (vocab_.types[static_cast<size_t>(i)] == TokenType::kUserDefined) user_defined.push_back({i, t, false, false});
  }
  user_defined_ = AddedTokenMatcher(std::move(user_defined));
  for (int& b : byte_token_) b = -1;
  for (int b = 0; b < 256; ++b) {
    const auto it = all.find(fmt::format("<0x{:02X}>", b));
    if (it != all.end()) byte_token_[b] = it->second;
  }
  // Keys of the characters of mergeable pieces: the piece id when the character is one, else ids n, n + 1, ...
  std::vector<std::pair<const std::string*, std::vector<size_t>>> split_pieces;  // piece, char boundaries
  for (int& k : ascii_key_) k = -1;
  int next_key = static_cast<int>(n);
  for (const auto& entry : mergeable_) {
    const std::string& text = entry.first;
    std::vector<size_t> bounds;
    ForEachSymbol(text, [&](size_t pos, size_t len) {
      bounds.push_back(pos);
      const std::string_view c = std::string_view(text).substr(pos, len);
      if (CharKey(c) >= 0) return;
      const auto it = mergeable_.find(std::string(c));
      const int key = it != mergeable_.end() ? it->second : next_key++;
      char_key_.emplace(PackChar(c), key);
      if (len == 1 && static_cast<unsigned char>(c[0]) < 128) ascii_key_[static_cast<unsigned char>(c[0])] = key;
    });
    bounds.push_back(text.size());
    if (bounds.size() > 2) split_pieces.emplace_back(&text, std::move(bounds));
  }
  // Every split of a mergeable piece at a character boundary into two keys -> the piece; every pair of
  // adjacent characters in a mergeable piece -> joinable.
  for (const auto& [piece, bounds] : split_pieces) {
    const std::string_view text = *piece;
    const int id = mergeable_.at(*piece);
    const size_t chars = bounds.size() - 1;
    auto key_of = [&](std::string_view part, bool one_char) -> int {
      if (one_char) return CharKey(part);
      const auto it = mergeable_.find(std::string(part));
      return it == mergeable_.end() ? -1 : it->second;  // a longer symbol exists only as a merged piece
    };
    for (size_t k = 1; k < chars; ++k) {
      const int l = key_of(text.substr(0, bounds[k]), k == 1), r = key_of(text.substr(bounds[k]), chars - k == 1);
      if (l >= 0 && r >= 0) merges_.emplace(PairKey(l, r), id);
      joinable_.insert(PairKey(CharKey(text.substr(bounds[k - 1], bounds[k] - bounds[k - 1])),
                               CharKey(text.substr(bounds[k], bounds[k + 1] - bounds[k]))));
    }
  }
}

bool SpmTokenizer::Mergeable(int id) const {
  const TokenType t = vocab_.types[static_cast<size_t>(id)];
  return t == TokenType::kNormal || t == TokenType::kUnused;
}

int SpmTokenizer::CharKey(std::string_view c) const {
  if (c.size() == 1 && static_cast<unsigned char>(c[0]) < 128) return ascii_key_[static_cast<unsigned char>(c[0])];
  const auto it = char_key_.find(PackChar(c));
  return it == char_key_.end() ? -1 : it->second;
}

std::vector<SpmTokenizer::Run> SpmTokenizer::Runs(std::string_view text, std::vector<int>* added_ids) const {
  // Runs and user-defined tokens in order; added_ids[i] >= 0 means "a user-defined token comes before run i";
  // a trailing token is recorded with an empty run.
  std::vector<Run> runs;
  added_ids->clear();
  bool prefix = vocab_.add_space_prefix;
  int pending = -1;
  for (const AddedTokenMatcher::Segment& seg : user_defined_.Split(text)) {
    if (seg.id >= 0) {
      if (pending >= 0) {  // two tokens in a row: an empty run between them
        runs.emplace_back();
        added_ids->push_back(pending);
      }
      pending = seg.id;
      prefix = vocab_.add_space_prefix;
      continue;
    }
    Run r;
    r.text.reserve((seg.end - seg.begin) * 3 / 2 + 3);
    if (prefix) r.text = kSpace;
    AppendEscaped(text.substr(seg.begin, seg.end - seg.begin), r.text);
    ForEachSymbol(r.text, [&](size_t pos, size_t len) { r.ends.push_back(static_cast<uint32_t>(pos + len)); });
    runs.push_back(std::move(r));
    added_ids->push_back(pending);
    pending = -1;
    prefix = false;
  }
  if (pending >= 0) {
    runs.emplace_back();
    added_ids->push_back(pending);
  }
  return runs;
}

void SpmTokenizer::EmitSymbol(std::string_view s, int key, std::vector<int>& out) const {
  if (key >= 0 && key < static_cast<int>(vocab_.tokens.size())) {
    out.push_back(key);
    return;
  }
  bool all_bytes = true;
  for (char c : s) all_bytes = all_bytes && byte_token_[static_cast<unsigned char>(c)] >= 0;
  if (all_bytes) {
    for (char c : s) out.push_back(byte_token_[static_cast<unsigned char>(c)]);
    return;
  }
  if (vocab_.unk_id >= 0) {
    out.push_back(vocab_.unk_id);
    return;
  }
  std::string hex;
  for (char c : s) hex += fmt::format("{:02X}", static_cast<unsigned char>(c));
  throw ConfigError(fmt::format("SentencePiece vocabulary '{}' cannot represent the text bytes {}: no piece, no "
                                "byte piece for each byte and no unknown token",
                                vocab_.source, hex));
}

std::vector<int> SpmTokenizer::EncodeText(std::string_view text) const {
  std::vector<int> out;
  std::vector<int> added;
  const std::vector<Run> runs = Runs(text, &added);
  struct Entry {
    float score;
    int pos, left, right, merged;
  };
  auto worse = [](const Entry& x, const Entry& y) {
    return x.score != y.score ? x.score < y.score : x.pos > y.pos;
  };
  // Per-symbol state, reused across calls on this thread (a run is the whole text when nothing cuts it).
  thread_local std::vector<int> key, next, prev;
  thread_local std::vector<uint32_t> begin, end;
  thread_local std::vector<Entry> heap_storage;
  for (size_t r = 0; r < runs.size(); ++r) {
    if (added[r] >= 0) out.push_back(added[r]);
    const Run& run = runs[r];
    const int n = static_cast<int>(run.ends.size());
    if (n == 0) continue;
    key.assign(static_cast<size_t>(n), -1);
    next.resize(static_cast<size_t>(n));
    prev.resize(static_cast<size_t>(n));
    begin.resize(static_cast<size_t>(n));
    end.assign(run.ends.begin(), run.ends.end());
    for (int a = 0; a < n; ++a) {
      begin[a] = a == 0 ? 0 : run.ends[a - 1];
      key[a] = CharKey(std::string_view(run.text).substr(begin[a], end[a] - begin[a]));
      next[a] = a + 1;
      prev[a] = a - 1;
    }
    // Two adjacent characters that occur next to each other in no mergeable piece can never end up in one
    // symbol: the run is cut there and each part merged on its own (same result, small heaps).
    auto merge_part = [&](int s, int e) {
      std::vector<Entry>& heap = heap_storage;  // a binary heap under `worse` (std::push_heap / pop_heap)
      heap.clear();
      auto push = [&](int a, int b) {
        if (key[a] < 0 || key[b] < 0) return;
        const auto it = merges_.find(PairKey(key[a], key[b]));
        if (it == merges_.end()) return;
        heap.push_back({vocab_.scores[static_cast<size_t>(it->second)], a, key[a], key[b], it->second});
        std::push_heap(heap.begin(), heap.end(), worse);
      };
      for (int a = s; a + 1 < e; ++a) push(a, a + 1);
      // A heap entry is current iff its left symbol is alive with the same key and its right neighbour holds
      // the same key: a symbol's key only changes by merging into a longer piece.
      while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), worse);
        const Entry en = heap.back();
        heap.pop_back();
        const int a = en.pos;
        if (end[a] == begin[a] || key[a] != en.left) continue;  // merged away (empty) or changed
        const int b = next[a];
        if (b >= e || key[b] != en.right) continue;
        key[a] = en.merged;
        end[a] = end[b];
        end[b] = begin[b];  // dead
        next[a] = next[b];
        if (next[a] < e) {
          prev[next[a]] = a;
          push(a, next[a]);
        }
        if (prev[a] >= s) push(prev[a], a);
      }
    };
    int part = 0;
    for (int a = 0; a + 1 < n; ++a) {
      if (key[a] < 0 || key[a + 1] < 0 || !joinable_.count(PairKey(key[a], key[a + 1]))) {
        if (a + 1 - part > 1) merge_part(part, a + 1);
        part = a + 1;
      }
    }
    if (n - part > 1) merge_part(part, n);
    for (int a = 0; a < n; a = next[a]) {
      EmitSymbol(std::string_view(run.text).substr(begin[a], end[a] - begin[a]), key[a], out);
    }
  }
  if (key.capacity() > kKeepSymbols) {  // a huge text: give the memory back rather than keep it per thread
    for (auto* v : {&key, &next, &prev}) std::vector<int>().swap(*v);
    for (auto* v : {&begin, &end}) std::vector<uint32_t>().swap(*v);
    std::vector<Entry>().swap(heap_storage);
  }
  return out;
}

std::vector<int> SpmTokenizer::EncodeReference(std::string_view text) const {
  std::vector<int> out;
  std::vector<int> added;
  const std::vector<Run> runs = Runs(text, &added);
  for (size_t r = 0; r < runs.size(); ++r) {
    if (added[r] >= 0) out.push_back(added[r]);
    const Run& run = runs[r];
    std::vector<std::string> symbols;
    uint32_t b = 0;
    for (uint32_t e : run.ends) {
      symbols.push_back(run.text.substr(b, e - b));
      b = e;
    }
    while (true) {
      int best = -1;
      float best_score = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const auto it = mergeable_.find(symbols[i] + symbols[i + 1]);
        if (it == mergeable_.end()) continue;
        const float s = vocab_.scores[static_cast<size_t>(it->second)];
        if (best < 0 || s > best_score) {
          best = static_cast<int>(i);
          best_score = s;
        }
      }
      if (best < 0) break;
      symbols[static_cast<size_t>(best)] += symbols[static_cast<size_t>(best) + 1];
      symbols.erase(symbols.begin() + best + 1);
    }
    for (const std::string& s : symbols) {
      const auto it = mergeable_.find(s);
      EmitSymbol(s, it == mergeable_.end() ? -1 : it->second, out);
    }
  }
  return out;
}

std::string SpmTokenizer::Decode(std::span<const int> ids) const {
  CheckTokenIds(ids, vocab_size());
  std::string out;
  bool strip = vocab_.add_space_prefix;
  for (int id : ids) {
    const std::string& t = vocab_.tokens[static_cast<size_t>(id)];
    switch (vocab_.types[static_cast<size_t>(id)]) {
      case TokenType::kControl:
        break;
      case TokenType::kByte: {
        const int b = BytePieceValue(t);
        if (b >= 0) {
          out += static_cast<char>(b);
        } else {
          out += t;
        }
        strip = false;
        break;
      }
      case TokenType::kUserDefined:
        out += t;
        strip = vocab_.add_space_prefix;
        break;
      default: {
        size_t pos = 0;
        if (strip && t.compare(0, kSpace.size(), kSpace) == 0) pos = kSpace.size();
        while (pos < t.size()) {
          if (t.compare(pos, kSpace.size(), kSpace) == 0) {
            out += ' ';
            pos += kSpace.size();
          } else {
            out += t[pos++];
          }
        }
        strip = false;
        break;
      }
    }
  }
  return out;
}

const std::string& SpmTokenizer::Piece(int id) const {
  CheckTokenId(id, vocab_size());
  return vocab_.tokens[static_cast<size_t>(id)];
}

TokenType SpmTokenizer::Type(int id) const {
  CheckTokenId(id, vocab_size());
  return vocab_.types[static_cast<size_t>(id)];
}

std::string SpmTokenizer::Describe() const {
  return fmt::format("SentencePiece BPE ({}), {} tokens", vocab_.source, vocab_size());
}

}  // namespace posenc
