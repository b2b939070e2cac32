// posenc demo finetune: the rendered table holds each run's held-out numbers in (method, step) rows. The runs
// themselves are RunTraining's (tests/train/run_test.cc); here a hand-built report is rendered.
#include "posenc/demo/finetune_demo.h"

#include <gtest/gtest.h>

#include <string>

#include "posenc/core/errors.h"

namespace posenc::demo {
namespace {

TEST(FinetuneDemo, RenderPrintsEachRunsHeldOutNumbersByMethodAndStep) {
  FinetuneDemo demo;
  demo.model = "stories260K.bin";
  demo.ctx = 1024;
  demo.steps = 25;
  for (const char* m : {"linear", "yarn"}) {
    TrainRunReport r;
    r.method = m;
    r.original_ctx = 512;
    r.split_rule = "documents 1-4 of 5 train (the first 80%), 5-5 are held out";
    const double base = std::string(m) == "linear" ? 30.0 : 4.0;
    r.held_out = {{0, 512, base, 4096, ""}, {0, 1024, base + 1, 4096, ""}, {25, 512, base / 2, 4096, ""},
                  {25, 1024, base / 2 + 1, 4096, ""}};
    demo.runs.push_back(r);
  }
  const std::string s = RenderFinetuneDemo(demo);
  EXPECT_NE(s.find("== finetune:"), std::string::npos) << s;
  EXPECT_NE(s.find("stories260K.bin (trained at 512), fine-tuned at L = 1024 (factor 2) for 25 steps"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("| method | step | L=512 | L=1024 |"), std::string::npos) << s;
  EXPECT_NE(s.find("| linear | 0 | 30.000 | 31.000 |"), std::string::npos) << s;
  EXPECT_NE(s.find("| linear | 25 | 15.000 | 16.000 |"), std::string::npos) << s;
  EXPECT_NE(s.find("| yarn | 25 | 2.000 | 3.000 |"), std::string::npos) << s;
  EXPECT_NE(s.find("docs/training.md"), std::string::npos) << s;
  EXPECT_THROW(RunFinetuneDemo("m", "t", "x", 0), ConfigError);
}

}  // namespace
}  // namespace posenc::demo
