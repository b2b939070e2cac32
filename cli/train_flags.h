// Flags shared by `posenc finetune` and `posenc train`, bound to TrainRunOptions, and the run itself: Ctrl-C
// stops after the current step (the library saves a checkpoint there), progress goes to stderr as one line
// when stderr is a terminal.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "commands.h"
#include "posenc/train/run.h"

namespace posenc::cli {

/// The flags both commands take, bound to `o` (which must outlive the app).
void AddTrainRunFlags(CLI::App* cmd, TrainRunOptions& o, bool* quiet);

/// Fills defaults (bundled tokenizer and text), runs RunTraining with SIGINT or SIGTERM stopping it after the
/// current step (checkpoint and state saved), prints the report; a run so stopped then throws ExitStatus 130
/// (SIGINT) or 143 (SIGTERM). kParseOnly: returns after the checks that need no file.
void RunTrainCommand(TrainRunOptions o, bool quiet, CommandMode mode);

}  // namespace posenc::cli
