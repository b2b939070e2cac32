// A run's results written as they come: each finished row printed as a table line and the JSON / CSV files
// rewritten (atomically, together) with every row so far, so an interrupted or killed run keeps what it finished.
#pragma once

#include <cstdio>
#include <string>

#include "posenc/eval/evaluate.h"

namespace posenc {

class EvalStreamWriter {
 public:
  /// `json_path` / `csv_path`: empty for none (checked writable by the caller before the run). `out`: where the
  /// table goes (stdout). `log`: if set, one line per finished row ("row 3/12: ctx 1024 yarn, ppl 3.32, 4.1 s"),
  /// for a stderr that is not a terminal (a terminal gets the progress bar instead).
  EvalStreamWriter(std::string json_path, std::string csv_path, std::FILE* out, std::FILE* log = nullptr);

  /// After row `row` of `report` finished: the table header before the first row, then FormatMarkdownRow (flushed),
  /// then the files rewritten with rows[0..row] (JSON "complete": false). Errors: as WriteFilesAtomically.
  void OnRow(const EvalReport& report, size_t row);

  /// After the run: the header if no row came, the footer (FormatMarkdownFooter), the files with every row and
  /// "complete": true. Errors: as WriteFilesAtomically.
  void Finish(const EvalReport& report);

  /// After an interrupted run: the files as OnRow left them; returns the number of rows they hold.
  size_t rows_written() const { return rows_written_; }

 private:
  void WriteFiles(const EvalReport& report, bool complete);

  std::string json_path_, csv_path_;
  std::FILE* out_;
  std::FILE* log_;
  bool header_printed_ = false;
  size_t rows_written_ = 0;
};

}  // namespace posenc
