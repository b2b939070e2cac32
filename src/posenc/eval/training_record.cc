#include "posenc/eval/training_record.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string_view>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/core/errors.h"
#include "posenc/dist/fingerprint.h"
#include "posenc/eval/documents.h"
#include "posenc/io/input_file.h"
#include "posenc/model/methods.h"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kMaxCount = int64_t{1} << 31;

// The methods a training run records (the method of posenc train / finetune): the others have no meaning there.
bool RecordableMethod(RopeMethod m) {
  return m == RopeMethod::kNone || m == RopeMethod::kLinear || m == RopeMethod::kNtk || m == RopeMethod::kYarn ||
         m == RopeMethod::kDynamic || m == RopeMethod::kDynamicHf;
}

// An integer of the report in [low, 2^31], or a ConfigError naming the report, the key and the value as written.
int64_t Count(const json& parent, const char* key, const std::string& name, const std::string& report,
              int64_t low) {
  const json& v = parent.at(key);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMaxCount)) ||
      v.get<int64_t>() < low || v.get<int64_t>() > kMaxCount) {
    throw ConfigError(fmt::format("training report {}: {} must be an integer in [{}, 2^31], got {}", report, name,
                                  low, v.dump()));
  }
  return v.get<int64_t>();
}

// The candidates for the report of `model_path`, in order.
std::vector<std::string> ReportCandidates(const std::string& model_path) {
  std::vector<std::string> paths;
  auto add = [&](const fs::path& model) {
    paths.push_back(model.string() + ".json");
    // <stem>.step<N><ext>: a checkpoint after an eval_at step; the run's report is <stem><ext>.json.
    const std::string name = model.filename().string(), ext = model.extension().string();
    const std::string stem = name.substr(0, name.size() - ext.size());
    const size_t dot = stem.rfind(".step");
    if (dot != std::string::npos && dot + 5 < stem.size() &&
        stem.find_first_not_of("0123456789", dot + 5) == std::string::npos) {
      paths.push_back((model.parent_path() / (stem.substr(0, dot) + ext + ".json")).string());
    }
  };
  add(fs::path(model_path));
  std::error_code ec;
  if (fs::is_symlink(model_path, ec)) {
    const fs::path target = fs::canonical(model_path, ec);
    if (!ec) add(target);
  }
  return paths;
}

// Does the report's checkpoint list name this file (by file name, of the path or of the file it links to: the
// run may have been in another directory)?
bool NamesCheckpoint(const json& report, const std::string& model_path) {
  const auto it = report.find("checkpoints");
  if (it == report.end() || !it->is_array()) return false;
  std::vector<std::string> names = {fs::path(model_path).filename().string()};
  std::error_code ec;
  const fs::path target = fs::canonical(model_path, ec);
  if (!ec) names.push_back(target.filename().string());
  for (const json& c : *it) {
    if (!c.is_string()) continue;
    const std::string name = fs::path(c.get<std::string>()).filename().string();
    if (std::find(names.begin(), names.end(), name) != names.end()) return true;
  }
  return false;
}

TrainingRecord ParseRecord(const json& j, const std::string& path) {
  TrainingRecord r;
  r.report_path = path;
  try {
    const json& rope = j.at("rope");
    r.method = rope.at("method").get<std::string>();
    r.factor = rope.at("factor").get<double>();
    r.original_ctx = Count(rope, "original_max_position_embeddings", "rope.original_max_position_embeddings", path, 1);
    r.ctx = Count(j, "ctx", "ctx", path, 1);
    const json& split = j.at("split");
    r.split_rule = split.at("rule").get<std::string>();
    r.has_split = j.contains("text");
    if (r.has_split) {
      r.text_path = j.at("text").get<std::string>();
      const json& held = j.at("held_out_text");
      r.held_out_path = held.is_null() ? "" : held.get<std::string>();
      r.n_documents = Count(split, "n_documents", "split.n_documents", path, 1);
      r.n_train_documents = Count(split, "n_train_documents", "split.n_train_documents", path, 1);
      if (split.contains("text_fingerprint")) r.text_fingerprint = split.at("text_fingerprint").get<std::string>();
    }
  } catch (const json::exception& e) {
    throw ConfigError(fmt::format("training report {}: a key posenc train writes is missing or of the wrong type: {}",
                                  path, e.what()));
  }
  RopeMethod method = RopeMethod::kNone;
  try {
    method = ParseRopeMethod(r.method);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("training report {}: rope.method: {}", path, e.what()));
  }
  if (!RecordableMethod(method)) {
    throw ConfigError(fmt::format("training report {}: rope.method '{}' is not a method a training run records "
                                  "(none, linear, ntk, yarn, dynamic, dynamic-hf)", path, r.method));
  }
  if (!(std::isfinite(r.factor) && r.factor >= 1.0 && r.factor <= 1e6)) {
    throw ConfigError(fmt::format("training report {}: rope.factor must be finite and in [1, 1e6], got {}", path,
                                  r.factor));
  }
  if (r.has_split && r.n_train_documents > r.n_documents) {
    throw ConfigError(fmt::format("training report {}: split.n_train_documents must be in [1, n_documents = {}], got "
                                  "{}", path, r.n_documents, r.n_train_documents));
  }
  return r;
}

}  // namespace

TrainingRecordLookup FindTrainingRecord(const std::string& model_path) {
  TrainingRecordLookup out;
  for (const std::string& path : ReportCandidates(model_path)) {
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    if (!fs::is_regular_file(path, ec)) {
      out.note = fmt::format("{} is not a regular file: not read as the checkpoint's training report", path);
      return out;
    }
    json j;
    try {
      j = json::parse(ReadRegularFile(path, "training report"));
    } catch (const json::exception& e) {
      out.note = fmt::format("{} is not JSON ({}): not used as the checkpoint's training report", path, e.what());
      return out;
    }
    if (!j.is_object() || !j.contains("rope") || !j["rope"].is_object() || !j.contains("split") ||
        !j["split"].is_object()) {
      out.note = fmt::format("{} is not a posenc training report (no rope and split objects): not used", path);
      return out;
    }
    if (!NamesCheckpoint(j, model_path)) {
      out.note = fmt::format("{} is the training report of {}, not of {}: not used", path,
                             j.contains("checkpoints") ? j["checkpoints"].dump() : std::string("no checkpoint"),
                             fs::path(model_path).filename().string());
      return out;
    }
    out.record = ParseRecord(j, path);
    return out;
  }
  return out;
}

std::vector<std::string> ApplyTrainingRecord(const TrainingRecord& r, ModelFormat format, ModelConfig& config) {
  std::vector<std::string> notes;
  const RopeMethod method = ParseRopeMethod(r.method);
  const bool any_rope = PrimaryRopeLayer(config) != nullptr;
  if (!any_rope && method != RopeMethod::kNone) {
    throw ConfigError(fmt::format("training report {}: rope.method {} but the model has no RoPE layer",
                                  r.report_path, r.method));
  }
  // A file that states its own scaling (the GGUF writer states linear and yarn with their factor) must agree
  // with the record; otherwise the record is not this file's, and nothing of it is applied.
  if (format != ModelFormat::kLlama2c && any_rope) {
    const RopeParams& p = PrimaryRopeLayer(config)->rope_params;
    const bool stated = p.rope_type == RopeType::kLinear || p.rope_type == RopeType::kYarn;
    const bool agrees =
        stated ? (RopeTypeName(p.rope_type) == r.method && p.factor &&
                  std::fabs(*p.factor - r.factor) <= 1e-6 * r.factor)
               : !(r.method == "linear" || r.method == "yarn");
    if (!agrees) {
      notes.push_back(fmt::format("training report {} says {} s = {:g}, the file states {}{}: the file's RoPE and L0 "
                                  "run, the report is not applied", r.report_path, r.method, r.factor,
                                  RopeTypeName(p.rope_type),
                                  p.factor ? fmt::format(" s = {:g}", *p.factor) : std::string()));
      return notes;
    }
  }
  const bool same_l0 = config.train_ctx == r.original_ctx;
  config.train_ctx = r.original_ctx;
  if (method == RopeMethod::kNone && same_l0) return notes;
  if (format == ModelFormat::kLlama2c && method != RopeMethod::kNone && !IsPositionMap(method)) {
    MethodOptions o;
    o.factor = r.factor;
    for (LayerSpec& l : config.layers) {
      if (l.rope) l.rope_params = MethodRopeParams(method, r.ctx, config, l.rope_params, o);
    }
    notes.push_back(fmt::format("training report {}: the checkpoint was trained with {} s = {:g} from L0 {} at ctx "
                                "{}; native runs it (a llama2.c file cannot state it){}", r.report_path, r.method,
                                r.factor, r.original_ctx, r.ctx,
                                method == RopeMethod::kDynamic
                                    ? " as dynamic-hf (a rotated cache); the method dynamic runs the pre-rotation "
                                      "form the run trained with"
                                    : ""));
  } else {
    notes.push_back(fmt::format("training report {}: trained with {} s = {:g} from L0 {} at ctx {}; L0 is {}",
                                r.report_path, r.method, r.factor, r.original_ctx, r.ctx, r.original_ctx));
  }
  try {
    ValidateModelConfig(config, r.report_path);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("training report {}: rope.method {} with rope.factor {} gives a RoPE the model "
                                  "refuses: {}", r.report_path, r.method, r.factor, e.what()));
  }
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

std::string RecordTextPart(const TrainingRecord& r, const std::string& text_path, bool held_out_documents) {
  if (held_out_documents) return HeldOutDescription(r);
  std::error_code ec;
  if (r.has_split && !r.held_out_path.empty() && fs::equivalent(text_path, r.held_out_path, ec)) {
    return fmt::format("the held-out text of the training run ({})", r.report_path);
  }
  return "";
}

std::string HeldOutDocuments(const TrainingRecord& r, const std::string& text) {
  if (!r.has_split) {
    throw ConfigError(fmt::format("training report {} does not state its texts and split (give `text_path`)",
                                  r.report_path));
  }
  if (!r.text_fingerprint.empty() && FingerprintHex(text) != r.text_fingerprint) {
    throw ConfigError(fmt::format("{} is not the text the training run read (fingerprint {}, the training report {} "
                                  "says {}): it changed since the run, so its held-out part is unknown (give "
                                  "`text_path`)",
                                  r.text_path, FingerprintHex(text), r.report_path, r.text_fingerprint));
  }
  const std::vector<std::string_view> docs = SplitDocuments(text);
  if (static_cast<int64_t>(docs.size()) != r.n_documents) {
    throw ConfigError(fmt::format("{} has {} documents, the training report {} says {}: the text changed since the "
                                  "run, so its held-out part is unknown (give `text_path`)", r.text_path, docs.size(),
                                  r.report_path, r.n_documents));
  }
  if (r.n_train_documents >= r.n_documents) {
    throw ConfigError(fmt::format("training report {}: all {} documents of {} trained, none is held out (give "
                                  "`text_path`)", r.report_path, r.n_documents, r.text_path));
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
