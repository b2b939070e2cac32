// The rope-type table: one row per RopeType, names that round-trip, and rows whose functions are the ones the
// public entry points (ComputeRopeFrequencies, PairRegimes, ValidateRopeParams) use.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/rope/frequencies.h"
#include "posenc/rope/params.h"
#include "posenc/rope/rope_types.h"

namespace posenc {
namespace {

constexpr RopeType kAllTypes[] = {RopeType::kDefault, RopeType::kLinear, RopeType::kNtk,     RopeType::kDynamic,
                                  RopeType::kYarn,    RopeType::kLlama3, RopeType::kLongrope};

// A valid RopeParams of `type`, with every field that type reads set to a non-trivial value.
RopeParams Example(RopeType type) {
  RopeParams p;
  p.rope_type = type;
  p.head_dim = 64;
  p.rope_theta = 10000.0;
  switch (type) {
    case RopeType::kDefault: break;
    case RopeType::kLinear:
    case RopeType::kNtk: p.factor = 4.0; break;
    case RopeType::kDynamic:
      p.factor = 2.0;
      p.max_position_embeddings = 2048;
      break;
    case RopeType::kYarn:
      p.factor = 4.0;
      p.original_max_position_embeddings = 4096;
      p.max_position_embeddings = 16384;
      break;
    case RopeType::kLlama3:
      p.rope_theta = 500000.0;
      p.factor = 8.0;
      p.original_max_position_embeddings = 8192;
      p.low_freq_factor = 1.0;
      p.high_freq_factor = 4.0;
      break;
    case RopeType::kLongrope:
      p.original_max_position_embeddings = 4096;
      p.max_position_embeddings = 131072;
      for (int i = 0; i < 32; ++i) {
        p.short_factor.push_back(1.0 + 0.01 * i);
        p.long_factor.push_back(1.0 + 0.5 * i);
      }
      break;
  }
  return p;
}

TEST(RopeTypeTable, EveryRopeTypeHasExactlyOneRowInEnumOrder) {
  const auto table = RopeTypeTable();
  ASSERT_EQ(table.size(), std::size(kAllTypes));
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(table[i]->type, kAllTypes[i]) << "row " << i << " (" << table[i]->name << ")";
  }
  for (RopeType type : kAllTypes) {
    int rows = 0;
    for (const RopeTypeRow* row : table) rows += row->type == type ? 1 : 0;
    EXPECT_EQ(rows, 1) << RopeTypeName(type);
    EXPECT_EQ(&RopeTypeRowOf(type), table[static_cast<size_t>(type)]);
  }
  EXPECT_THROW(RopeTypeRowOf(static_cast<RopeType>(99)), ConfigError);
  EXPECT_EQ(RopeTypeName(static_cast<RopeType>(99)), "unknown");
}

TEST(RopeTypeTable, NamesRoundTripThroughParseAndName) {
  std::set<std::string> names;
  for (const RopeTypeRow* row : RopeTypeTable()) {
    EXPECT_TRUE(names.insert(std::string(row->name)).second) << "duplicate name " << row->name;
    EXPECT_EQ(RopeTypeName(row->type), row->name);
    EXPECT_EQ(ParseRopeType(row->name), row->type);
  }
  EXPECT_EQ(names, (std::set<std::string>{"default", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope"}));
}

TEST(RopeTypeTable, EachRowComputesWhatComputeRopeFrequenciesReturns) {
  for (const RopeTypeRow* row : RopeTypeTable()) {
    const RopeParams p = Example(row->type);
    // seq_len: none (HF's init), inside the training length, and past it (dynamic grows, longrope switches).
    for (std::optional<int64_t> seq_len : {std::optional<int64_t>(), std::optional<int64_t>(100),
                                           std::optional<int64_t>(8192)}) {
      SCOPED_TRACE(std::string(row->name) + " seq_len " + (seq_len ? std::to_string(*seq_len) : "none"));
      const RopeFrequencies pub = ComputeRopeFrequencies(p, seq_len);
      const RopeFrequencies own = row->compute(p, seq_len);
      ASSERT_EQ(own.inv_freq.size(), 32u);
      EXPECT_EQ(own.inv_freq, pub.inv_freq);
      EXPECT_EQ(own.attention_factor, pub.attention_factor);
      EXPECT_EQ(own.softmax_scale_multiplier, pub.softmax_scale_multiplier);
    }
    EXPECT_EQ(row->regimes(p), PairRegimes(p)) << row->name;
    EXPECT_EQ(row->regimes(p).size(), 32u) << row->name;
  }
}

TEST(RopeTypeTable, TypesThatScaleChangeTheDefaultTable) {
  // Guards the examples above: a row whose compute fell back to the default table would pass them trivially.
  for (const RopeTypeRow* row : RopeTypeTable()) {
    if (row->type == RopeType::kDefault) continue;
    const RopeParams p = Example(row->type);
    RopeParams as_default;
    as_default.head_dim = p.head_dim;
    as_default.rope_theta = p.rope_theta;
    EXPECT_NE(row->compute(p, 8192).inv_freq, ComputeRopeFrequencies(as_default).inv_freq) << row->name;
  }
}

TEST(RopeTypeTable, EachRowValidatesItsOwnFields) {
  // Dropping or breaking a field the type requires is refused by ValidateRopeParams through the row's validate.
  struct Broken {
    RopeType type;
    void (*breaks)(RopeParams&);
  };
  const Broken cases[] = {
      {RopeType::kLinear, [](RopeParams& p) { p.factor.reset(); }},
      {RopeType::kNtk, [](RopeParams& p) { p.factor = 0.5; }},
      {RopeType::kDynamic, [](RopeParams& p) { p.max_position_embeddings = 0; }},
      {RopeType::kYarn, [](RopeParams& p) { p.original_max_position_embeddings.reset(); }},
      {RopeType::kLlama3, [](RopeParams& p) { p.high_freq_factor = 0.5; }},
      {RopeType::kLongrope, [](RopeParams& p) { p.long_factor.pop_back(); }},
  };
  for (const Broken& c : cases) {
    RopeParams p = Example(c.type);
    EXPECT_NO_THROW(ValidateRopeParams(p)) << RopeTypeName(c.type);
    c.breaks(p);
    EXPECT_THROW(ValidateRopeParams(p), ConfigError) << RopeTypeName(c.type);
  }
  EXPECT_NO_THROW(ValidateRopeParams(Example(RopeType::kDefault)));
}

}  // namespace
}  // namespace posenc
