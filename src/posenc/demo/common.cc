#include "posenc/demo/common.h"

#include <fmt/format.h>

#include <filesystem>

#include "posenc/core/errors.h"

namespace posenc::demo {

std::string ModelName(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename()) p = p.parent_path();
  return p.filename().empty() ? path : p.filename().string();
}

void CheckDemoTrainCtx(DemoTopic topic, int64_t train_ctx) {
  if (train_ctx < 1 || train_ctx > (int64_t{1} << 40)) {
    throw ConfigError(fmt::format("demo {}: the model's training length L0 must be in [1, 2^40], got {}",
                                  DemoTopicName(topic), train_ctx));
  }
}

std::string_view DemoTopicName(DemoTopic topic) {
  switch (topic) {
    case DemoTopic::kPositionBlind:
      return "position-blind";
    case DemoTopic::kSinusoidal:
      return "sinusoidal";
    case DemoTopic::kLearned:
      return "learned";
    case DemoTopic::kRope:
      return "rope";
    case DemoTopic::kExtension:
      return "extension";
    case DemoTopic::kCompare:
      return "compare";
    case DemoTopic::kFinetune:
      return "finetune";
  }
  return "unknown";
}

std::vector<DemoTopic> AllDemoTopics() {
  return {DemoTopic::kPositionBlind, DemoTopic::kSinusoidal, DemoTopic::kLearned,
          DemoTopic::kRope,          DemoTopic::kExtension,  DemoTopic::kCompare,
          DemoTopic::kFinetune};
}

DemoTopic ParseDemoTopic(std::string_view name) {
  std::string names;
  for (DemoTopic t : AllDemoTopics()) {
    if (DemoTopicName(t) == name) return t;
    names += names.empty() ? "" : ", ";
    names += DemoTopicName(t);
  }
  throw ConfigError(fmt::format("demo topic must be one of {}, got '{}'", names, name));
}

std::vector<RegimeRun> RegimeRuns(const std::vector<PairRegime>& regimes) {
  std::vector<RegimeRun> runs;
  for (size_t i = 0; i < regimes.size(); ++i) {
    const int64_t pair = static_cast<int64_t>(i);
    if (runs.empty() || runs.back().regime != regimes[i]) {
      runs.push_back({regimes[i], pair, pair});
    } else {
      runs.back().last = pair;
    }
  }
  return runs;
}

}  // namespace posenc::demo
