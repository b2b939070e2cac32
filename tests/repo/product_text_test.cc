// The repository's own text: the product speaks of itself only (no process words, no bug ids, no paths into
// a folder outside the repository), and the README states what the code does (the position limit, the layout).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace posenc {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The pattern is assembled from pieces so that this file does not match it.
const std::regex& ProcessWords() {
  static const std::regex re(std::string("\\b(iss") + "ues?|sess" + "ions?) #?[0-9]+\\b|\\bB" + "R-[0-9]{2}\\b|\\.\\./sh" +
                             "ared/|\\bsh" + "ared/(reference|tools|data|models)/");
  return re;
}

// Text files of the product: sources, tests, benchmarks, scripts, docs, CMake. Data (JSON, texts, models) is not
// prose and may quote its sources verbatim.
bool IsProse(const fs::path& p) {
  static const std::vector<std::string> kExt = {".cc", ".h", ".md", ".sh", ".txt", ".py", ".cmake", ".dict", ".supp", ".in"};
  const std::string name = p.filename().string();
  if (name == "CMakeLists.txt" || name == "run") return true;
  for (const std::string& e : kExt) {
    if (p.extension() == e) return true;
  }
  return false;
}

TEST(ProductTextTest, NoProcessWordsBugIdsOrOutsidePaths) {
  const fs::path root(POSENC_SOURCE_DIR);
  std::vector<fs::path> files = {root / "README.md", root / "BENCHMARKS.md", root / "CMakeLists.txt",
                                 root / ".ci" / "run"};
  for (const char* dir : {"src", "cli", "tests", "bench", "docs", "scripts", "fuzz", "examples", "python"}) {
    if (!fs::is_directory(root / dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      const std::string rel = fs::relative(e.path(), root).string();
      if (rel.rfind("tests/data", 0) == 0 || rel.rfind("fuzz/corpus", 0) == 0 ||
          rel.rfind("fuzz/regressions", 0) == 0) {
        continue;
      }
      if (e.is_regular_file() && IsProse(e.path())) files.push_back(e.path());
    }
  }
  int checked = 0;
  for (const fs::path& f : files) {
    if (!fs::exists(f)) continue;
    ++checked;
    std::ifstream in(f);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      // Only a line holding a piece of the pattern can match it (the regex is slow on every line).
      const auto holds = [&](const std::string& piece) { return line.find(piece) != std::string::npos; };
      if (!holds(std::string("iss") + "ue") && !holds(std::string("sess") + "ion") && !holds(std::string("B") + "R-") &&
          !holds(std::string("sh") + "ared/")) {
        continue;
      }
      std::smatch m;
      EXPECT_FALSE(std::regex_search(line, m, ProcessWords()))
          << fs::relative(f, root).string() << ":" << n << ": '" << m.str() << "' in: " << line;
    }
  }
  EXPECT_GT(checked, 100);
}

// Positions are accepted up to |pos| <= 2^40 (rope/cos_sin.h: beyond it even the long double angle product is
// inexact); the README once said "any int64 position ids".
TEST(ProductTextTest, ReadmeStatesThePositionLimitAndWhy) {
  const std::string readme = Slurp(fs::path(POSENC_SOURCE_DIR) / "README.md");
  EXPECT_EQ(readme.find("any int64 position ids"), std::string::npos);
  EXPECT_NE(readme.find("|position| <= 2^40"), std::string::npos);
  EXPECT_NE(readme.find("64-bit"), std::string::npos);
}

// The layout page (docs/layout.md, linked from the README) names every folder of src/posenc/ and every top-level
// folder of the product.
TEST(ProductTextTest, LayoutPageMatchesTheTree) {
  const fs::path root(POSENC_SOURCE_DIR);
  EXPECT_NE(Slurp(root / "README.md").find("docs/layout.md"), std::string::npos);
  const std::string readme = Slurp(root / "docs" / "layout.md");
  const size_t layout = readme.find("## Layout");
  ASSERT_NE(layout, std::string::npos);
  const std::string section = readme.substr(layout, readme.find("\n## ", layout + 1) - layout);
  for (const auto& e : fs::directory_iterator(root / "src" / "posenc")) {
    if (!e.is_directory()) continue;
    std::string quoted = "`";
    quoted += e.path().filename().string();
    quoted += "/`";
    EXPECT_NE(section.find(quoted), std::string::npos) << "src/posenc/" << quoted << " is not in the layout section";
  }
  for (const char* dir : {"cli", "tests", "bench", "data", "examples", "fuzz", "scripts", "docs"}) {
    std::string quoted = "`";
    quoted += dir;
    quoted += "/";
    EXPECT_NE(section.find(quoted), std::string::npos) << dir;
  }
}

// Every script, page and image the README names exists: a newcomer's first commands and links work.
TEST(ProductTextTest, ReadmeNamesOnlyFilesThatExist) {
  const fs::path root(POSENC_SOURCE_DIR);
  const std::string readme = Slurp(root / "README.md");
  static const std::regex kPath(R"((scripts/[A-Za-z0-9_.-]+\.sh|docs/[A-Za-z0-9_/.-]+\.(md|png)|[A-Z]+\.md|\.ci/run))");
  int named = 0;
  for (std::sregex_iterator it(readme.begin(), readme.end(), kPath), end; it != end; ++it) {
    ++named;
    EXPECT_TRUE(fs::exists(root / it->str())) << it->str() << " is named in the README but does not exist";
  }
  EXPECT_GE(named, 10);
  for (const char* script : {"scripts/run.sh", "scripts/test.sh"}) {
    EXPECT_NE(readme.find(std::string("bash ") + script), std::string::npos) << script;
  }
}

}  // namespace
}  // namespace posenc
