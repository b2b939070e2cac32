// libFuzzer harness: GGUF bytes -> GgufFile::Parse, every metadata getter, one row of every tensor dequantized,
// the model loader, then the tokenizer the file's vocabulary gives (SentencePiece or byte-level BPE), which must
// encode a fixed text to ids in range and decode them. Any exception other than posenc::Error, any crash or
// sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/kernels/dequant.h"
#include "posenc/formats/gguf.h"
#include "posenc/model/loader.h"
#include "posenc/tokenizer/gguf_vocab.h"

namespace {

void Touch(const posenc::GgufArray& a, int depth) {
  using posenc::GgufType;
  const size_t n = a.size() < 64 ? a.size() : 64;
  for (size_t i = 0; i < n; ++i) {
    switch (a.element_type()) {
      case GgufType::kString: (void)a.StringAt(i); break;
      case GgufType::kFloat32:
      case GgufType::kFloat64: (void)a.FloatAt(i); break;
      case GgufType::kBool: (void)a.BoolAt(i); break;
      case GgufType::kArray:
        if (depth < posenc::kGgufMaxArrayDepth) Touch(a.ArrayAt(i), depth + 1);
        break;
      default:
        try {
          (void)a.Int64At(i);
        } catch (const posenc::Error&) {
        }
    }
  }
  try {
    if (a.element_type() == GgufType::kString) (void)a.Strings();
    if (a.element_type() == GgufType::kFloat32) (void)a.ToFloat32();
    if (posenc::IsIntegerType(a.element_type())) (void)a.ToInt32();
  } catch (const posenc::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const posenc::GgufFile f =
        posenc::GgufFile::Parse(posenc::MappedFile::FromBytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf"));
    for (std::string_view key : f.keys()) {
      try {
        switch (f.TypeOf(key)) {
          case posenc::GgufType::kString: (void)f.GetString(key); break;
          case posenc::GgufType::kFloat32:
          case posenc::GgufType::kFloat64: (void)f.GetFloat(key); break;
          case posenc::GgufType::kBool: (void)f.GetBool(key); break;
          case posenc::GgufType::kArray: Touch(f.GetArray(key), 1); break;
          default: (void)f.GetInt64(key);
        }
      } catch (const posenc::Error&) {
      }
    }
    std::vector<float> row;
    for (const posenc::GgufTensorInfo& t : f.tensors()) {
      if (!posenc::CanDequantize(t.type) || t.ne[0] > (int64_t{1} << 16)) continue;
      row.resize(static_cast<size_t>(t.ne[0]));
      posenc::DequantizeRow(t.type, t.data, row.data(), t.ne[0]);
    }
    try {
      (void)posenc::LoadGgufModel(f);
    } catch (const posenc::Error&) {
    }
    const std::unique_ptr<posenc::Tokenizer> tok = posenc::LoadGgufTokenizer(f);
    const std::vector<int> ids = tok->Encode("ab abc\n\xff\xfe <s> a", true);
    for (int id : ids) {
      if (id < 0 || id >= tok->vocab_size()) std::abort();  // an accepted vocabulary gives ids in range
    }
    (void)tok->Decode(ids);
  } catch (const posenc::Error&) {
  }
  return 0;
}
