// TrainRunReport -> the text `posenc train` and `posenc finetune` print.
#pragma once

#include <string>

#include "posenc/train/run.h"

namespace posenc {

/// The report for a terminal: model and split, the RoPE method and run shape, first and last training loss,
/// then the held-out perplexity table in markdown (rows: steps; columns: eval lengths L; "error" where an
/// evaluation failed, with its message below), then the checkpoint, state and JSON report paths.
std::string FormatTrainRunReport(const TrainRunReport& report);

}  // namespace posenc
