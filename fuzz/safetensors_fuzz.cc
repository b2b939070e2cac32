// libFuzzer harness: safetensors bytes -> SafetensorsFile::Parse, then one row of every tensor dequantized.
// Any exception other than posenc::Error, any crash or sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/kernels/dequant.h"
#include "posenc/formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const posenc::SafetensorsFile f = posenc::SafetensorsFile::Parse(
        posenc::MappedFile::FromBytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors"));
    std::vector<float> row;
    for (const posenc::SafetensorsTensor& t : f.tensors()) {
      const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
      if (t.n_elements == 0 || cols > (int64_t{1} << 16)) continue;
      row.resize(static_cast<size_t>(cols));
      posenc::DequantizeRow(t.type, t.data, row.data(), cols);
    }
    (void)f.metadata().size();
  } catch (const posenc::Error&) {
  }
  return 0;
}
