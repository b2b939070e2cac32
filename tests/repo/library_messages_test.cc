// Library messages name options as the fields a caller sets ("`ctx` must be >= 1"), never as command-line flags:
// the library is used from C++, C and Python too. The command line translates the backticked names through its
// table (cli/option_flags.cc), so every name a library message uses must be a row there.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace posenc {
namespace {

namespace fs = std::filesystem;

// The string literals of one line (escapes kept as written); a line that is a comment has none.
void AppendLiterals(const std::string& line, std::vector<std::string>& out) {
  const size_t first = line.find_first_not_of(" \t");
  if (first != std::string::npos && line.compare(first, 2, "//") == 0) return;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\'' && i + 2 < line.size()) {  // a character literal: '"' or '\"'
      i += line[i + 1] == '\\' ? 3 : 2;
      continue;
    }
    if (line[i] == '/' && i + 1 < line.size() && line[i + 1] == '/') return;  // a trailing comment
    if (line[i] != '"') continue;
    std::string s;
    for (++i; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) s += line[i++];
      s += line[i];
    }
    out.push_back(std::move(s));
  }
}

// String literals of every source file of src/posenc, with the file and line they are on.
const std::vector<std::pair<std::string, std::string>>& LibraryLiterals() {
  static const std::vector<std::pair<std::string, std::string>> literals = [] {
    std::vector<std::pair<std::string, std::string>> out;  // (file:line, literal)
    const fs::path root = fs::path(POSENC_SOURCE_DIR) / "src" / "posenc";
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
      std::ifstream in(e.path());
      std::string line;
      std::vector<std::string> found;
      for (int n = 1; std::getline(in, line); ++n) {
        found.clear();
        AppendLiterals(line, found);
        for (std::string& s : found) {
          out.emplace_back(fs::relative(e.path(), root).string() + ":" + std::to_string(n), std::move(s));
        }
      }
    }
    return out;
  }();
  return literals;
}

// "--" followed by a lower-case letter, not inside a word: a command-line flag.
bool NamesAFlag(const std::string& s) {
  for (size_t i = s.find("--"); i != std::string::npos; i = s.find("--", i + 1)) {
    const bool starts =
        i == 0 || !(std::isalnum(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == '_' || s[i - 1] == '-');
    if (starts && i + 2 < s.size() && std::islower(static_cast<unsigned char>(s[i + 2]))) return true;
  }
  return false;
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
  const auto& literals = LibraryLiterals();
  ASSERT_GT(literals.size(), 1000u);
  for (const auto& [where, text] : literals) EXPECT_FALSE(NamesAFlag(text)) << where << ": \"" << text << "\"";
}

TEST(LibraryMessagesTest, EveryBacktickedOptionHasAFlag) {
  const std::set<std::string> fields = FlagTableFields();
  ASSERT_GE(fields.size(), 40u) << "the rows of cli/option_flags.cc were not found";
  int named = 0;
  for (const auto& [where, text] : LibraryLiterals()) {
    // Backticks pair up: `a` and `b`; what is between a pair is a name if it is one identifier (a quoted
    // command such as `posenc eval` is not).
    for (size_t open = text.find('`'); open != std::string::npos; open = text.find('`', open + 1)) {
      const size_t close = text.find('`', open + 1);
      if (close == std::string::npos) break;
      const std::string name = text.substr(open + 1, close - open - 1);
      open = close;
      static const char* kIdentifier = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
      if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) ||
          name.find_first_not_of(kIdentifier) != std::string::npos) {
        continue;
      }
      ++named;
      EXPECT_TRUE(fields.count(name)) << where << ": `" << name << "` has no row in cli/option_flags.cc";
    }
  }
  EXPECT_GT(named, 50);
}

}  // namespace
}  // namespace posenc
