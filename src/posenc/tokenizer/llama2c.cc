#include "posenc/tokenizer/llama2c.h"

#include <algorithm>
#include <cstring>
#include <queue>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/formats/mapped_file.h"

namespace posenc {
namespace {

uint64_t PairKey(int left, int right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// A merge is taken only if its score is strictly greater than llama2.c's initial best_score (false for NaN).
bool PassesMinScore(float score) { return score > kLlama2cMinMergeScore; }

}  // namespace

Llama2cTokenizer Llama2cTokenizer::FromBytes(std::string_view bytes, int64_t vocab_size, const std::string& source) {
  if (vocab_size < 3) {
    throw ConfigError(fmt::format("tokenizer vocab_size must be >= 3 (BOS=1, EOS=2), got {}", vocab_size));
  }
  Llama2cTokenizer t;
  size_t off = 0;
  auto read4 = [&](void* dst, int64_t piece) {
    if (bytes.size() - off < 4) {
      throw IoError(fmt::format("tokenizer '{}' is truncated in piece {} of vocab_size {} ({} bytes)", source,
                                piece, vocab_size, bytes.size()));
    }
    std::memcpy(dst, bytes.data() + off, 4);
    off += 4;
  };
  int32_t max_len = 0;
  read4(&max_len, -1);
  if (max_len <= 0) {
    throw IoError(fmt::format("tokenizer '{}': max_token_length must be > 0, got {}", source, max_len));
  }
  t.max_token_length_ = max_len;
  // Each piece takes at least 8 bytes: never reserve more than the bytes can hold (a wrong vocab_size fails
  // below with the truncation message instead of allocating).
  const size_t fits = (bytes.size() - off) / 8;
  t.pieces_.reserve(std::min(static_cast<size_t>(vocab_size), fits));
  t.scores_.reserve(std::min(static_cast<size_t>(vocab_size), fits));
  for (int64_t i = 0; i < vocab_size; ++i) {
    float score = 0;
    int32_t len = 0;
    read4(&score, i);
    read4(&len, i);
    if (len < 0 || len > max_len) {
      throw IoError(fmt::format("tokenizer '{}': piece {} length must be in [0, max_token_length={}], got {}",
                                source, i, max_len, len));
    }
    if (bytes.size() - off < static_cast<size_t>(len)) {
      throw IoError(fmt::format("tokenizer '{}' is truncated in piece {} of vocab_size {} ({} bytes)", source, i,
                                vocab_size, bytes.size()));
    }
    t.pieces_.emplace_back(bytes.substr(off, static_cast<size_t>(len)));
    t.scores_.push_back(score);
    off += static_cast<size_t>(len);
  }
  if (off != bytes.size()) {
    throw IoError(fmt::format(
        "tokenizer '{}' has {} trailing bytes after vocab_size={} pieces: written for a different vocabulary",
        source, bytes.size() - off, vocab_size));
  }
  t.BuildIndex();
  return t;
}

std::string Llama2cTokenizer::FileBytes(std::span<const std::pair<float, std::string>> pieces) {
  int32_t max_len = 1;
  for (const auto& p : pieces) max_len = std::max<int32_t>(max_len, static_cast<int32_t>(p.second.size()));
  std::string out(reinterpret_cast<const char*>(&max_len), 4);
  for (const auto& [score, text] : pieces) {
    const int32_t len = static_cast<int32_t>(text.size());
    out.append(reinterpret_cast<const char*>(&score), 4);
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += text;
  }
  return out;
}

Llama2cTokenizer Llama2cTokenizer::Load(const std::string& path, int64_t vocab_size) {
  const std::shared_ptr<const MappedFile> file = MappedFile::Open(path, "tokenizer");
  return FromBytes(std::string_view(reinterpret_cast<const char*>(file->data()), file->size()), vocab_size, path);
}

int64_t Llama2cTokenizer::CountPieces(std::string_view bytes, const std::string& source) {
  int32_t max_len = 0;
  if (bytes.size() < 4) throw IoError(fmt::format("tokenizer '{}' is shorter than its 4-byte header", source));
  std::memcpy(&max_len, bytes.data(), 4);
  if (max_len <= 0) {
    throw IoError(fmt::format("tokenizer '{}': max_token_length must be > 0, got {}", source, max_len));
  }
  size_t off = 4;
  int64_t n = 0;
  while (off < bytes.size()) {
    int32_t len = 0;
    if (bytes.size() - off < 8) {
      throw IoError(fmt::format("tokenizer '{}' is truncated in piece {} ({} bytes)", source, n, bytes.size()));
    }
    std::memcpy(&len, bytes.data() + off + 4, 4);
    if (len < 0 || len > max_len) {
      throw IoError(fmt::format("tokenizer '{}': piece {} length must be in [0, max_token_length={}], got {}",
                                source, n, max_len, len));
    }
    off += 8;
    if (bytes.size() - off < static_cast<size_t>(len)) {
      throw IoError(fmt::format("tokenizer '{}' is truncated in piece {} ({} bytes)", source, n, bytes.size()));
    }
    off += static_cast<size_t>(len);
    ++n;
  }
  if (n < 3) throw IoError(fmt::format("tokenizer '{}' holds {} pieces; BOS and EOS need at least 3", source, n));
  return n;
}

void Llama2cTokenizer::BuildIndex() {
  for (int& b : byte_piece_) b = -1;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    lookup_.emplace(pieces_[i], static_cast<int>(i));  // keeps the first id of a duplicated piece
    if (pieces_[i].size() == 1) {
      int& slot = byte_piece_[static_cast<unsigned char>(pieces_[i][0])];
      if (slot < 0) slot = static_cast<int>(i);
    }
  }
  canonical_.resize(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) canonical_[i] = lookup_.at(pieces_[i]);
  const auto empty = lookup_.find("");
  empty_piece_ = empty == lookup_.end() ? -1 : empty->second;
  // Every mergeable pair (x, y) -> merged id: split each piece in two at every byte. Pairs with an empty side
  // concatenate to the other side's text and are handled by FindMerge.
  for (size_t m = 0; m < pieces_.size(); ++m) {
    const std::string& p = pieces_[m];
    if (canonical_[m] != static_cast<int>(m)) continue;  // a duplicate never wins a lookup
    if (!PassesMinScore(scores_[m])) continue;          // never merged by llama2.c's loop
    for (size_t k = 1; k < p.size(); ++k) {
      const int x = Lookup(std::string_view(p).substr(0, k));
      const int y = Lookup(std::string_view(p).substr(k));
      if (x >= 0 && y >= 0) merges_.emplace(PairKey(x, y), Merge{scores_[m], static_cast<int>(m)});
    }
  }
}

int Llama2cTokenizer::Lookup(std::string_view text) const {
  if (text.size() == 1) return byte_piece_[static_cast<unsigned char>(text[0])];
  const auto it = lookup_.find(std::string(text));
  return it == lookup_.end() ? -1 : it->second;
}

const std::string& Llama2cTokenizer::Piece(int id) const {
  CheckTokenId(id, vocab_size());
  return pieces_[static_cast<size_t>(id)];
}

float Llama2cTokenizer::score(int id) const {
  CheckTokenId(id, vocab_size());
  return scores_[static_cast<size_t>(id)];
}

TokenType Llama2cTokenizer::Type(int id) const {
  CheckTokenId(id, vocab_size());
  if (id == 0) return TokenType::kUnknown;
  if (id == kBosId || id == kEosId) return TokenType::kControl;
  return BytePieceValue(pieces_[static_cast<size_t>(id)]) >= 0 ? TokenType::kByte : TokenType::kNormal;
}

std::string Llama2cTokenizer::Describe() const {
  return fmt::format("llama2.c BPE (tokenizer .bin), {} tokens", vocab_size());
}

bool Llama2cTokenizer::FindMerge(int left, int right, Merge* merge) const {
  const int cl = canonical_[static_cast<size_t>(left)], cr = canonical_[static_cast<size_t>(right)];
  int merged = -1;
  if (pieces_[static_cast<size_t>(cl)].empty()) {
    merged = cr;  // "" + y is y's text
  } else if (pieces_[static_cast<size_t>(cr)].empty()) {
    merged = cl;
  } else {
    const auto it = merges_.find(PairKey(cl, cr));
    if (it == merges_.end()) return false;
    *merge = it->second;
    return true;
  }
  const float s = scores_[static_cast<size_t>(merged)];
  if (!PassesMinScore(s)) return false;
  *merge = Merge{s, merged};
  return true;
}

std::vector<int> Llama2cTokenizer::InitialIds(std::string_view text) const {
  std::vector<int> seq;
  seq.reserve(text.size() + 1);
  if (!text.empty()) {
    const int space = Lookup(" ");
    if (space < 0) throw ConfigError("tokenizer has no piece \" \" for the dummy prefix");
    seq.push_back(space);
  }
  // Code points: a lead byte plus up to 3 continuation bytes; unknown ones fall back to bytes (+3).
  for (size_t i = 0; i < text.size();) {
    size_t j = i + 1;
    while (j < text.size() && IsContinuation(static_cast<unsigned char>(text[j])) && j - i < 4) ++j;
    const int id = Lookup(text.substr(i, j - i));
    if (id >= 0) {
      seq.push_back(id);
    } else {
      for (size_t b = i; b < j; ++b) {
        const int fallback = static_cast<unsigned char>(text[b]) + 3;
        if (fallback >= vocab_size()) {
          throw ConfigError(fmt::format(
              "byte 0x{:02X} at offset {} has no piece: its byte-fallback id {} is outside vocab_size {}",
              static_cast<unsigned char>(text[b]), b, fallback, vocab_size()));
        }
        seq.push_back(fallback);
      }
    }
    i = j;
  }
  return seq;
}

std::vector<int> Llama2cTokenizer::EncodeText(std::string_view text) const {
  std::vector<int> seq = InitialIds(text);
  // Merge loop. A heap entry (score, position a, left id, right id, merged id) is current iff position a is
  // alive, still holds `left` and its right neighbour still holds `right`: a token only changes by merging
  // (into a different, longer piece), and a's right neighbour only changes when a itself merges.
  const int n = static_cast<int>(seq.size());
  std::vector<int> next(static_cast<size_t>(n)), prev(static_cast<size_t>(n));
  std::vector<char> alive(static_cast<size_t>(n), 1);
  for (int a = 0; a < n; ++a) {
    next[a] = a + 1;
    prev[a] = a - 1;
  }
  struct Entry {
    float score;
    int pos, left, right, merged;
  };
  // Highest score first; on equal scores the leftmost position first (NaN scores never enter: FindMerge).
  auto worse = [](const Entry& x, const Entry& y) {
    return x.score != y.score ? x.score < y.score : x.pos > y.pos;
  };
  std::vector<Entry> init;
  Merge m;
  for (int a = 0; a + 1 < n; ++a) {
    if (FindMerge(seq[a], seq[a + 1], &m)) init.push_back({m.score, a, seq[a], seq[a + 1], m.id});
  }
  std::priority_queue<Entry, std::vector<Entry>, decltype(worse)> heap(worse, std::move(init));
  auto push = [&](int a, int left, int right) {
    Merge mm;
    if (FindMerge(left, right, &mm)) heap.push({mm.score, a, left, right, mm.id});
  };
  while (!heap.empty()) {
    const Entry e = heap.top();
    heap.pop();
    if (!alive[e.pos] || seq[e.pos] != e.left) continue;
    const int b = next[e.pos];
    if (b >= n || seq[b] != e.right) continue;
    seq[e.pos] = e.merged;
    alive[b] = 0;
    const int c = next[b];
    next[e.pos] = c;
    if (c < n) {
      prev[c] = e.pos;
      push(e.pos, e.merged, seq[c]);
    }
    if (prev[e.pos] >= 0) push(prev[e.pos], seq[prev[e.pos]], e.merged);
  }

  std::vector<int> ids;
  ids.reserve(static_cast<size_t>(n));
  for (int a = 0; a < n; ++a) {
    if (alive[a]) ids.push_back(seq[a]);
  }
  return ids;
}

std::vector<int> Llama2cTokenizer::EncodeReference(std::string_view text) const {
  std::vector<int> toks = InitialIds(text);
  while (true) {
    float best_score = kLlama2cMinMergeScore;
    int best_id = -1;
    size_t best_idx = 0;
    for (size_t i = 0; i + 1 < toks.size(); ++i) {
      const int id = Lookup(pieces_[static_cast<size_t>(toks[i])] + pieces_[static_cast<size_t>(toks[i + 1])]);
      if (id != -1 && scores_[static_cast<size_t>(id)] > best_score) {
        best_score = scores_[static_cast<size_t>(id)];
        best_id = id;
        best_idx = i;
      }
    }
    if (best_id == -1) break;
    toks[best_idx] = best_id;
    toks.erase(toks.begin() + static_cast<std::ptrdiff_t>(best_idx) + 1);
  }
  return toks;
}

std::string Llama2cTokenizer::DecodePiece(int prev, int token) const {
  CheckTokenId(token, vocab_size());
  std::string_view p = pieces_[static_cast<size_t>(token)];
  if (prev == kBosId && !p.empty() && p[0] == ' ') p.remove_prefix(1);
  const int byte = BytePieceValue(p);
  if (byte >= 0) return std::string(1, static_cast<char>(byte));
  return std::string(p);
}

std::string Llama2cTokenizer::Decode(std::span<const int> ids) const {
  std::string out;
  int prev = -1;
  for (int t : ids) {
    if (t != kBosId) out += DecodePiece(prev, t);
    prev = t;
  }
  return out;
}

}  // namespace posenc
