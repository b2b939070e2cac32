// posenc finetune: continue training a model at a longer context with a RoPE extension method.
#include <memory>
#include <string>

#include "commands.h"
#include "train_flags.h"

namespace posenc::cli {

void RegisterFinetuneCommand(CLI::App& app, CommandMode mode) {
  struct Flags {
    TrainRunOptions o;
    bool quiet = false;
  };
  auto f = std::make_shared<Flags>();
  f->o.lr = 1e-4;
  CLI::App* cmd = app.add_subcommand(
      "finetune",
      "Fine-tune a model (llama2.c .bin, GGUF or Hugging Face folder of the Llama family; default "
      "data/stories260K.bin) at context "
      "--ctx with a RoPE extension method, printing loss, tokens/s and ETA; writes a checkpoint posenc eval reads");
  cmd->add_option("--model", f->o.model_path,
                  "llama2.c .bin, .gguf file or Hugging Face checkpoint folder (config.json + *.safetensors) "
                  "(default: data/stories260K.bin)");
  cmd->add_option("--method", f->o.method, "none, linear, ntk, yarn, dynamic, dynamic-hf")->required();
  cmd->add_option("--factor", f->o.factor, "scaling factor s >= 1 (default: max(1, ctx / L0))");
  AddTrainRunFlags(cmd, f->o, &f->quiet);
  cmd->callback([f, mode] {
    RunTrainCommand(f->o, f->quiet, mode);
  });
}

}  // namespace posenc::cli
