// Fine-tuning a Qwen3 Hugging Face folder (per-head q/k RMSNorm before RoPE, head_dim 32 with hidden 64 != 4 x
// 32): a few steps train with finite losses, and the GGUF checkpoint (architecture qwen3, half-split q/k rows as
// llama.cpp's NEOX mode reads them) read back by the model loader gives, through the eval forward, the loss the
// trained weights give in the training forward. Families the training layers do not implement are refused with
// an error naming the architecture and the missing part.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "formats/formats_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/eval/perplexity.h"
#include "posenc/model/loader.h"
#include "posenc/model/methods.h"
#include "posenc/model/transformer.h"
#include "posenc/train/checkpoint.h"
#include "posenc/train/run.h"
#include "posenc/train/train_model.h"
#include "eval_nll.h"

namespace posenc {
namespace {

namespace fs = std::filesystem;

TrainRunOptions Options(const std::string& model, const fs::path& dir) {
  TrainRunOptions o;
  o.model_path = model;
  o.text_path = std::string(POSENC_DATA_DIR) + "/text/tinystories_sample_cs336.txt";
  o.method = "none";
  o.ctx = 16;
  o.steps = 3;
  o.batch = 2;
  o.lr = 1e-3;
  o.warmup = 1;
  o.eval_tokens = 32;
  o.out_path = (dir / "ft.gguf").string();
  return o;
}

TEST(Qwen3Finetune, TrainsAndTheCheckpointReadsBackAsTrained) {
  const std::string folder = testing::SharedModel("arch/qwen3");
  POSENC_SKIP_IF_ABSENT(folder);
  const fs::path dir = fs::temp_directory_path() / ("posenc_qwen3_ft_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const TrainRunOptions o = Options(folder, dir);
  const TrainRunReport r = RunTraining(o, {}, nullptr);
  ASSERT_EQ(r.losses.size(), 3u);
  for (double l : r.losses) EXPECT_TRUE(std::isfinite(l) && l > 0) << l;
  ASSERT_EQ(r.held_out.size(), 1u);
  EXPECT_TRUE(std::isfinite(r.held_out[0].ppl)) << r.held_out[0].ppl;

  // The trained weights, as the run holds them (its state), in the training forward.
  const ModelFile base = LoadModelFile(folder);
  const TrainShape shape = TrainConfigFromModelFile(base, o.ctx);
  EXPECT_TRUE(shape.qk_norm);
  TrainModel<float> trained(ToModelConfig(shape, base.config.train_ctx));
  ReadTrainState(r.state_path, trained, TrainModelKey(shape));
  const ModelConfig& c = trained.config();
  const int64_t L = o.ctx;
  std::vector<int32_t> in(static_cast<size_t>(L)), tg(static_cast<size_t>(L));
  for (int64_t t = 0; t < L; ++t) {
    in[static_cast<size_t>(t)] = static_cast<int32_t>((t * 131 + 7) % c.vocab_size);
    tg[static_cast<size_t>(t)] = static_cast<int32_t>((t * 131 + 138) % c.vocab_size);
  }
  const MethodRope train_rope = BuildMethodRope(RopeMethod::kNone, L, c);
  const size_t u = static_cast<size_t>(train_rope.UniformTable());
  const AttentionRope attention_rope{View(train_rope.tables[u]), RopeLayout::kInterleaved,
                                     train_rope.pre_rotations[u].get(),
                                     static_cast<double>(train_rope.multipliers[u])};
  Activations<float> acts;
  const double train_loss = trained.Forward(TokenBatch{in, tg, 1, L}, attention_rope, acts);
  ASSERT_TRUE(std::isfinite(train_loss));

  // The checkpoint through the loader and the eval forward.
  const ModelFile file = LoadModelFile(o.out_path);
  EXPECT_EQ(file.config.architecture, "qwen3");
  EXPECT_EQ(file.config.qk_norm, QkNorm::kPerHead);
  EXPECT_EQ(file.config.rope_layout, RopeLayout::kHalfSplit);
  EXPECT_EQ(file.config.head_dim, 32);
  const Transformer model(file, WeightStorage::kFloat32);
  std::vector<int64_t> positions(static_cast<size_t>(L));
  for (int64_t t = 0; t < L; ++t) positions[static_cast<size_t>(t)] = t;
  std::vector<float> logits;
  const double nll = testing::EvalMeanNll(model, in, tg, positions, logits);
  // One float32 model in two summation orders (the training layers' products vs the eval's, the pair order
  // changed): a few float32 ulp in the logits, ~1e-6 relative in the mean NLL.
  EXPECT_NEAR(nll, train_loss, 1e-5 * train_loss) << nll << " vs " << train_loss;
  fs::remove_all(dir);
}

TEST(Qwen3Finetune, OtherFamiliesAreRefusedNamingTheArchitectureAndThePart) {
  const std::pair<const char*, const char*> cases[] = {
      {"arch/olmo2", "olmo2 model has other norm placements"},
      {"arch/gemma2", "gemma2 model has"},
      {"arch/gpt2", "gpt2 model has absolute positions"},
  };
  for (const auto& [name, want] : cases) {
    SCOPED_TRACE(name);
    const std::string folder = testing::SharedModel(name);
    if (!testing::Exists(folder)) GTEST_SKIP() << "large fixture absent: " << folder;
    try {
      TrainConfigFromModelFile(LoadModelFile(folder), 16);
      ADD_FAILURE() << "no error";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace posenc
