#include "posenc/demo/demo.h"

#include "posenc/demo/compare_demo.h"
#include "posenc/demo/extension_demo.h"
#include "posenc/demo/finetune_demo.h"
#include "posenc/demo/learned_demo.h"
#include "posenc/demo/position_blind.h"
#include "posenc/demo/rope_demo.h"
#include "posenc/demo/sinusoidal_demo.h"
#include "posenc/model/loader.h"

namespace posenc::demo {

std::vector<std::string> DemoPlotFiles(DemoTopic topic) {
  switch (topic) {
    case DemoTopic::kSinusoidal: return {"sinusoidal_heatmap.png"};
    case DemoTopic::kRope: return {"rope_decay.png"};
    case DemoTopic::kExtension: return {"extension_wavelengths.png"};
    default: return {};
  }
}

DemoOutput RunDemo(DemoTopic topic, const DemoOptions& options) {
  DemoOutput out;
  switch (topic) {
    case DemoTopic::kPositionBlind:
      out.text = RenderPositionBlindDemo(RunPositionBlindDemo(options.model_path, options.tokenizer_path));
      break;
    case DemoTopic::kSinusoidal: {
      const SinusoidalDemo demo = RunSinusoidalDemo();
      out.text = RenderSinusoidalDemo(demo);
      if (options.plot_dir) out.plots.push_back(PlotSinusoidalHeatmap(demo, *options.plot_dir));
      break;
    }
    case DemoTopic::kLearned:
      out.text = RenderLearnedDemo(RunLearnedDemo());
      break;
    case DemoTopic::kRope: {
      const RopeDemo demo = RunRopeDemo();
      out.text = RenderRopeDemo(demo);
      if (options.plot_dir) out.plots.push_back(PlotRopeDecay(demo, *options.plot_dir));
      break;
    }
    case DemoTopic::kExtension: {
      const ExtensionDemo demo = RunExtensionDemo();
      out.text = RenderExtensionDemo(demo);
      if (options.plot_dir) out.plots.push_back(PlotExtensionWavelengths(demo, *options.plot_dir));
      break;
    }
    case DemoTopic::kCompare:
      out.text = RenderCompareDemo(RunCompareDemo(
          CompareDemoOptions(options.model_path, options.tokenizer_path, options.text_path, options.threads,
                             LoadModelFile(options.model_path).config.train_ctx)));
      break;
    case DemoTopic::kFinetune:
      out.text = RenderFinetuneDemo(RunFinetuneDemo(options.model_path, options.tokenizer_path, options.text_path,
                                                    LoadModelFile(options.model_path).config.train_ctx,
                                                    options.progress));
      break;
  }
  return out;
}

}  // namespace posenc::demo
