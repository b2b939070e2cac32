// The RoPE-method parameters `posenc eval` and `posenc passkey` take as flags, bound to MethodOptions, and the
// training report that gives `native` its meaning on a posenc checkpoint.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "posenc/eval/training_record.h"
#include "posenc/model/methods.h"

namespace posenc::cli {

/// The flags' values as parsed.
struct MethodFlags {
  std::string config;
  std::optional<double> factor;
  std::optional<double> low_freq_factor, high_freq_factor;
  std::vector<double> short_factor, long_factor;
  std::optional<int64_t> group, window, sinks, n_global, chunk_size, local_size;
  std::optional<double> leak;
  YarnOptions yarn;
};

/// Adds --factor, --config, --low-freq-factor, --high-freq-factor, --short-factor, --long-factor, --beta-fast,
/// --beta-slow, --mscale, --mscale-all-dim, --attention-factor, --no-truncate, --group, --window, --leak, --sinks,
/// --global, --chunk-size and --local-size to `cmd`, bound to *f (which must outlive the app). `length` names the
/// context length in the help ("ctx", "length").
void AddMethodFlags(CLI::App* cmd, MethodFlags* f, const std::string& length);

/// The library's MethodOptions from the flags: --config's rope_scaling (llama3 or longrope), the llama3 pair,
/// the longrope lists, the position-map parameters.
/// Errors: ConfigError if --config names another rope_type, or only one of the llama3 pair is given; as
///         LoadHfRopeConfig.
MethodOptions BuildMethodOptions(const MethodFlags& f);

/// The checkpoint's training report, which gives `native` its meaning on a posenc checkpoint
/// (FindTrainingRecord), unless --no-training-report (`ignore`). A file beside the checkpoint that is not its
/// report is named on stderr as a note when `speak`.
/// Errors: as FindTrainingRecord.
std::optional<TrainingRecord> FindRunTrainingRecord(const std::string& model_path, bool ignore, bool speak);

/// Refuses a method's parameter flag when no method of the run reads it (it would be silently ignored), e.g.
/// "--chunk-size is a parameter of dca, which --methods does not list". `methods`: every method the run uses
/// (the rows and a KL base).
/// Errors: ConfigError naming the flag and the method(s) that read it.
void CheckMethodFlagsUsed(const MethodFlags& f, const std::vector<RopeMethod>& methods);

}  // namespace posenc::cli
