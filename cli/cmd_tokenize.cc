// posenc tokenize: the token ids (and pieces) of a text under a model's tokenizer.
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "option_flags.h"
#include "posenc/tokenizer/tokenize.h"

namespace posenc::cli {
namespace {

struct TokenizeFlags {
  TokenizeOptions options;
  std::string add_bos = "auto";
  bool json = false;
};

}  // namespace

void RegisterTokenizeCommand(CLI::App& app, CommandMode mode) {
  auto flags = std::make_shared<TokenizeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "Print the token ids of a text under a model's tokenizer (SentencePiece, byte-level BPE, "
                  "llama2.c): one line of space-separated ids per text, or one JSON object per text");
  cmd->add_option("--model", flags->options.model_path,
                  "GGUF file, Hugging Face directory, or a tokenizer file alone (tokenizer.model, tokenizer.json, "
                  "vocab-only GGUF, llama2.c tokenizer .bin); a llama2.c checkpoint needs --tokenizer")
      ->required();
  cmd->add_option("--tokenizer", flags->options.tokenizer_path,
                  "Tokenizer file to use instead of the model's own (a llama2.c .bin takes its vocabulary size "
                  "from a llama2.c --model)");
  cmd->add_option("--text-file", flags->options.text_paths,
                  "Text to tokenize (default: standard input, also \"-\"); repeat for several texts, each "
                  "encoded alone and printed on its own line");
  cmd->add_option("--add-bos", flags->add_bos, "auto (as the vocabulary says), yes or no")
      ->check(CLI::IsMember({"auto", "yes", "no"}))
      ->capture_default_str();
  AddParseSpecialFlag(cmd, &flags->options.parse_special, "llama-tokenize without --parse-special");
  cmd->add_flag("--json", flags->json, "Print {\"ids\": [...], \"pieces\": [...]} per text instead");
  cmd->callback([flags, mode] {
    TokenizeOptions o = flags->options;
    o.add_bos = ParseAddBos(flags->add_bos);
    if (mode == CommandMode::kParseOnly) return;
    o.on_note = [](const std::string& note) { fmt::print(stderr, "note: {}\n", WithFlags(note)); };
    for (const TokenizeResult& r : Tokenize(o)) {
      if (flags->json) {
        const nlohmann::json j = {{"ids", r.ids}, {"pieces", r.pieces}};
        // Pieces are bytes: any that are not valid UTF-8 (llama2.c vocabularies) are shown with U+FFFD.
        fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      } else {
        fmt::print("{}\n", fmt::join(r.ids, " "));
      }
    }
  });
}

}  // namespace posenc::cli
