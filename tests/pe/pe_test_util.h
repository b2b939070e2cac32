// Helpers shared by the tests/pe tests: bug-case lookup and exception-message checks.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

namespace posenc::pe_test {

/// The case of this kind from tests/data/bug_cases.json ({"cases": [{"kind": ..., "inputs", "expected"}]}).
inline nlohmann::json BugCase(const std::string& kind) {
  std::ifstream f(std::string(POSENC_TEST_DATA_DIR) + "/bug_cases.json");
  if (!f) ADD_FAILURE() << "cannot open " << POSENC_TEST_DATA_DIR << "/bug_cases.json";
  const nlohmann::json doc = nlohmann::json::parse(f);
  for (const auto& c : doc.at("cases")) {
    if (c.at("kind") == kind) return c;
  }
  ADD_FAILURE() << "bug case of kind " << kind << " not found";
  return nlohmann::json::object();
}

/// Asserts that fn throws exactly E (or a subclass) and that what() contains every fragment.
template <typename E>
void ExpectThrowsWith(const std::function<void()>& fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected an exception, none was thrown";
  } catch (const E& e) {
    const std::string what = e.what();
    for (const std::string& f : fragments) {
      EXPECT_NE(what.find(f), std::string::npos) << "message '" << what << "' lacks '" << f << "'";
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type; message: " << e.what();
  }
}

}  // namespace posenc::pe_test
