// GGUF reader: the fixtures' metadata and tensor tables as their SOURCE notes state them, every value type
// through the getters, and every malformed-file case (each a clear error naming the file, the field and the
// value).

#include "posenc/formats/gguf.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <limits>
#include <map>

#include "formats/formats_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/formats/gguf_writer.h"

namespace posenc {
namespace {

using testing::ExpectThrowWith;
using testing::ModelFixture;
using testing::PutLe;
using testing::PutStr;
using testing::RawGguf;
using testing::RawKv;
using testing::RawTensorInfo;
using testing::RawU32;

constexpr const char* kBad = "bad.gguf";

GgufFile ParseBytes(const std::vector<uint8_t>& bytes) { return GgufFile::Parse(MappedFile::FromBytes(bytes, kBad)); }

std::map<std::string, int> TypeCounts(const GgufFile& f) {
  std::map<std::string, int> counts;
  for (const GgufTensorInfo& t : f.tensors()) ++counts[std::string(GgmlTypeName(t.type))];
  return counts;
}

// ---- the fixtures --------------------------------------------------------------------------------------------------

TEST(GgufFixtures, Stories260KF32Metadata) {
  const GgufFile f = GgufFile::Open(ModelFixture("stories260K-F32.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.GetString("general.architecture"), "llama");
  EXPECT_EQ(f.GetString("tokenizer.ggml.model"), "llama");
  // SOURCE.md: llama.context_length (u32) set to 512 (the converter wrote 128).
  EXPECT_EQ(f.TypeOf("llama.context_length"), GgufType::kUint32);
  EXPECT_EQ(f.GetInt64("llama.context_length"), 512);
  // The llama2.c header of stories260K: dim 64, hidden_dim 172, 5 layers, 8 heads, 4 kv heads, vocab 512.
  EXPECT_EQ(f.GetInt64("llama.embedding_length"), 64);
  EXPECT_EQ(f.GetInt64("llama.feed_forward_length"), 172);
  EXPECT_EQ(f.GetInt64("llama.block_count"), 5);
  EXPECT_EQ(f.GetInt64("llama.attention.head_count"), 8);
  EXPECT_EQ(f.GetInt64("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f.GetInt64("llama.rope.dimension_count"), 8);
  EXPECT_FLOAT_EQ(static_cast<float>(f.GetFloat("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_FALSE(f.Has("llama.rope.freq_base"));
  EXPECT_EQ(f.FindFloat("llama.rope.freq_base"), std::nullopt);
  // 5 layers x 9 tensors + token_embd + output_norm + output.
  EXPECT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(TypeCounts(f), (std::map<std::string, int>{{"f32", 48}}));
  const GgufTensorInfo& emb = f.GetTensor("token_embd.weight");
  EXPECT_EQ(emb.ne[0], 64);
  EXPECT_EQ(emb.ne[1], 512);
  EXPECT_EQ(emb.Shape(), (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(emb.n_bytes, 512u * 64u * 4u);
  EXPECT_EQ(f.GetTensor("blk.4.ffn_down.weight").Shape(), (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(f.GetTensor("blk.0.attn_k.weight").Shape(), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(f.GetTensor("output_norm.weight").Shape(), (std::vector<int64_t>{64}));
}

TEST(GgufFixtures, Ctx128IsTheConvertersRawOutput) {
  const GgufFile f = GgufFile::Open(ModelFixture("stories260K-f32-ctx128.gguf"));
  EXPECT_EQ(f.GetInt64("llama.context_length"), 128);
  EXPECT_EQ(f.tensors().size(), 48u);
}

TEST(GgufFixtures, TensorTypeMixturesAsSourceStates) {
  using Counts = std::map<std::string, int>;
  EXPECT_EQ(TypeCounts(GgufFile::Open(ModelFixture("stories260K-F16.gguf"))), (Counts{{"f16", 37}, {"f32", 11}}));
  EXPECT_EQ(TypeCounts(GgufFile::Open(ModelFixture("stories260K-BF16.gguf"))), (Counts{{"bf16", 37}, {"f32", 11}}));
  EXPECT_EQ(TypeCounts(GgufFile::Open(ModelFixture("stories260K-Q4_K_M.gguf"))),
            (Counts{{"q5_0", 29}, {"q8_0", 3}, {"f16", 5}, {"f32", 11}}));
  EXPECT_EQ(TypeCounts(GgufFile::Open(ModelFixture("stories260K-Q6_K.gguf"))),
            (Counts{{"q8_0", 32}, {"f16", 5}, {"f32", 11}}));
}

TEST(GgufFixtures, LlamaMiniRandMetadata) {
  const std::string path = testing::SharedModel("llama-mini-rand-q8_0.gguf");
  POSENC_SKIP_IF_ABSENT(path);
  const GgufFile f = GgufFile::Open(path);
  // SOURCE.md: hidden 256, 4 heads x head_dim 64, 2 KV heads, 2 layers, intermediate 704, vocab 32000, 2048.
  EXPECT_EQ(f.GetInt64("llama.embedding_length"), 256);
  EXPECT_EQ(f.GetInt64("llama.attention.head_count"), 4);
  EXPECT_EQ(f.GetInt64("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(f.GetInt64("llama.block_count"), 2);
  EXPECT_EQ(f.GetInt64("llama.feed_forward_length"), 704);
  EXPECT_EQ(f.GetInt64("llama.vocab_size"), 32000);
  EXPECT_EQ(f.GetInt64("llama.context_length"), 2048);
  EXPECT_EQ(f.GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(f.GetArray("tokenizer.ggml.tokens").size(), 32000u);
  EXPECT_TRUE(f.GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(f.GetBool("tokenizer.ggml.add_eos_token"));
  // Tied embeddings: no output.weight; 2 layers x 9 + token_embd + output_norm.
  EXPECT_EQ(f.FindTensor("output.weight"), nullptr);
  EXPECT_EQ(f.tensors().size(), 20u);
  EXPECT_EQ(TypeCounts(f), (std::map<std::string, int>{{"q8_0", 15}, {"f32", 5}}));
  const std::string q4 = testing::SharedModel("llama-mini-rand-Q4_K_M.gguf");
  const std::map<std::string, int> counts = TypeCounts(GgufFile::Open(q4));
  EXPECT_EQ(counts.at("q4_K"), 11);
  EXPECT_EQ(counts.at("q6_K"), 2);
  EXPECT_EQ(counts.at("f32"), 5);
  EXPECT_EQ(TypeCounts(GgufFile::Open(testing::SharedModel("llama-mini-rand-bf16.gguf"))),
            (std::map<std::string, int>{{"bf16", 15}, {"f32", 5}}));
}

// The vocabulary of the stories260K GGUFs is tok512's: the same pieces and scores as data/tok512.bin (llama2.c's
// tokenizer format: int32 max_token_length, then per piece float32 score, int32 length, bytes).
TEST(GgufFixtures, VocabularyEqualsTok512) {
  std::ifstream in(std::string(POSENC_DATA_DIR) + "/tok512.bin", std::ios::binary);
  ASSERT_TRUE(in);
  const std::vector<char> bin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const GgufFile f = GgufFile::Open(ModelFixture("stories260K-F32.gguf"));
  const std::span<const std::string_view> tokens = f.GetArray("tokenizer.ggml.tokens").Strings();
  const std::vector<float> scores = f.GetArray("tokenizer.ggml.scores").ToFloat32();
  ASSERT_EQ(tokens.size(), 512u);
  ASSERT_EQ(scores.size(), 512u);
  size_t pos = 4;
  for (size_t i = 0; i < 512; ++i) {
    float score;
    int32_t len;
    ASSERT_LE(pos + 8, bin.size());
    std::memcpy(&score, bin.data() + pos, 4);
    std::memcpy(&len, bin.data() + pos + 4, 4);
    pos += 8;
    ASSERT_LE(pos + static_cast<size_t>(len), bin.size());
    const std::string piece(bin.data() + pos, static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
    if (i >= 3) {  // llama2.c's export rewrites <unk>, <s>, </s>; the converter restores them
      // llama2.c writes "▁" as a space; the GGUF keeps SentencePiece's U+2581.
      std::string expected;
      for (char c : piece) expected += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
      EXPECT_EQ(tokens[i], expected) << "token " << i;
    }
    EXPECT_EQ(scores[i], score) << "score " << i;
  }
}

// Vocab-only GGUFs (no tensors) from llama.cpp: array access for the tokenizer, values known from the models'
// vocabularies (Llama's "<unk>", "<s>", "</s>", byte tokens; GPT-2's first merges).
TEST(GgufFixtures, VocabOnlyFiles) {
  const std::string dir = std::string(POSENC_TEST_DATA_DIR) + "/tokenizer/";
  const GgufFile spm = GgufFile::Open(dir + "ggml-vocab-llama-spm.gguf");
  EXPECT_TRUE(spm.tensors().empty());
  const GgufArray tokens = spm.GetArray("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 32000u);
  EXPECT_EQ(tokens.StringAt(0), "<unk>");
  EXPECT_EQ(tokens.StringAt(1), "<s>");
  EXPECT_EQ(tokens.StringAt(2), "</s>");
  EXPECT_EQ(tokens.StringAt(3), "<0x00>");
  // token_type: llama.cpp's LLAMA_TOKEN_TYPE_UNKNOWN = 2, CONTROL = 3, BYTE = 6.
  const std::vector<int32_t> types = spm.GetArray("tokenizer.ggml.token_type").ToInt32();
  ASSERT_EQ(types.size(), 32000u);
  EXPECT_EQ(types[0], 2);
  EXPECT_EQ(types[1], 3);
  EXPECT_EQ(types[2], 3);
  EXPECT_EQ(types[3], 6);
  EXPECT_EQ(spm.GetInt64("tokenizer.ggml.bos_token_id"), 1);

  const GgufFile gpt2 = GgufFile::Open(dir + "ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(gpt2.GetString("tokenizer.ggml.model"), "gpt2");
  const std::span<const std::string_view> merges = gpt2.GetArray("tokenizer.ggml.merges").Strings();
  ASSERT_EQ(merges.size(), 50000u);
  EXPECT_EQ(merges[0], "\xC4\xA0 t");  // "Ġ t"
  EXPECT_EQ(merges[1], "\xC4\xA0 a");
  EXPECT_EQ(merges[2], "h e");
  EXPECT_EQ(gpt2.GetArray("tokenizer.ggml.tokens").size(), 50257u);
}

// ---- every value type, through the writer -------------------------------------------------------------------------

GgufFile AllTypesFile() {
  GgufWriter w;
  w.Set("u8", GgufWriteValue::UInt8(200));
  w.Set("i8", GgufWriteValue::Int8(-100));
  w.Set("u16", GgufWriteValue::UInt16(60000));
  w.Set("i16", GgufWriteValue::Int16(-30000));
  w.Set("u32", GgufWriteValue::UInt32(4000000000u));
  w.Set("i32", GgufWriteValue::Int32(-2000000000));
  w.Set("u64", GgufWriteValue::UInt64(std::numeric_limits<uint64_t>::max()));
  w.Set("i64", GgufWriteValue::Int64(std::numeric_limits<int64_t>::min()));
  w.Set("f32", GgufWriteValue::Float32(0.1f));
  w.Set("f64", GgufWriteValue::Float64(0.1));
  w.Set("yes", GgufWriteValue::Bool(true));
  w.Set("no", GgufWriteValue::Bool(false));
  w.Set("str", GgufWriteValue::String("héllo"));
  w.Set("empty_str", GgufWriteValue::String(""));
  w.Set("strings", GgufWriteValue::StringArray({"a", "", "ccc"}));
  const std::vector<float> floats = {1.5f, -2.25f};
  w.Set("floats", GgufWriteValue::Float32Array(floats));
  w.Set("doubles", GgufWriteValue::Array(GgufType::kFloat64, {GgufWriteValue::Float64(1e300)}));
  w.Set("u8s", GgufWriteValue::Array(GgufType::kUint8, {GgufWriteValue::UInt8(0), GgufWriteValue::UInt8(255)}));
  w.Set("i64s", GgufWriteValue::Array(GgufType::kInt64, {GgufWriteValue::Int64(-5), GgufWriteValue::Int64(1LL << 40)}));
  w.Set("bools", GgufWriteValue::Array(GgufType::kBool, {GgufWriteValue::Bool(true), GgufWriteValue::Bool(false)}));
  w.Set("empty", GgufWriteValue::Array(GgufType::kInt32, {}));
  w.Set("nested", GgufWriteValue::Array(
                      GgufType::kArray,
                      {GgufWriteValue::Array(GgufType::kInt16, {GgufWriteValue::Int16(-7)}),
                       GgufWriteValue::StringArray({"x", "yz"}),
                       GgufWriteValue::Array(GgufType::kArray, {GgufWriteValue::Array(GgufType::kUint32, {})})}));
  return GgufFile::Parse(MappedFile::FromBytes(w.Serialize(), "types.gguf"));
}

TEST(GgufMetadata, IntegersOfAnyWidthAndSign) {
  const GgufFile f = AllTypesFile();
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.GetInt64("u8"), 200);
  EXPECT_EQ(f.GetInt64("i8"), -100);
  EXPECT_EQ(f.GetInt64("u16"), 60000);
  EXPECT_EQ(f.GetInt64("i16"), -30000);
  EXPECT_EQ(f.GetInt64("u32"), 4000000000LL);
  EXPECT_EQ(f.GetInt64("i32"), -2000000000);
  EXPECT_EQ(f.GetInt64("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.GetUInt64("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.GetUInt64("u8"), 200u);
  EXPECT_EQ(f.FindInt64("u16"), 60000);
  EXPECT_EQ(f.FindInt64("absent"), std::nullopt);
  ExpectThrowWith<ConfigError>([&] { f.GetInt64("u64"); }, {"types.gguf", "'u64'", "18446744073709551615", "int64"});
  ExpectThrowWith<ConfigError>([&] { f.GetUInt64("i8"); }, {"types.gguf", "'i8'", ">= 0", "-100"});
}

TEST(GgufMetadata, FloatsBoolsStrings) {
  const GgufFile f = AllTypesFile();
  EXPECT_EQ(f.GetFloat("f32"), static_cast<double>(0.1f));
  EXPECT_EQ(f.GetFloat("f64"), 0.1);
  EXPECT_TRUE(f.GetBool("yes"));
  EXPECT_FALSE(f.GetBool("no"));
  EXPECT_EQ(f.GetString("str"), "héllo");
  EXPECT_EQ(f.GetString("empty_str"), "");
  EXPECT_EQ(f.FindString("str"), "héllo");
  EXPECT_EQ(f.FindBool("absent"), std::nullopt);
  EXPECT_TRUE(f.Has("nested"));
  EXPECT_FALSE(f.Has("nestedx"));
  EXPECT_EQ(f.keys().front(), "u8");
  EXPECT_EQ(f.keys().size(), 22u);
}

TEST(GgufMetadata, WrongTypeAndMissingKeyErrorsNameFileKeyAndTypes) {
  const GgufFile f = AllTypesFile();
  ExpectThrowWith<ConfigError>([&] { f.GetInt64("str"); }, {"types.gguf", "'str'", "an integer", "string"});
  ExpectThrowWith<ConfigError>([&] { f.GetFloat("u32"); }, {"types.gguf", "'u32'", "float32 or float64", "uint32"});
  ExpectThrowWith<ConfigError>([&] { f.GetString("f32"); }, {"types.gguf", "'f32'", "a string", "float32"});
  ExpectThrowWith<ConfigError>([&] { f.GetBool("u8"); }, {"'u8'", "a bool", "uint8"});
  ExpectThrowWith<ConfigError>([&] { f.GetArray("i32"); }, {"'i32'", "an array", "int32"});
  ExpectThrowWith<ConfigError>([&] { f.FindInt64("f64"); }, {"'f64'", "an integer", "float64"});
  ExpectThrowWith<ConfigError>([&] { f.GetInt64("llama.block_count"); },
                               {"types.gguf", "'llama.block_count'", "missing"});
  ExpectThrowWith<ConfigError>([&] { f.GetTensor("output.weight"); }, {"types.gguf", "'output.weight'", "missing"});
}

TEST(GgufMetadata, Arrays) {
  const GgufFile f = AllTypesFile();
  const GgufArray s = f.GetArray("strings");
  EXPECT_EQ(s.element_type(), GgufType::kString);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s.StringAt(0), "a");
  EXPECT_EQ(s.StringAt(1), "");
  EXPECT_EQ(s.Strings()[2], "ccc");
  EXPECT_EQ(f.GetArray("floats").ToFloat32(), (std::vector<float>{1.5f, -2.25f}));
  EXPECT_EQ(f.GetArray("floats").FloatAt(1), -2.25);
  EXPECT_EQ(f.GetArray("doubles").FloatAt(0), 1e300);
  EXPECT_EQ(f.GetArray("u8s").ToInt32(), (std::vector<int32_t>{0, 255}));
  EXPECT_EQ(f.GetArray("i64s").ToInt64(), (std::vector<int64_t>{-5, 1LL << 40}));
  EXPECT_EQ(f.GetArray("u8s").RawBytes().size(), 2u);
  EXPECT_TRUE(f.GetArray("bools").BoolAt(0));
  EXPECT_FALSE(f.GetArray("bools").BoolAt(1));
  EXPECT_EQ(f.GetArray("empty").size(), 0u);
  EXPECT_TRUE(f.GetArray("empty").ToInt32().empty());
  const GgufArray nested = f.GetArray("nested");
  EXPECT_EQ(nested.element_type(), GgufType::kArray);
  ASSERT_EQ(nested.size(), 3u);
  EXPECT_EQ(nested.ArrayAt(0).Int64At(0), -7);
  EXPECT_EQ(nested.ArrayAt(1).StringAt(1), "yz");
  EXPECT_EQ(nested.ArrayAt(2).ArrayAt(0).element_type(), GgufType::kUint32);
  EXPECT_EQ(nested.ArrayAt(2).ArrayAt(0).size(), 0u);
  ExpectThrowWith<ConfigError>([&] { f.GetArray("i64s").ToInt32(); }, {"'i64s'", "element 1", "1099511627776", "int32"});
  ExpectThrowWith<ConfigError>([&] { f.GetArray("strings").ToFloat32(); }, {"'strings'", "float32", "string"});
  ExpectThrowWith<ConfigError>([&] { f.GetArray("floats").Strings(); }, {"'floats'", "strings", "float32"});
  ExpectThrowWith<ConfigError>([&] { nested.Int64At(0); }, {"'nested'", "integers", "array"});
  ExpectThrowWith<RangeError>([&] { s.StringAt(3); }, {"'strings'", "index 3", "size 3"});
}

TEST(GgufMetadata, VersionTwoReadsAsVersionThree) {
  GgufWriter w(2);
  w.Set("llama.context_length", GgufWriteValue::Int32(4096));  // as files edited with --override-kv store it
  const std::vector<float> v = {1, 2, 3, 4};
  const std::vector<int64_t> shape = {2, 2};
  w.AddTensor("t", GgmlType::kF32, shape, v);
  const GgufFile f = GgufFile::Parse(MappedFile::FromBytes(w.Serialize(), "v2.gguf"));
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.GetInt64("llama.context_length"), 4096);
  float got[4];
  std::memcpy(got, f.GetTensor("t").data, 16);
  EXPECT_EQ(got[3], 4.0f);
}

TEST(GgufMetadata, ArraysNestedToTheLimitAreRead) {
  GgufWriteValue v = GgufWriteValue::Array(GgufType::kUint8, {GgufWriteValue::UInt8(42)});
  for (int depth = 2; depth <= kGgufMaxArrayDepth; ++depth) v = GgufWriteValue::Array(GgufType::kArray, {v});
  GgufWriter w;
  w.Set("deep", v);
  const GgufFile f = GgufFile::Parse(MappedFile::FromBytes(w.Serialize(), "deep.gguf"));
  GgufArray a = f.GetArray("deep");
  for (int depth = 2; depth <= kGgufMaxArrayDepth; ++depth) a = a.ArrayAt(0);
  EXPECT_EQ(a.Int64At(0), 42);
  ExpectThrowWith<ConfigError>([&] { GgufWriteValue::Array(GgufType::kArray, {v}); }, {"nested 9 deep", "8"});
}

// ---- malformed files ---------------------------------------------------------------------------------------------

// A valid file: 2 metadata entries and 2 tensors (f32 [2, 32] and q8_0 [1, 32]).
RawGguf ValidRaw() {
  RawGguf g;
  g.kvs.push_back(RawKv("general.architecture", 8, [] {
    std::vector<uint8_t> p;
    PutStr(p, "llama");
    return p;
  }()));
  g.kvs.push_back(RawKv("llama.block_count", 4, RawU32(1)));
  g.tensors.push_back({"a.weight", {32, 2}, 0, 0});
  g.tensors.push_back({"b.weight", {32, 1}, 8, 256});
  g.data.assign(256 + 34, 0);
  return g;
}

TEST(GgufBadFiles, ValidBaseParses) {
  const GgufFile f = ParseBytes(ValidRaw().Build());
  EXPECT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.GetTensor("b.weight").type, GgmlType::kQ8_0);
  EXPECT_EQ(f.GetTensor("b.weight").n_bytes, 34u);
}

TEST(GgufBadFiles, WrongMagic) {
  RawGguf g = ValidRaw();
  g.magic = 0x58554747u;  // "GGUX"
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "magic", "0x58554747"});
  ExpectThrowWith<IoError>([&] { ParseBytes({}); }, {kBad, "truncated", "magic"});
}

TEST(GgufBadFiles, WrongVersion) {
  for (uint32_t v : {0u, 1u, 4u, 0x7fffffffu}) {
    RawGguf g = ValidRaw();
    g.version = v;
    ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "version must be 2 or 3", std::to_string(v)});
  }
  RawGguf g = ValidRaw();
  g.version = 0x03000000u;  // version 3 written big-endian
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "50331648", "big-endian"});
}

// Every proper prefix of a valid file is refused (header, metadata, tensor infos, data section).
TEST(GgufBadFiles, TruncatedAnywhere) {
  const std::vector<uint8_t> full = ValidRaw().Build();
  for (size_t len = 0; len < full.size(); ++len) {
    const std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    SCOPED_TRACE(len);
    try {
      ParseBytes(prefix);
      ADD_FAILURE() << "prefix of " << len << " bytes parsed";
    } catch (const IoError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(kBad), std::string::npos) << what;
      EXPECT_TRUE(what.find("truncated") != std::string::npos || what.find("runs past the end") != std::string::npos)
          << what;
    }
  }
}

TEST(GgufBadFiles, AbsurdStringAndArrayLengths) {
  {
    RawGguf g = ValidRaw();
    std::vector<uint8_t> kv;
    PutLe<uint64_t>(kv, 1ULL << 63);  // key length 2^63
    g.kvs[1] = kv;
    ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "key length 9223372036854775808", "past the end"});
  }
  {
    RawGguf g = ValidRaw();
    std::vector<uint8_t> p;
    PutLe<uint64_t>(p, 1000);  // string value longer than the file
    g.kvs[0] = RawKv("general.architecture", 8, p);
    ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); },
                             {kBad, "'general.architecture'", "string value length 1000", "past the end"});
  }
  for (uint32_t elem : {0u, 8u, 9u, 12u}) {  // u8, string, array, f64 elements
    RawGguf g = ValidRaw();
    std::vector<uint8_t> p;
    PutLe<uint32_t>(p, elem);
    PutLe<uint64_t>(p, 1ULL << 63);
    g.kvs.push_back(RawKv("tokenizer.ggml.tokens", 9, p));
    ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); },
                             {kBad, "'tokenizer.ggml.tokens'", "array of 9223372036854775808"});
  }
  {
    RawGguf g = ValidRaw();
    std::vector<uint8_t> p;  // string array whose second element's length runs past the end
    PutLe<uint32_t>(p, 8);
    PutLe<uint64_t>(p, 2);
    PutStr(p, "ok");
    PutLe<uint64_t>(p, 1ULL << 62);
    g.kvs.push_back(RawKv("tokenizer.ggml.merges", 9, p));
    ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); },
                             {kBad, "'tokenizer.ggml.merges'", "array string length 4611686018427387904"});
  }
}

TEST(GgufBadFiles, AbsurdCounts) {
  RawGguf g = ValidRaw();
  g.n_kv_override = 1LL << 62;
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "metadata_kv_count 4611686018427387904"});
  g = ValidRaw();
  g.n_tensors_override = std::numeric_limits<int64_t>::max();
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "tensor_count 9223372036854775807"});
}

TEST(GgufBadFiles, TensorOutsideTheData) {
  RawGguf g = ValidRaw();
  g.tensors[1].offset = 1ULL << 40;
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); },
                           {kBad, "'b.weight'", "1099511627776", "past the end of the data section"});
  g = ValidRaw();
  g.tensors[1].offset = std::numeric_limits<uint64_t>::max() - 31;  // aligned; offset + size overflows uint64
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'b.weight'", "past the end"});
  g = ValidRaw();
  g.data.resize(g.data.size() - 1);  // the last tensor's bytes end one past the file
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'b.weight'", "[256, 290)", "past the end"});
}

TEST(GgufBadFiles, OverlappingTensors) {
  RawGguf g = ValidRaw();
  g.tensors[1].offset = 224;  // a.weight is [0, 256)
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'b.weight'", "[224, 258)", "overlaps", "'a.weight'"});
}

TEST(GgufBadFiles, MisalignedOffset) {
  RawGguf g = ValidRaw();
  g.tensors[1].offset = 260;
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'b.weight'", "offset 260", "alignment 32"});
}

TEST(GgufBadFiles, DimensionsAndElementCounts) {
  RawGguf g = ValidRaw();
  g.tensors[0].dims = {32, 2, 1, 1, 1};
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'a.weight'", "n_dimensions", "got 5"});
  g = ValidRaw();
  g.tensors[0].dims = {};
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'a.weight'", "n_dimensions", "got 0"});
  g = ValidRaw();
  g.tensors[0].dims = {32, 0};
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'a.weight'", "dimension 1", "got 0"});
  g = ValidRaw();
  g.tensors[0].dims = {32, 1ULL << 63};
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'a.weight'", "9223372036854775808"});
  g = ValidRaw();
  g.tensors[0].dims = {1ULL << 32, 1ULL << 32};
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); },
                           {kBad, "'a.weight'", "[4294967296, 4294967296]", "overflows int64"});
  g = ValidRaw();
  g.tensors[0].dims = {1ULL << 61, 2};  // 2^62 elements fit; 2^64 bytes do not
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'a.weight'", "byte size", "overflows int64"});
}

TEST(GgufBadFiles, RowNotAWholeNumberOfBlocks) {
  RawGguf g = ValidRaw();
  g.tensors[1].dims = {33, 1};
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); },
                           {kBad, "'b.weight'", "row of 33 values", "32-value blocks", "q8_0"});
}

TEST(GgufBadFiles, UnknownTypes) {
  RawGguf g = ValidRaw();
  g.tensors[1].type = 4;  // Q4_2, removed from ggml
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'b.weight'", "unknown ggml type id 4"});
  g.tensors[1].type = 1000;
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'b.weight'", "unknown ggml type id 1000"});
  g = ValidRaw();
  g.kvs.push_back(RawKv("x.y", 13, RawU32(0)));
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'x.y'", "value type 13"});
  g = ValidRaw();
  std::vector<uint8_t> p;
  PutLe<uint32_t>(p, 77);
  PutLe<uint64_t>(p, 0);
  g.kvs.push_back(RawKv("x.arr", 9, p));
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'x.arr'", "element type 77"});
}

TEST(GgufBadFiles, DuplicateNames) {
  RawGguf g = ValidRaw();
  g.kvs.push_back(RawKv("llama.block_count", 5, RawU32(2)));
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'llama.block_count'", "duplicate key"});
  g = ValidRaw();
  g.tensors[1].name = "a.weight";
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'a.weight'", "duplicate tensor name"});
}

TEST(GgufBadFiles, EmptyAndOverlongNames) {
  RawGguf g = ValidRaw();
  g.kvs.push_back(RawKv("", 4, RawU32(0)));
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "metadata entry 2", "key is empty"});
  g = ValidRaw();
  g.tensors[0].name = "";
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "tensor info 0", "empty"});
  g = ValidRaw();
  g.tensors[0].name = std::string(65, 'x');
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "tensor info 0", "65 bytes", "64"});
}

TEST(GgufBadFiles, BoolOtherThanZeroOrOne) {
  RawGguf g = ValidRaw();
  g.kvs.push_back(RawKv("x.flag", 7, {2}));
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'x.flag'", "0 or 1", "got 2"});
  g = ValidRaw();
  std::vector<uint8_t> p;
  PutLe<uint32_t>(p, 7);
  PutLe<uint64_t>(p, 3);
  p.insert(p.end(), {1, 0, 255});
  g.kvs.push_back(RawKv("x.flags", 9, p));
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'x.flags'", "element 2", "got 255"});
}

TEST(GgufBadFiles, ArraysNestedTooDeep) {
  // Arrays of arrays, each with one element, kGgufMaxArrayDepth + 1 deep, around a u8 array. The reader
  // stops at the limit without recursing (a file of 10^6 nested arrays would be refused the same way).
  RawGguf g = ValidRaw();
  std::vector<uint8_t> p;
  for (int i = 0; i < kGgufMaxArrayDepth; ++i) {
    PutLe<uint32_t>(p, 9);
    PutLe<uint64_t>(p, 1);
  }
  PutLe<uint32_t>(p, 0);
  PutLe<uint64_t>(p, 1);
  p.push_back(7);
  g.kvs.push_back(RawKv("x.deep", 9, p));
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'x.deep'", "nested 9 deep", "limit of 8"});
}

TEST(GgufBadFiles, Alignment) {
  for (uint32_t a : {0u, 48u, 1u << 31}) {
    RawGguf g = ValidRaw();
    g.kvs.push_back(RawKv("general.alignment", 4, RawU32(a)));
    ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); },
                             {kBad, "'general.alignment'", "power of two", std::to_string(a)});
  }
  RawGguf g = ValidRaw();
  std::vector<uint8_t> p;
  PutStr(p, "32");
  g.kvs.push_back(RawKv("general.alignment", 8, p));
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'general.alignment'", "integer", "string"});
  // A valid non-default alignment moves the data section and the offsets' grid.
  g = ValidRaw();
  g.kvs.push_back(RawKv("general.alignment", 4, RawU32(64)));
  g.alignment = 64;
  g.tensors[1].offset = 256;
  const GgufFile f = ParseBytes(g.Build());
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  g.tensors[1].offset = 288;  // a multiple of 32 but not of 64
  ExpectThrowWith<IoError>([&] { ParseBytes(g.Build()); }, {kBad, "'b.weight'", "offset 288", "alignment 64"});
}

TEST(GgufBadFiles, NotARegularFile) {
  ExpectThrowWith<IoError>([&] { GgufFile::Open(std::string(POSENC_TEST_DATA_DIR) + "/models"); },
                           {"models", "directory"});
  ExpectThrowWith<IoError>([&] { GgufFile::Open("/nonexistent/x.gguf"); }, {"/nonexistent/x.gguf", "No such file"});
  testing::TempDir dir("gguf_fifo");
  const std::string fifo = dir / "pipe.gguf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectThrowWith<IoError>([&] { GgufFile::Open(fifo); }, {"pipe.gguf", "FIFO"});
  const std::string empty = dir / "empty.gguf";
  { std::ofstream(empty).flush(); }
  ExpectThrowWith<IoError>([&] { GgufFile::Open(empty); }, {"empty.gguf", "truncated", "magic"});
}

}  // namespace
}  // namespace posenc
