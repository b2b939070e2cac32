// The gnuplot runner (found or reported missing, quoting) and the three PNGs of posenc demo written through it.
#include "posenc/report/gnuplot.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "posenc/core/errors.h"
#include "posenc/demo/extension_demo.h"
#include "posenc/demo/rope_demo.h"
#include "posenc/demo/sinusoidal_demo.h"

namespace posenc {
namespace {

// A fresh empty directory under the system temp dir, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/posenc_demo_plot_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

bool IsPng(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  char sig[8] = {};
  in.read(sig, 8);
  const unsigned char expected[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  for (int i = 0; i < 8; ++i) {
    if (static_cast<unsigned char>(sig[i]) != expected[i]) return false;
  }
  return true;
}

TEST(Gnuplot, GnuplotQuoteDoublesSingleQuotes) {
  EXPECT_EQ(GnuplotQuote("a.png"), "'a.png'");
  EXPECT_EQ(GnuplotQuote("it's"), "'it''s'");
}

TEST(Gnuplot, MissingGnuplotIsAClearIoError) {
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  TempDir empty;
  setenv("PATH", empty.path.c_str(), 1);
  EXPECT_FALSE(GnuplotPath().has_value());
  try {
    WriteGnuplotPng(empty.path / "x.png", 100, 100, {}, "plot x\n");
    ADD_FAILURE() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("gnuplot was not found on PATH"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gnuplot-nox"), std::string::npos) << e.what();
  }
  setenv("PATH", saved.c_str(), 1);
  EXPECT_FALSE(std::filesystem::exists(empty.path / "x.png"));
}

TEST(Gnuplot, EnsurePlotDirCreatesAndRejectsFiles) {
  TempDir t;
  EnsurePlotDir(t.path / "a" / "b");
  EXPECT_TRUE(std::filesystem::is_directory(t.path / "a" / "b"));
  std::ofstream(t.path / "file") << "x";
  EXPECT_THROW(EnsurePlotDir(t.path / "file"), IoError);
}

TEST(Gnuplot, TheThreeDemoPlotsAreWrittenAsPng) {
  if (!GnuplotPath()) GTEST_SKIP() << GnuplotMissingMessage();
  TempDir t;
  const std::filesystem::path a = demo::PlotSinusoidalHeatmap(demo::RunSinusoidalDemo(), t.path);
  const std::filesystem::path b = demo::PlotRopeDecay(demo::RunRopeDemo(), t.path);
  const std::filesystem::path c = demo::PlotExtensionWavelengths(demo::RunExtensionDemo(), t.path);
  EXPECT_EQ(a, t.path / "sinusoidal_heatmap.png");
  EXPECT_EQ(b, t.path / "rope_decay.png");
  EXPECT_EQ(c, t.path / "extension_wavelengths.png");
  for (const auto& p : {a, b, c}) {
    EXPECT_TRUE(IsPng(p)) << p;
    EXPECT_GT(std::filesystem::file_size(p), 10000u) << p;  // a drawn 1000-pixel-wide plot, not an empty frame
  }
  // nothing but the PNGs is left behind
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(t.path)) files += entry.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 3);
}

TEST(Gnuplot, GnuplotErrorsAreReported) {
  if (!GnuplotPath()) GTEST_SKIP() << GnuplotMissingMessage();
  TempDir t;
  EXPECT_THROW(WriteGnuplotPng(t.path / "bad.png", 100, 100, {}, "plot $nosuchblock with lines\n"), IoError);
}

}  // namespace
}  // namespace posenc
