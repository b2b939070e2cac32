// Library messages name options as the fields a caller sets ("`ctx` must be >= 1"), never as command-line flags:
// the library is used from C++, C and Python too. The command line translates the backticked names through its
// table (cli/option_flags.cc), so every name a library message uses must be a row there.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace posenc {
namespace {

namespace fs = std::filesystem;

// String literals of every source line of src/posenc that is not a comment line.
std::vector<std::pair<std::string, std::string>> LibraryLiterals() {
  static const std::regex kLiteral(R"xx("((?:[^"\\]|\\.)*)")xx");
  static const std::regex kCommentLine(R"(^\s*//)");
  std::vector<std::pair<std::string, std::string>> out;  // (file:line, literal)
  const fs::path root = fs::path(POSENC_SOURCE_DIR) / "src" / "posenc";
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
    std::ifstream in(e.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (std::regex_search(line, kCommentLine)) continue;
      const std::string where = fs::relative(e.path(), root).string() + ":" + std::to_string(n);
      for (std::sregex_iterator it(line.begin(), line.end(), kLiteral), end; it != end; ++it) {
        out.emplace_back(where, (*it)[1].str());
      }
    }
  }
  return out;
}

std::set<std::string> FlagTableFields() {
  std::ifstream in(fs::path(POSENC_SOURCE_DIR) / "cli" / "option_flags.cc");
  const std::string text(std::istreambuf_iterator<char>(in), {});
  static const std::regex kRow(R"re(\{"([a-z_]+)", "(--[a-z][a-z-]*)[^"]*"\})re");
  std::set<std::string> fields;
  for (std::sregex_iterator it(text.begin(), text.end(), kRow), end; it != end; ++it) fields.insert((*it)[1].str());
  return fields;
}

TEST(LibraryMessagesTest, NameNoCommandLineFlag) {
  static const std::regex kFlag(R"((^|[^A-Za-z0-9_-])--[a-z][a-z-]+)");
  const auto literals = LibraryLiterals();
  ASSERT_GT(literals.size(), 1000u);
  for (const auto& [where, text] : literals) {
    EXPECT_FALSE(std::regex_search(text, kFlag)) << where << ": \"" << text << "\"";
  }
}

TEST(LibraryMessagesTest, EveryBacktickedOptionHasAFlag) {
  const std::set<std::string> fields = FlagTableFields();
  ASSERT_GE(fields.size(), 40u) << "the rows of cli/option_flags.cc were not found";
  static const std::regex kName("`([A-Za-z_][A-Za-z0-9_]*)`");
  int named = 0;
  for (const auto& [where, text] : LibraryLiterals()) {
    for (std::sregex_iterator it(text.begin(), text.end(), kName), end; it != end; ++it) {
      ++named;
      EXPECT_TRUE(fields.count((*it)[1].str())) << where << ": `" << (*it)[1].str()
                                                << "` has no row in cli/option_flags.cc";
    }
  }
  EXPECT_GT(named, 50);
}

}  // namespace
}  // namespace posenc
