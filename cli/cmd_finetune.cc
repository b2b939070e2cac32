// posenc finetune: continue training a model at a longer context with a RoPE extension method.
#include <memory>
#include <string>

#include "commands.h"
#include "train_flags.h"

namespace posenc::cli {

void RegisterFinetuneCommand(CLI::App& app, CommandMode mode) {
  struct Flags {
    TrainRunOptions o;
    double factor = 0;
    bool quiet = false;
  };
  auto f = std::make_shared<Flags>();
  f->o.lr = 1e-4;
  CLI::App* cmd = app.add_subcommand(
      "finetune",
      "Fine-tune a model (llama2.c .bin, GGUF or Hugging Face folder; default data/stories260K.bin) at context "
      "--ctx with a RoPE extension method, printing loss, tokens/s and ETA; writes a checkpoint posenc eval reads");
  cmd->add_option("--model", f->o.model_path, "model file (default: data/stories260K.bin)");
  cmd->add_option("--method", f->o.method, "none, linear, ntk, yarn, dynamic, dynamic-hf")->required();
  cmd->add_option("--factor", f->factor, "scaling factor s (default: max(1, ctx / L0))");
  AddTrainRunFlags(cmd, f->o, &f->quiet);
  cmd->callback([f, mode] {
    TrainRunOptions o = f->o;
    if (f->factor != 0) o.factor = f->factor;
    RunTrainCommand(o, f->quiet, mode);
  });
}

}  // namespace posenc::cli
