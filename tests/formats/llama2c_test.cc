// llama2.c checkpoint reader: the bundled stories260K header and sizes, a synthetic checkpoint with a separate
// classifier (every tensor lands where the format says, read into vectors and as views), and one test per
// bad-input error.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "model/model_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/formats/llama2c.h"
#include "posenc/model/loader.h"
#include "test_util.h"

namespace posenc {
namespace {

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

std::string TempFile(const std::string& name, const std::vector<char>& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("posenc_reader_test_" + std::to_string(::getpid()) + "_" + name)).string();
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::vector<char> Header(std::vector<int32_t> h) {
  std::vector<char> b(28);
  std::memcpy(b.data(), h.data(), 28);
  return b;
}

using testing::ExpectThrowWith;

TEST(Llama2cReaderTest, Stories260KHeader) {
  const Checkpoint ck = LoadCheckpoint(testing::ModelPath());
  const Llama2cHeader& c = ck.config;
  // Values from data/SOURCE.md (the model card of stories260K).
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_TRUE(c.shared_classifier);
  EXPECT_EQ(c.head_dim(), 8);
  EXPECT_EQ(c.kv_dim(), 32);
  EXPECT_EQ(CheckpointBytes(c), 1056540);
  EXPECT_EQ(ck.weights.wq.size(), 5u * 64 * 64);
  EXPECT_EQ(ck.weights.wk.size(), 5u * 32 * 64);
  EXPECT_EQ(ck.weights.w2.size(), 5u * 64 * 172);
  EXPECT_TRUE(ck.weights.wcls.empty());
  EXPECT_EQ(ck.weights.classifier(), ck.weights.token_embedding_table.data());
  // The last tensor read (rms_final) holds the file's floats just before the 512 * 8 legacy freq_cis floats.
  const std::vector<char> bytes = ReadAll(testing::ModelPath());
  float last;
  std::memcpy(&last, bytes.data() + bytes.size() - 4 * (512 * 8) - 4, 4);
  EXPECT_EQ(ck.weights.rms_final_weight.back(), last);
}

TEST(Llama2cReaderTest, SeparateClassifierTensorsInFileOrder) {
  // dim 8, hidden 12, 2 layers, 2 heads, 1 kv head (head_dim 4, kv_dim 4), vocab 5 (negative: own
  // classifier), seq_len 3. Float k of the file holds the value k.
  const int64_t dim = 8, hidden = 12, layers = 2, kv = 4, vocab = 5, seq = 3, head = 4;
  std::vector<int64_t> sizes = {vocab * dim,  layers * dim,         layers * dim * dim,    layers * kv * dim,
                                layers * kv * dim, layers * dim * dim, layers * dim,      layers * hidden * dim,
                                layers * dim * hidden, layers * hidden * dim, dim, seq * head, vocab * dim};
  int64_t total = 0;
  std::vector<int64_t> start;
  for (int64_t s : sizes) {
    start.push_back(total);
    total += s;
  }
  std::vector<char> bytes = Header({8, 12, 2, 2, 1, -5, 3});
  for (int64_t k = 0; k < total; ++k) {
    const float f = static_cast<float>(k);
    bytes.insert(bytes.end(), reinterpret_cast<const char*>(&f), reinterpret_cast<const char*>(&f) + 4);
  }
  const std::string path = TempFile("separate.bin", bytes);
  const Checkpoint ck = LoadCheckpoint(path);
  const ModelFile views = LoadModelFile(path);  // the same tensors as views into the mapping
  std::remove(path.c_str());
  auto first = [](const TensorView& t) {
    float f;
    std::memcpy(&f, t.data, 4);
    return f;
  };
  EXPECT_EQ(views.format, ModelFormat::kLlama2c);
  EXPECT_FALSE(views.config.tied_embeddings);
  EXPECT_EQ(views.config.train_ctx, 3);
  EXPECT_EQ(first(views.tensors.token_embd), static_cast<float>(start[0]));
  EXPECT_EQ(first(views.tensors.layers[1].attn_norm->weight), static_cast<float>(start[1] + dim));
  EXPECT_EQ(first(views.tensors.layers[1].wq), static_cast<float>(start[2] + dim * dim));
  EXPECT_EQ(first(views.tensors.layers[1].wk), static_cast<float>(start[3] + kv * dim));
  EXPECT_EQ(first(views.tensors.layers[1].wv), static_cast<float>(start[4] + kv * dim));
  EXPECT_EQ(first(views.tensors.layers[1].wo), static_cast<float>(start[5] + dim * dim));
  EXPECT_EQ(first(views.tensors.layers[1].ffn_norm->weight), static_cast<float>(start[6] + dim));
  EXPECT_EQ(first(*views.tensors.layers[1].w_gate), static_cast<float>(start[7] + hidden * dim));
  EXPECT_EQ(first(views.tensors.layers[1].w_down), static_cast<float>(start[8] + dim * hidden));
  EXPECT_EQ(first(views.tensors.layers[1].w_up), static_cast<float>(start[9] + hidden * dim));
  EXPECT_EQ(first(views.tensors.output_norm.weight), static_cast<float>(start[10]));
  ASSERT_TRUE(views.tensors.output.has_value());
  EXPECT_EQ(first(*views.tensors.output), static_cast<float>(start[12]));
  EXPECT_EQ(views.tensors.layers[1].w_down.shape, (std::vector<int64_t>{dim, hidden}));
  EXPECT_FALSE(ck.config.shared_classifier);
  EXPECT_EQ(ck.config.vocab_size, 5);
  const ModelWeights& w = ck.weights;
  const std::vector<const std::vector<float>*> tensors = {&w.token_embedding_table, &w.rms_att_weight, &w.wq,
                                                          &w.wk, &w.wv, &w.wo, &w.rms_ffn_weight, &w.w1, &w.w2,
                                                          &w.w3, &w.rms_final_weight};
  for (size_t i = 0; i < tensors.size(); ++i) {
    ASSERT_EQ(static_cast<int64_t>(tensors[i]->size()), sizes[i]) << "tensor " << i;
    EXPECT_EQ(tensors[i]->front(), static_cast<float>(start[i])) << "tensor " << i;
    EXPECT_EQ(tensors[i]->back(), static_cast<float>(start[i] + sizes[i] - 1)) << "tensor " << i;
  }
  // The legacy freq_cis block (index 11) is skipped; the classifier is the block after it.
  ASSERT_EQ(static_cast<int64_t>(w.wcls.size()), sizes[12]);
  EXPECT_EQ(w.wcls.front(), static_cast<float>(start[12]));
  EXPECT_EQ(w.classifier(), w.wcls.data());
}

// stories260K with one float replaced: byte offset of element `index` of tensor number `tensor` in file order
// (0 token_embedding_table, 1 rms_att_weight, 2 wq, 3 wk, 4 wv, 5 wo, 6 rms_ffn_weight, 7 w1, 8 w2, ...).
std::string Stories260KWith(int tensor, int64_t index, float value, const std::string& name) {
  const int64_t sizes[] = {512 * 64, 5 * 64, 5 * 64 * 64, 5 * 32 * 64, 5 * 32 * 64, 5 * 64 * 64, 5 * 64,
                           5 * 172 * 64, 5 * 64 * 172, 5 * 172 * 64, 64};
  int64_t offset = 28;
  for (int t = 0; t < tensor; ++t) offset += 4 * sizes[t];
  std::vector<char> bytes = ReadAll(testing::ModelPath());
  std::memcpy(bytes.data() + offset + 4 * index, &value, 4);
  return TempFile(name, bytes);
}

// Weights that are NaN or infinite used to load silently (and NaN queries then became uniform attention and a
// believable perplexity). The reader refuses them, naming the tensor and the first bad element.
TEST(Llama2cReaderTest, NonFiniteWeightIsRefusedNamingTensorAndIndex) {
  const std::string nan_path = Stories260KWith(2, 3 * 64 + 5, std::nanf(""), "nan_wq.bin");
  ExpectThrowWith<IoError>([&] { LoadCheckpoint(nan_path); }, {"tensor wq", "[0, 3, 5]", "flat index 197", "nan"});
  std::remove(nan_path.c_str());
  const std::string inf_path =
      Stories260KWith(8, 2 * 64 * 172 + 10 * 172 + 7, -std::numeric_limits<float>::infinity(), "inf_w2.bin");
  ExpectThrowWith<IoError>([&] { LoadCheckpoint(inf_path); }, {"tensor w2", "[2, 10, 7]", "-inf"});
  std::remove(inf_path.c_str());
}

// A directory or a FIFO as the checkpoint: a clear error before anything is opened (a FIFO without a writer
// used to block the run forever).
TEST(Llama2cReaderTest, DirectoryOrFifoIsRefusedBeforeOpening) {
  const std::string dir = TempFile("dir_probe", {});
  std::remove(dir.c_str());
  std::filesystem::create_directory(dir);
  ExpectThrowWith<IoError>([&] { LoadCheckpoint(dir); }, {"checkpoint", "is a directory"});
  std::filesystem::remove(dir);
  const std::string fifo = dir + ".fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectThrowWith<IoError>([&] { LoadCheckpoint(fifo); }, {"checkpoint", "FIFO"});
  std::remove(fifo.c_str());
}

TEST(Llama2cReaderTest, TruncatedCheckpointNamesExpectedAndActualBytes) {
  std::vector<char> bytes = ReadAll(testing::ModelPath());
  bytes.resize(bytes.size() - 100);
  const std::string path = TempFile("truncated.bin", bytes);
  ExpectThrowWith<IoError>([&] { LoadCheckpoint(path); }, {"expected 1056540 bytes", "got 1056440", "truncated"});
  std::remove(path.c_str());
}

TEST(Llama2cReaderTest, OversizedCheckpointIsAnError) {
  std::vector<char> bytes = ReadAll(testing::ModelPath());
  bytes.resize(bytes.size() + 8, 0);
  const std::string path = TempFile("oversized.bin", bytes);
  ExpectThrowWith<IoError>([&] { LoadCheckpoint(path); }, {"expected 1056540 bytes", "got 1056548"});
  std::remove(path.c_str());
}

TEST(Llama2cReaderTest, ShortHeaderAndMissingFile) {
  const std::string path = TempFile("short.bin", {'a', 'b', 'c'});
  ExpectThrowWith<IoError>([&] { LoadCheckpoint(path); }, {"header needs 28 bytes, got 3"});
  std::remove(path.c_str());
  ExpectThrowWith<IoError>([&] { LoadCheckpoint("/nonexistent/model.bin"); }, {"/nonexistent/model.bin"});
}

TEST(Llama2cReaderTest, InconsistentHeadersAreConfigErrorsBeforeAnyTensorIsRead) {
  // Header only: the checks run before the size comparison, so these never get to "expected ... bytes".
  auto parse = [](std::vector<int32_t> h) {
    const std::vector<char> b = Header(h);
    ParseCheckpointHeader(std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(b.data()), 28),
                          1056540);
  };
  ExpectThrowWith<ConfigError>([&] { parse({0, 172, 5, 8, 4, 512, 512}); }, {"dim must be > 0, got 0"});
  ExpectThrowWith<ConfigError>([&] { parse({64, -1, 5, 8, 4, 512, 512}); }, {"hidden_dim must be > 0, got -1"});
  ExpectThrowWith<ConfigError>([&] { parse({64, 172, 5, 8, 0, 512, 512}); }, {"n_kv_heads must be > 0, got 0"});
  ExpectThrowWith<ConfigError>([&] { parse({64, 172, 5, 8, 4, 0, 512}); }, {"vocab_size must be > 0, got 0"});
  ExpectThrowWith<ConfigError>([&] { parse({64, 172, 5, 8, 4, 512, 0}); }, {"seq_len must be > 0, got 0"});
  ExpectThrowWith<ConfigError>([&] { parse({64, 172, 5, 7, 1, 512, 512}); }, {"dim=64 n_heads=7"});
  ExpectThrowWith<ConfigError>([&] { parse({64, 172, 5, 8, 3, 512, 512}); }, {"n_heads=8 n_kv_heads=3"});
  ExpectThrowWith<ConfigError>([&] { parse({48, 172, 5, 16, 4, 512, 512}); }, {"head_dim", "even", "got 3"});
  // A consistent header of another model: the size check names both sizes.
  ExpectThrowWith<IoError>([&] { parse({64, 172, 6, 8, 4, 512, 512}); }, {"expected", "got 1056540"});
}

}  // namespace
}  // namespace posenc
