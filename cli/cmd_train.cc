// posenc train: train a new model from a shape config (dims and position_encoding in a JSON file).
#include <memory>
#include <string>

#include "commands.h"
#include "posenc/io/json_read.h"
#include "posenc/train/config_json.h"
#include "train_flags.h"

namespace posenc::cli {

void RegisterTrainCommand(CLI::App& app, CommandMode mode) {
  struct Flags {
    TrainRunOptions o;
    std::string config;
    bool quiet = false;
  };
  auto f = std::make_shared<Flags>();
  f->o.lr = 1e-3;
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a new model from --config model.json (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, "
      "max_seq_len, position_encoding: rope | sinusoidal | learned | none, qk_norm) on --text at context --ctx");
  cmd->add_option("--config", f->config, "model shape JSON")->required();
  AddTrainRunFlags(cmd, f->o, &f->quiet);
  cmd->callback([f, mode] {
    TrainRunOptions o = f->o;
    o.config_path = f->config;
    if (mode == CommandMode::kRun) o.config = TrainShapeFromJson(LoadJsonFile(f->config, "--config"));
    RunTrainCommand(o, f->quiet, mode);
  });
}

}  // namespace posenc::cli
