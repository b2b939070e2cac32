// Helpers for the tokenizer tests: llama.cpp's vocabulary vectors (tests/data/tokenizer) and small
// vocabularies built in the test.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace posenc::testing {

/// The five vocabularies whose GGUF ships with the vectors.
inline const std::vector<std::string>& VectorVocabs() {
  static const std::vector<std::string> names = {"llama-spm", "phi-3", "gpt-2", "deepseek-llm", "starcoder"};
  return names;
}

inline std::string TokenizerData(const std::string& file) {
  return std::string(POSENC_TEST_DATA_DIR) + "/tokenizer/" + file;
}
inline std::string VocabGguf(const std::string& name) { return TokenizerData("ggml-vocab-" + name + ".gguf"); }
inline std::string Llama2TokenizerModel() { return TokenizerData("llama2-tokenizer.model"); }

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The strings of NAME.gguf.inp: separated by lines "__ggml_vocab_test__", the file ending with one.
inline std::vector<std::string> VectorInputs(const std::string& name) {
  const std::string s = ReadBytes(VocabGguf(name) + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  for (size_t pos = 0;;) {
    const size_t at = s.find(sep, pos);
    if (at == std::string::npos) break;
    out.push_back(s.substr(pos, at - pos));
    pos = at + sep.size();
  }
  return out;
}

/// The ids of NAME.gguf.out: one line of space-separated ids per string.
inline std::vector<std::vector<int>> VectorOutputs(const std::string& name) {
  std::ifstream in(VocabGguf(name) + ".out");
  if (!in) throw std::runtime_error("cannot open " + VocabGguf(name) + ".out");
  std::vector<std::vector<int>> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int> ids;
    int id;
    while (ls >> id) ids.push_back(id);
    out.push_back(ids);
  }
  return out;
}

}  // namespace posenc::testing
