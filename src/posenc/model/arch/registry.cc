// The architectures posenc reads: one file each under model/arch/, one line each here.
#include <fmt/format.h>

#include "posenc/model/arch/arch.h"

namespace posenc {

extern const Architecture kLlamaArchitecture;
extern const Architecture kMistralArchitecture;
extern const Architecture kQwen2Architecture;
extern const Architecture kQwen3Architecture;
extern const Architecture kGemma2Architecture;
extern const Architecture kGemma3Architecture;
extern const Architecture kPhi3Architecture;
extern const Architecture kSmolLm3Architecture;
extern const Architecture kOlmo2Architecture;
extern const Architecture kGptNeoXArchitecture;
extern const Architecture kGpt2Architecture;

const std::vector<const Architecture*>& Architectures() {
  static const std::vector<const Architecture*> kAll = {
      &kLlamaArchitecture,  &kMistralArchitecture, &kQwen2Architecture,  &kQwen3Architecture,
      &kGemma2Architecture, &kGemma3Architecture,  &kPhi3Architecture,   &kSmolLm3Architecture,
      &kOlmo2Architecture,  &kGptNeoXArchitecture, &kGpt2Architecture};
  return kAll;
}

const Architecture* FindGgufArchitecture(std::string_view name) {
  for (const Architecture* a : Architectures()) {
    for (std::string_view n : a->gguf_names) {
      if (n == name) return a;
    }
  }
  return nullptr;
}

const Architecture* FindHfArchitecture(std::string_view hf_class, std::string_view model_type) {
  for (const Architecture* a : Architectures()) {
    for (std::string_view n : a->hf_classes) {
      if (!hf_class.empty() && n == hf_class) return a;
    }
  }
  if (!hf_class.empty()) return nullptr;
  for (const Architecture* a : Architectures()) {
    for (std::string_view n : a->hf_model_types) {
      if (n == model_type) return a;
    }
  }
  return nullptr;
}

std::optional<std::string> OutOfScopeFamily(std::string_view name) {
  struct Family {
    std::string_view needle;
    const char* what;
  };
  static const Family kFamilies[] = {
      {"moe", "a mixture-of-experts model"},      {"Moe", "a mixture-of-experts model"},
      {"mixtral", "a mixture-of-experts model"},  {"Mixtral", "a mixture-of-experts model"},
      {"deepseek", "a mixture-of-experts model"}, {"Deepseek", "a mixture-of-experts model"},
      {"dbrx", "a mixture-of-experts model"},     {"gpt-oss", "a mixture-of-experts model"},
      {"GptOss", "a mixture-of-experts model"},   {"llama4", "a mixture-of-experts model"},
      {"Llama4", "a mixture-of-experts model"},   {"mamba", "a state-space model"},
      {"Mamba", "a state-space model"},           {"rwkv", "a recurrent (RWKV) model"},
      {"Rwkv", "a recurrent (RWKV) model"},       {"jamba", "a hybrid state-space model"},
      {"Jamba", "a hybrid state-space model"},    {"ConditionalGeneration", "a model with a vision or audio tower"},
      {"Vision", "a model with a vision tower"},  {"clip", "a vision tower"},
      {"llava", "a model with a vision tower"},   {"Llava", "a model with a vision tower"}};
  for (const Family& f : kFamilies) {
    if (name.find(f.needle) != std::string_view::npos) return std::string(f.what);
  }
  return std::nullopt;
}

}  // namespace posenc
