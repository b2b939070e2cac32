#include "posenc/model/tokenizer.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <queue>
#include <sstream>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/io/input_file.h"

namespace posenc {
namespace {

uint64_t PairKey(int left, int right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

}  // namespace

Tokenizer Tokenizer::FromBytes(std::string_view bytes, int64_t vocab_size, const std::string& source) {
  if (vocab_size < 3) {
    throw ConfigError(fmt::format("tokenizer vocab_size must be >= 3 (BOS=1, EOS=2), got {}", vocab_size));
  }
  Tokenizer t;
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
  t.pieces_.reserve(static_cast<size_t>(vocab_size));
  t.scores_.reserve(static_cast<size_t>(vocab_size));
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

Tokenizer Tokenizer::Load(const std::string& path, int64_t vocab_size) {
  return FromBytes(ReadRegularFile(path, "tokenizer"), vocab_size, path);
}

void Tokenizer::BuildIndex() {
  for (int& b : byte_piece_) b = -1;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    lookup_.emplace(pieces_[i], static_cast<int>(i));  // keeps the first id of a duplicated piece
    if (pieces_[i].size() == 1) {
      int& slot = byte_piece_[static_cast<unsigned char>(pieces_[i][0])];
      if (slot < 0) slot = static_cast<int>(i);
    }
  }
  // Every mergeable pair (x, y) -> merged id: split each piece in two at every byte.
  for (size_t m = 0; m < pieces_.size(); ++m) {
    const std::string& p = pieces_[m];
    if (lookup_.at(p) != static_cast<int>(m)) continue;  // a duplicate never wins a lookup
    for (size_t k = 1; k < p.size(); ++k) {
      const int x = Lookup(std::string_view(p).substr(0, k));
      const int y = Lookup(std::string_view(p).substr(k));
      if (x >= 0 && y >= 0) merges_.emplace(PairKey(x, y), Merge{scores_[m], static_cast<int>(m)});
    }
  }
}

int Tokenizer::Lookup(std::string_view text) const {
  if (text.size() == 1) return byte_piece_[static_cast<unsigned char>(text[0])];
  const auto it = lookup_.find(std::string(text));
  return it == lookup_.end() ? -1 : it->second;
}

std::vector<int> Tokenizer::Encode(std::string_view text, bool bos, bool eos) const {
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
      for (size_t b = i; b < j; ++b) seq.push_back(static_cast<unsigned char>(text[b]) + 3);
    }
    i = j;
  }

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
  // Highest score first; on equal scores the leftmost position first.
  auto worse = [](const Entry& x, const Entry& y) {
    return x.score != y.score ? x.score < y.score : x.pos > y.pos;
  };
  std::vector<Entry> init;
  for (int a = 0; a + 1 < n; ++a) {
    const auto it = merges_.find(PairKey(seq[a], seq[a + 1]));
    if (it != merges_.end()) init.push_back({it->second.score, a, seq[a], seq[a + 1], it->second.id});
  }
  std::priority_queue<Entry, std::vector<Entry>, decltype(worse)> heap(worse, std::move(init));
  auto push = [&](int a, int left, int right) {
    const auto it = merges_.find(PairKey(left, right));
    if (it != merges_.end()) heap.push({it->second.score, a, left, right, it->second.id});
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
  ids.reserve(static_cast<size_t>(n) + 2);
  if (bos) ids.push_back(kBosId);
  for (int a = 0; a < n; ++a) {
    if (alive[a]) ids.push_back(seq[a]);
  }
  if (eos) ids.push_back(kEosId);
  return ids;
}

std::string Tokenizer::DecodePiece(int prev, int token) const {
  if (token < 0 || token >= vocab_size()) {
    throw RangeError(fmt::format("token id must be in [0, vocab_size={}), got {}", vocab_size(), token));
  }
  std::string_view p = pieces_[static_cast<size_t>(token)];
  if (prev == kBosId && !p.empty() && p[0] == ' ') p.remove_prefix(1);
  if (p.size() == 6 && p.substr(0, 3) == "<0x" && p[5] == '>') {
    auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int hi = hex(p[3]), lo = hex(p[4]);
    if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
  }
  return std::string(p);
}

std::string Tokenizer::Decode(const std::vector<int>& ids) const {
  std::string out;
  int prev = -1;
  for (int t : ids) {
    if (t != kBosId) out += DecodePiece(prev, t);
    prev = t;
  }
  return out;
}

}  // namespace posenc
