// The command line's names for the library's options. Library messages name an option as the field a caller
// sets, between backticks ("`eval_tokens` must be >= 1"); what the command line prints names its flag instead
// ("--eval-tokens must be >= 1").
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace posenc {

/// Field -> flag, for every option a library message names. In library messages backticks mark option names
/// only (a repository test checks that every backticked name in the library's string literals has a row here).
const std::map<std::string_view, std::string_view>& OptionFlags();

/// `message` with every backticked option name of OptionFlags replaced by its flag; other backticked words
/// (file keys, code) are kept as written.
std::string WithFlags(std::string_view message);

}  // namespace posenc
