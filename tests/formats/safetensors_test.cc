// safetensors reader and Hugging Face checkpoint folders: the stories260K fixture as its SOURCE note states it,
// and every malformed header / folder case, each a clear error naming the file, the tensor or field and the value.

#include "posenc/formats/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "formats/formats_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/formats/json_reader.h"

namespace posenc {
namespace {

using testing::ExpectThrowWith;

constexpr const char* kBad = "bad.safetensors";

std::vector<uint8_t> Safetensors(const std::string& header, size_t data_bytes, uint64_t header_len_override = 0) {
  std::vector<uint8_t> out;
  testing::PutLe<uint64_t>(out, header_len_override ? header_len_override : header.size());
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

SafetensorsFile ParseBytes(const std::vector<uint8_t>& bytes) {
  return SafetensorsFile::Parse(MappedFile::FromBytes(bytes, kBad));
}

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                               static_cast<std::streamsize>(bytes.size()));
}
void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(Safetensors, Stories260KFixture) {
  const SafetensorsFile f =
      SafetensorsFile::Open(testing::ModelFixture("stories260K-hf/model.safetensors"));
  // 5 layers x 9 tensors + embed_tokens + norm; tied embeddings: no lm_head.
  EXPECT_EQ(f.tensors().size(), 47u);
  EXPECT_EQ(f.FindTensor("lm_head.weight"), nullptr);
  const SafetensorsTensor* emb = f.FindTensor("model.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dtype, "F32");
  EXPECT_EQ(emb->type, GgmlType::kF32);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(emb->n_bytes(), 512u * 64u * 4u);
  EXPECT_EQ(f.FindTensor("model.layers.4.mlp.down_proj.weight")->shape, (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(f.FindTensor("model.layers.0.self_attn.k_proj.weight")->shape, (std::vector<int64_t>{32, 64}));
  for (size_t i = 1; i < f.tensors().size(); ++i) EXPECT_LE(f.tensors()[i - 1].end, f.tensors()[i].begin);
}

TEST(Safetensors, ParsesDtypesMetadataAndEmptyTensors) {
  const std::string header =
      R"({"__metadata__": {"format": "pt"}, "a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},)"
      R"( "b": {"dtype": "F16", "shape": [4], "data_offsets": [12, 20]}, "e": {"dtype": "F32", "shape": [0, 5],)"
      R"( "data_offsets": [20, 20]}, "s": {"dtype": "F32", "shape": [], "data_offsets": [20, 24]}})";
  const SafetensorsFile f = ParseBytes(Safetensors(header, 24));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.FindTensor("a")->type, GgmlType::kBF16);
  EXPECT_EQ(f.FindTensor("b")->type, GgmlType::kF16);
  EXPECT_EQ(f.FindTensor("e")->n_elements, 0);
  EXPECT_EQ(f.FindTensor("s")->n_elements, 1);
  EXPECT_EQ(f.tensors().size(), 4u);
}

TEST(SafetensorsBadFiles, HeaderLength) {
  ExpectThrowWith<IoError>([&] { ParseBytes({1, 2, 3}); }, {kBad, "truncated", "8 bytes", "has 3"});
  ExpectThrowWith<IoError>([&] { ParseBytes(Safetensors("{}", 0, 1000)); },
                           {kBad, "header length 1000", "past the end"});
  ExpectThrowWith<IoError>([&] { ParseBytes(Safetensors("{}", 0, 1ULL << 63)); },
                           {kBad, "header length 9223372036854775808", "past the end"});
}

TEST(SafetensorsBadFiles, InvalidJson) {
  ExpectThrowWith<IoError>([&] { ParseBytes(Safetensors(R"({"a": {"dtype": "F32",)", 0)); },
                           {kBad, "invalid JSON"});
  ExpectThrowWith<IoError>([&] { ParseBytes(Safetensors("[1, 2]", 0)); }, {kBad, "object", "array"});
  // Nesting deeper than the limit is refused while parsing, before any tree is built.
  const std::string deep = R"({"__metadata__": )" + std::string(100, '[') + std::string(100, ']') + "}";
  ExpectThrowWith<IoError>([&] { ParseBytes(Safetensors(deep, 0)); }, {kBad, "nested 65 deep", "limit of 64"});
  ExpectThrowWith<IoError>([&] { ParseBytes(Safetensors(R"({"__metadata__": {"x": 1}})", 0)); },
                           {kBad, "__metadata__.x", "string"});
}

TEST(SafetensorsBadFiles, DuplicateNames) {
  const std::string header = R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                             R"( "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  ExpectThrowWith<IoError>([&] { ParseBytes(Safetensors(header, 8)); }, {kBad, "duplicate key 'w'"});
  const std::string field = R"({"w": {"dtype": "F32", "dtype": "F16", "shape": [1], "data_offsets": [0, 4]}})";
  ExpectThrowWith<IoError>([&] { ParseBytes(Safetensors(field, 4)); }, {kBad, "duplicate key 'dtype'"});
}

TEST(SafetensorsBadFiles, Dtypes) {
  ExpectThrowWith<IoError>(
      [&] { ParseBytes(Safetensors(R"({"w": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}})", 4)); },
      {kBad, "tensor 'w'", "unknown dtype 'F33'"});
  ExpectThrowWith<IoError>(
      [&] { ParseBytes(Safetensors(R"({"w": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8)); },
      {kBad, "tensor 'w'", "dtype 'I64' is not supported"});
  ExpectThrowWith<IoError>(
      [&] { ParseBytes(Safetensors(R"({"w": {"dtype": 32, "shape": [1], "data_offsets": [0, 4]}})", 4)); },
      {kBad, "tensor 'w'", "'dtype' must be a string"});
}

TEST(SafetensorsBadFiles, ShapeTimesDtypeIsNotTheByteRange) {
  ExpectThrowWith<IoError>(
      [&] { ParseBytes(Safetensors(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24)); },
      {kBad, "tensor 'w'", "[2, 3]", "24 bytes", "[0, 20)", "hold 20"});
  ExpectThrowWith<IoError>(
      [&] {
        ParseBytes(Safetensors(
            R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})", 4));
      },
      {kBad, "tensor 'w'", "[4294967296, 4294967296]", "overflows"});
  ExpectThrowWith<IoError>(
      [&] { ParseBytes(Safetensors(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4)); },
      {kBad, "tensor 'w'", "shape entries", "-1"});
  ExpectThrowWith<IoError>(
      [&] { ParseBytes(Safetensors(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4)); },
      {kBad, "tensor 'w'", "1.5"});
}

TEST(SafetensorsBadFiles, OffsetsOutOfRangeOrOverlapping) {
  ExpectThrowWith<IoError>(
      [&] { ParseBytes(Safetensors(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 7)); },
      {kBad, "tensor 'w'", "[0, 8)", "past the end of the data buffer (7 bytes)"});
  ExpectThrowWith<IoError>(
      [&] { ParseBytes(Safetensors(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 8)); },
      {kBad, "tensor 'w'", "begin > end"});
  ExpectThrowWith<IoError>(
      [&] { ParseBytes(Safetensors(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 8)); },
      {kBad, "tensor 'w'", "data_offsets"});
  ExpectThrowWith<IoError>(
      [&] {
        ParseBytes(Safetensors(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551612, 0]}})",
                               8));
      },
      {kBad, "tensor 'w'", "begin > end"});
  const std::string overlap = R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
                              R"( "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},)"
                              R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})";
  ExpectThrowWith<IoError>([&] { ParseBytes(Safetensors(overlap, 16)); },
                           {kBad, "tensor 'b'", "[8, 16)", "overlap tensor 'a'", "[0, 16)"});
}

// ---- checkpoint folders ------------------------------------------------------------------------------------------

const char* kConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4})";

std::vector<uint8_t> OneTensor(const std::string& name) {
  return Safetensors(R"({")" + name + R"(": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4);
}

TEST(HfCheckpoint, Stories260KFolder) {
  const HfCheckpoint ck = OpenHfCheckpoint(testing::ModelFixture("stories260K-hf"));
  EXPECT_EQ(ck.config.at("hidden_size"), 64);
  EXPECT_EQ(ck.shards.size(), 1u);
  EXPECT_EQ(ck.TensorNames().size(), 47u);
  EXPECT_NE(ck.FindTensor("model.norm.weight"), nullptr);
}

TEST(HfCheckpoint, ShardedByIndex) {
  testing::TempDir dir("hf_shards");
  WriteText(dir / "config.json", kConfig);
  WriteFile(dir / "model-00001-of-00002.safetensors", OneTensor("a"));
  WriteFile(dir / "model-00002-of-00002.safetensors", Safetensors(
      R"({"b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "extra": {"dtype": "F32", "shape": [1],)"
      R"( "data_offsets": [4, 8]}})", 8));
  WriteText(dir / "model.safetensors.index.json",
            R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",)"
            R"( "b": "model-00002-of-00002.safetensors"}})");
  const HfCheckpoint ck = OpenHfCheckpoint(dir.path.string());
  EXPECT_EQ(ck.shards.size(), 2u);
  EXPECT_EQ(ck.TensorNames(), (std::vector<std::string>{"a", "b"}));  // the weight_map is the authority
  EXPECT_EQ(ck.FindTensor("b")->name, "b");
  EXPECT_EQ(ck.FindTensor("extra"), nullptr);
}

TEST(HfCheckpoint, BadFolders) {
  ExpectThrowWith<IoError>([&] { OpenHfCheckpoint(testing::ModelFixture("stories260K-F32.gguf")); },
                           {"stories260K-F32.gguf", "not a Hugging Face checkpoint directory"});
  testing::TempDir dir("hf_bad");
  const std::string d = dir.path.string();
  ExpectThrowWith<IoError>([&] { OpenHfCheckpoint(d); }, {d, "config.json is missing"});
  WriteText(dir / "config.json", "{\"hidden_size\": ");
  ExpectThrowWith<IoError>([&] { OpenHfCheckpoint(d); }, {"config.json", "invalid JSON"});
  WriteText(dir / "config.json", "[1]");
  ExpectThrowWith<IoError>([&] { OpenHfCheckpoint(d); }, {"config.json", "JSON object", "array"});
  WriteText(dir / "config.json", kConfig);
  ExpectThrowWith<IoError>([&] { OpenHfCheckpoint(d); }, {d, "neither model.safetensors nor"});

  const std::string index = dir / "model.safetensors.index.json";
  WriteText(index, R"({"metadata": {}})");
  ExpectThrowWith<IoError>([&] { OpenHfCheckpoint(d); }, {index, "weight_map"});
  WriteText(index, R"({"weight_map": {"a": "shard-1.safetensors"}})");
  ExpectThrowWith<IoError>([&] { OpenHfCheckpoint(d); }, {index, "shard-1.safetensors", "'a'", "missing"});
  WriteText(index, R"({"weight_map": {"a": "../outside.safetensors"}})");
  ExpectThrowWith<IoError>([&] { OpenHfCheckpoint(d); }, {index, "'../outside.safetensors'", "plain file name"});
  WriteText(index, R"({"weight_map": {"a": 3}})");
  ExpectThrowWith<IoError>([&] { OpenHfCheckpoint(d); }, {index, "weight_map['a']", "3"});
  WriteFile(dir / "shard-1.safetensors", OneTensor("a"));
  WriteText(index, R"({"weight_map": {"a": "shard-1.safetensors", "q": "shard-1.safetensors"}})");
  ExpectThrowWith<IoError>([&] { OpenHfCheckpoint(d); }, {index, "'q'", "shard-1.safetensors", "does not hold it"});
  WriteFile(dir / "shard-1.safetensors", {1, 0});
  WriteText(index, R"({"weight_map": {"a": "shard-1.safetensors"}})");
  ExpectThrowWith<IoError>([&] { OpenHfCheckpoint(d); }, {"shard-1.safetensors", "truncated"});
}

TEST(JsonReader, StrictParsing) {
  EXPECT_EQ(ParseJsonStrict(R"({"a": [1, {"b": 2}], "c": {"a": 3}})", "x.json").at("c").at("a"), 3);
  ExpectThrowWith<IoError>([] { ParseJsonStrict(R"({"a": 1, "b": {"x": 1, "x": 2}})", "x.json"); },
                           {"x.json", "duplicate key 'x'"});
  const std::string deep = std::string(64, '[') + std::string(64, ']');
  EXPECT_NO_THROW(ParseJsonStrict(deep, "ok.json"));
  ExpectThrowWith<IoError>([&] { ParseJsonStrict("[" + deep + "]", "x.json"); }, {"x.json", "nested 65 deep"});
  // A million open brackets: refused at depth 65, no recursion, no tree.
  ExpectThrowWith<IoError>([] { ParseJsonStrict(std::string(1000000, '['), "x.json"); }, {"nested 65 deep"});
}

}  // namespace
}  // namespace posenc
