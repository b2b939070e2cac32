// GGUF writer: files it writes read back equal (metadata, F32/F16/BF16 tensors, alignment), the write is atomic
// and never replaces an existing file unless asked, and metadata copies keep every key's exact type and value.

#include "posenc/formats/gguf_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "formats/formats_test_util.h"
#include "posenc/core/dtype.h"
#include "posenc/core/errors.h"
#include "posenc/kernels/dequant.h"

namespace posenc {
namespace {

using testing::ExpectThrowWith;

GgufWriter SmallWriter(float first) {
  GgufWriter w;
  w.Set("general.name", GgufWriteValue::String("small"));
  const std::vector<float> v = {first, -2.5f, 1e-3f, 65504.0f, 3.0f, 0.1f};
  const std::vector<int64_t> shape = {2, 3};
  w.AddTensor("f32", GgmlType::kF32, shape, v);
  w.AddTensor("f16", GgmlType::kF16, shape, v);
  w.AddTensor("bf16", GgmlType::kBF16, shape, v);
  return w;
}

std::vector<float> Row(const GgufTensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements));
  DequantizeRow(t.type, t.data, out.data(), t.n_elements);
  return out;
}

TEST(GgufWriter, TensorsReadBack) {
  GgufWriter w = SmallWriter(1.0f);
  w.SetAlignment(128);
  const GgufFile f = GgufFile::Parse(MappedFile::FromBytes(w.Serialize(), "small.gguf"));
  EXPECT_EQ(f.alignment(), 128u);
  EXPECT_EQ(f.GetInt64("general.alignment"), 128);
  EXPECT_EQ(f.data_offset() % 128, 0u);
  for (const GgufTensorInfo& t : f.tensors()) EXPECT_EQ(t.offset % 128, 0u) << t.name;
  const std::vector<float> v = {1.0f, -2.5f, 1e-3f, 65504.0f, 3.0f, 0.1f};
  EXPECT_EQ(Row(f.GetTensor("f32")), v);
  EXPECT_EQ(f.GetTensor("f32").Shape(), (std::vector<int64_t>{2, 3}));
  const std::vector<float> f16 = Row(f.GetTensor("f16")), bf16 = Row(f.GetTensor("bf16"));
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(f16[i], F16ToF32(F32ToF16(v[i]))) << i;
    EXPECT_EQ(bf16[i], BF16ToF32(F32ToBF16(v[i]))) << i;
  }
}

TEST(GgufWriter, RefusesBadInput) {
  GgufWriter w;
  const std::vector<float> v(6);
  const std::vector<int64_t> shape = {2, 3};
  w.AddTensor("t", GgmlType::kF32, shape, v);
  ExpectThrowWith<ConfigError>([&] { w.AddTensor("t", GgmlType::kF32, shape, v); }, {"'t'", "twice"});
  ExpectThrowWith<ShapeError>([&] { w.AddTensor("u", GgmlType::kF32, std::vector<int64_t>{7}, v); }, {"'u'"});
  ExpectThrowWith<ConfigError>([&] { w.AddTensor("q", GgmlType::kQ8_0, shape, v); }, {"'q'", "q8_0"});
  ExpectThrowWith<ConfigError>([&] { w.AddTensor(std::string(65, 'n'), GgmlType::kF32, shape, v); }, {"65 bytes"});
  ExpectThrowWith<ConfigError>([&] { w.Set("general.alignment", GgufWriteValue::UInt32(64)); }, {"SetAlignment"});
  ExpectThrowWith<ConfigError>([&] { w.SetAlignment(48); }, {"power of two", "48"});
  ExpectThrowWith<ConfigError>([&] { GgufWriter(1); }, {"version", "got 1"});
  ExpectThrowWith<ConfigError>(
      [&] { GgufWriteValue::Array(GgufType::kInt32, {GgufWriteValue::Int32(1), GgufWriteValue::Int64(2)}); },
      {"element 1", "int64"});
}

TEST(GgufWriter, WritesAtomicallyAndNeverOverwritesUnasked) {
  testing::TempDir dir("gguf_write");
  const std::string path = dir / "model.gguf";
  SmallWriter(1.0f).WriteFile(path);
  const GgufFile first = GgufFile::Open(path);
  EXPECT_EQ(Row(first.GetTensor("f32"))[0], 1.0f);

  ExpectThrowWith<IoError>([&] { SmallWriter(2.0f).WriteFile(path); }, {path, "exists", "refusing to overwrite"});
  EXPECT_EQ(Row(GgufFile::Open(path).GetTensor("f32"))[0], 1.0f);  // untouched

  SmallWriter(3.0f).WriteFile(path, /*overwrite=*/true);
  EXPECT_EQ(Row(GgufFile::Open(path).GetTensor("f32"))[0], 3.0f);
  // The file was replaced by a rename: a reader of the old file keeps its bytes.
  EXPECT_EQ(Row(first.GetTensor("f32"))[0], 1.0f);

  // No temporary file is left behind, also after a failure.
  ExpectThrowWith<IoError>([&] { SmallWriter(4.0f).WriteFile(dir / "missing/model.gguf"); }, {"missing/model.gguf"});
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"model.gguf"}));
}

TEST(GgufWriter, CopyMetadataKeepsTypesAndValues) {
  const GgufFile src = GgufFile::Open(testing::ModelFixture("stories260K-F32.gguf"));
  GgufWriter w;
  w.CopyMetadata(src);
  w.Set("general.name", GgufWriteValue::String("fine-tuned"));  // replaced in place
  const GgufFile copy = GgufFile::Parse(MappedFile::FromBytes(w.Serialize(), "copy.gguf"));
  ASSERT_EQ(copy.keys().size(), src.keys().size());
  for (size_t i = 0; i < src.keys().size(); ++i) {
    const std::string_view key = src.keys()[i];
    EXPECT_EQ(copy.keys()[i], key);
    ASSERT_EQ(copy.TypeOf(key), src.TypeOf(key)) << key;
    switch (src.TypeOf(key)) {
      case GgufType::kString:
        if (key != "general.name") {
          EXPECT_EQ(copy.GetString(key), src.GetString(key)) << key;
        }
        break;
      case GgufType::kFloat32: EXPECT_EQ(copy.GetFloat(key), src.GetFloat(key)) << key; break;
      case GgufType::kArray: {
        const GgufArray a = src.GetArray(key), b = copy.GetArray(key);
        ASSERT_EQ(a.element_type(), b.element_type()) << key;
        ASSERT_EQ(a.size(), b.size()) << key;
        if (a.element_type() == GgufType::kString) {
          EXPECT_TRUE(std::equal(a.Strings().begin(), a.Strings().end(), b.Strings().begin())) << key;
        } else {
          EXPECT_TRUE(std::equal(a.RawBytes().begin(), a.RawBytes().end(), b.RawBytes().begin())) << key;
        }
        break;
      }
      default: EXPECT_EQ(copy.GetUInt64(key), src.GetUInt64(key)) << key;
    }
  }
  EXPECT_EQ(copy.GetString("general.name"), "fine-tuned");
  EXPECT_EQ(copy.GetInt64("tokenizer.ggml.padding_token_id"), 4294967295LL);  // uint32 kept as uint32
}

}  // namespace
}  // namespace posenc
