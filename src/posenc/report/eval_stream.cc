#include "posenc/report/eval_stream.h"

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "posenc/io/output_file.h"
#include "posenc/report/eval_report.h"

namespace posenc {

EvalStreamWriter::EvalStreamWriter(std::string json_path, std::string csv_path, std::FILE* out, std::FILE* log)
    : json_path_(std::move(json_path)), csv_path_(std::move(csv_path)), out_(out), log_(log) {}

void EvalStreamWriter::WriteFiles(const EvalReport& report, bool complete) {
  std::vector<std::pair<std::string, std::string>> files;  // written together: all or none
  if (!json_path_.empty()) {
    nlohmann::json j = ToJson(report);
    j["complete"] = complete;
    // A path that is not valid UTF-8 is written with U+FFFD for its invalid bytes (JSON strings are UTF-8).
    files.emplace_back(json_path_, j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  if (!csv_path_.empty()) files.emplace_back(csv_path_, FormatCsv(report));
  WriteFilesAtomically(files);
  rows_written_ = report.rows.size();
}

void EvalStreamWriter::OnRow(const EvalReport& report, size_t row) {
  if (!header_printed_) {
    fmt::print(out_, "{}", FormatMarkdownHeader(report));
    header_printed_ = true;
  }
  fmt::print(out_, "{}", FormatMarkdownRow(report, row));
  std::fflush(out_);
  WriteFiles(report, false);
  if (log_ != nullptr) {
    const EvalRow& r = report.rows.at(row);
    fmt::print(log_, "row {}/{}: ctx {} {}, ppl {:.4f}, {:.2f} s\n", row + 1,
               report.ctx.size() * static_cast<size_t>(report.methods_per_ctx), r.ctx, RopeMethodName(r.method),
               r.result.ppl, r.seconds);
    std::fflush(log_);
  }
}

void EvalStreamWriter::Finish(const EvalReport& report) {
  if (!header_printed_) fmt::print(out_, "{}", FormatMarkdownHeader(report));
  header_printed_ = true;
  fmt::print(out_, "{}", FormatMarkdownFooter(report));
  std::fflush(out_);
  WriteFiles(report, true);
}

}  // namespace posenc
