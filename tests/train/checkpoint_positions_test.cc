// Models that posenc train writes with absolute positions (a learned table, the sinusoidal table) or none are read
// back as such: the GGUF checkpoint through the model loader runs the same forward as the training model that
// wrote it (its loss over a window equals the eval forward's mean NLL), and not as a RoPE model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "formats/formats_test_util.h"
#include "posenc/eval/perplexity.h"
#include "posenc/model/loader.h"
#include "posenc/model/methods.h"
#include "posenc/model/transformer.h"
#include "posenc/train/checkpoint.h"
#include "posenc/train/train_model.h"
#include "eval_nll.h"
#include "tiny_model.h"

namespace posenc {
namespace {

TEST(CheckpointPositions, AbsoluteAndNoPositionsReadBackAsTrained) {
  for (PositionEncoding pe : {PositionEncoding::kLearned, PositionEncoding::kSinusoidal, PositionEncoding::kNone}) {
    SCOPED_TRACE(PositionEncodingName(pe));
    TrainShape c = testing::TinyTrainConfig(pe);
    TrainModel<float> train(c);
    train.InitParameters(7);
    testing::TempDir dir("ckpt_positions");
    const std::string path = dir / "model.gguf";
    WriteGgufCheckpoint(train, CheckpointRope{"none", 1.0, c.max_seq_len, c.max_seq_len, c.rope_theta}, nullptr,
                        path);

    const ModelFile file = LoadModelFile(path);
    const AbsolutePositions want = pe == PositionEncoding::kLearned      ? AbsolutePositions::kLearned
                                   : pe == PositionEncoding::kSinusoidal ? AbsolutePositions::kSinusoidal
                                                                         : AbsolutePositions::kNone;
    EXPECT_EQ(file.config.absolute_positions, want);
    for (const LayerSpec& l : file.config.layers) EXPECT_FALSE(l.rope);
    if (pe == PositionEncoding::kLearned) {
      EXPECT_EQ(file.config.n_positions, c.max_seq_len);
    }

    const int64_t L = c.max_seq_len;
    std::vector<int32_t> in(static_cast<size_t>(L)), tg(static_cast<size_t>(L));
    for (int64_t t = 0; t < L; ++t) {
      in[static_cast<size_t>(t)] = static_cast<int32_t>((t * 11 + 3) % c.vocab_size);
      tg[static_cast<size_t>(t)] = static_cast<int32_t>((t * 11 + 14) % c.vocab_size);
    }
    Activations<float> acts;
    const double train_loss = train.Forward(TokenBatch{in, tg, 1, L}, AttentionRope{}, acts);

    const Transformer model(file, WeightStorage::kFloat32);
    std::vector<int64_t> positions(static_cast<size_t>(L));
    for (int64_t t = 0; t < L; ++t) positions[static_cast<size_t>(t)] = t;
    std::vector<float> logits;
    const double nll = testing::EvalMeanNll(model, in, tg, positions, logits);
    // Both are the same float32 model; they differ in summation order only (the training layers' own products
    // vs sgemm): relative differences of a few float32 ulp in the logits, ~1e-6 in the mean NLL.
    EXPECT_NEAR(nll, train_loss, 1e-5 * train_loss) << nll << " vs " << train_loss;
    // The position information is used: the same tokens at other positions give another NLL (except without any).
    std::vector<int64_t> shifted(positions);
    for (int64_t& p : shifted) p = (p + 3) % L;
    testing::EvalMeanNll(model, in, tg, shifted, logits);
    const float first = logits[0];
    testing::EvalMeanNll(model, in, tg, positions, logits);
    if (pe == PositionEncoding::kNone) {
      EXPECT_EQ(first, logits[0]);
    } else {
      EXPECT_NE(first, logits[0]);
    }
  }
}

}  // namespace
}  // namespace posenc
