#include "posenc/eval/training_record.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/core/errors.h"
#include "posenc/eval/documents.h"
#include "posenc/io/input_file.h"
#include "posenc/model/methods.h"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Does the report's checkpoint list name this file (by file name: the run may have been in another directory)?
bool NamesCheckpoint(const json& report, const std::string& model_path) {
  const auto it = report.find("checkpoints");
  if (it == report.end() || !it->is_array()) return false;
  const std::string name = fs::path(model_path).filename().string();
  for (const json& c : *it) {
    if (c.is_string() && fs::path(c.get<std::string>()).filename().string() == name) return true;
  }
  return false;
}

}  // namespace

std::optional<TrainingRecord> FindTrainingRecord(const std::string& model_path) {
  const std::string path = model_path + ".json";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  json j;
  try {
    j = json::parse(ReadRegularFile(path, "training report"));
  } catch (const json::exception&) {
    return std::nullopt;  // not JSON: not a training report
  }
  if (!j.is_object() || !j.contains("rope") || !j["rope"].is_object() || !j.contains("split") ||
      !j["split"].is_object() || !NamesCheckpoint(j, model_path)) {
    return std::nullopt;
  }
  TrainingRecord r;
  r.report_path = path;
  try {
    const json& rope = j.at("rope");
    r.method = rope.at("method").get<std::string>();
    r.factor = rope.at("factor").get<double>();
    r.original_ctx = rope.at("original_max_position_embeddings").get<int64_t>();
    r.ctx = j.at("ctx").get<int64_t>();
    const json& split = j.at("split");
    r.split_rule = split.at("rule").get<std::string>();
    r.has_split = j.contains("text");
    if (r.has_split) {
      r.text_path = j.at("text").get<std::string>();
      const json& held = j.at("held_out_text");
      r.held_out_path = held.is_null() ? "" : held.get<std::string>();
      r.n_documents = split.at("n_documents").get<int64_t>();
      r.n_train_documents = split.at("n_train_documents").get<int64_t>();
    }
  } catch (const json::exception& e) {
    throw ConfigError(fmt::format("training report {}: a key posenc train writes is missing or of the wrong type: {}",
                                  path, e.what()));
  }
  ParseEvalMethod(r.method);  // ConfigError naming an unknown method
  if (!(std::isfinite(r.factor) && r.factor >= 1.0)) {
    throw ConfigError(fmt::format("training report {}: rope.factor must be finite and >= 1, got {}", path, r.factor));
  }
  if (r.original_ctx < 1 || r.ctx < 1) {
    throw ConfigError(fmt::format("training report {}: rope.original_max_position_embeddings ({}) and ctx ({}) must "
                                  "be >= 1", path, r.original_ctx, r.ctx));
  }
  if (r.has_split && (r.n_train_documents < 1 || r.n_train_documents > r.n_documents)) {
    throw ConfigError(fmt::format("training report {}: split.n_train_documents must be in [1, n_documents = {}], got "
                                  "{}", path, r.n_documents, r.n_train_documents));
  }
  return r;
}

std::vector<std::string> ApplyTrainingRecord(const TrainingRecord& r, ModelFormat format, ModelConfig& config) {
  std::vector<std::string> notes;
  const EvalMethod method = ParseEvalMethod(r.method);
  const bool any_rope = PrimaryRopeLayer(config) != nullptr;
  if (!any_rope && method != EvalMethod::kNone) {
    throw ConfigError(fmt::format("training report {}: rope.method {} but the model has no RoPE layer",
                                  r.report_path, r.method));
  }
  const bool same_l0 = config.train_ctx == r.original_ctx;
  config.train_ctx = r.original_ctx;
  if (method == EvalMethod::kNone && same_l0) return notes;
  if (format == ModelFormat::kLlama2c && method != EvalMethod::kNone && !IsPositionMap(method)) {
    MethodOptions o;
    o.factor = r.factor;
    for (LayerSpec& l : config.layers) {
      if (l.rope) l.rope_params = MethodRopeParams(method, r.ctx, config, l.rope_params, o);
    }
    notes.push_back(fmt::format("training report {}: the checkpoint was trained with {} s = {:g} from L0 {} at ctx "
                                "{}; native runs it (a llama2.c file cannot state it){}", r.report_path, r.method,
                                r.factor, r.original_ctx, r.ctx,
                                method == EvalMethod::kDynamic
                                    ? " as dynamic-hf (a rotated cache); --methods dynamic runs the pre-rotation form "
                                      "the run trained with"
                                    : ""));
  } else {
    notes.push_back(fmt::format("training report {}: trained with {} s = {:g} from L0 {} at ctx {}; L0 is {}",
                                r.report_path, r.method, r.factor, r.original_ctx, r.ctx, r.original_ctx));
  }
  ValidateModelConfig(config, r.report_path);
  return notes;
}

std::vector<std::string> ApplyTrainingRecordTo(const TrainingRecord& r, const std::string& model_path,
                                               Transformer& model) {
  ModelConfig recorded = model.config();
  std::vector<std::string> notes = ApplyTrainingRecord(r, DetectModelFormat(model_path), recorded);
  model.SetPositionalSpec(recorded);
  return notes;
}

std::string HeldOutDescription(const TrainingRecord& r) {
  return fmt::format("documents {}-{} of {} (held out by the training run, {})", r.n_train_documents + 1,
                     r.n_documents, r.n_documents, r.report_path);
}

std::string HeldOutDocuments(const TrainingRecord& r, const std::string& text) {
  if (!r.has_split) {
    throw ConfigError(fmt::format("training report {} does not state its texts and split (give --text)",
                                  r.report_path));
  }
  const std::vector<std::string_view> docs = SplitDocuments(text);
  if (static_cast<int64_t>(docs.size()) != r.n_documents) {
    throw ConfigError(fmt::format("{} has {} documents, the training report {} says {}: the text changed since the "
                                  "run, so its held-out part is unknown (give --text)", r.text_path, docs.size(),
                                  r.report_path, r.n_documents));
  }
  if (r.n_train_documents >= r.n_documents) {
    throw ConfigError(fmt::format("training report {}: all {} documents of {} trained, none is held out (give "
                                  "--text)", r.report_path, r.n_documents, r.text_path));
  }
  const size_t first = static_cast<size_t>(r.n_train_documents);
  if (first + 1 == docs.size()) return std::string(docs[first]);  // one document: SplitDocuments keeps it whole
  // From the document's first byte. A document that itself begins with "\n" needs the separator line's "\n"
  // before it too (SplitDocuments removes one leading "\n" of every piece).
  size_t from = static_cast<size_t>(docs[first].data() - text.data());
  std::string out = text.substr(from);
  std::vector<std::string_view> again = SplitDocuments(out);
  if ((again.size() != docs.size() - first || again.front() != docs[first]) && from > 0) {
    from -= 1;
    out = text.substr(from);
    again = SplitDocuments(out);
  }
  if (again.size() != docs.size() - first || !std::equal(again.begin(), again.end(), docs.begin() + first)) {
    throw ConfigError(fmt::format("{}: the held-out documents from {} on could not be cut from the text",
                                  r.text_path, first + 1));
  }
  return out;
}

}  // namespace posenc
