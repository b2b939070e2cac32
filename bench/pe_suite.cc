// Absolute-PE benchmark suite: see pe_suite.h.
#include "pe_suite.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "posenc/kernels/pe_kernels.h"
#include "posenc/pe/learned.h"
#include "posenc/pe/sinusoidal.h"
#include "rope_suite.h"  // StreamCopyGbps, StreamRmwGbps
#include "suite_util.h"

namespace posenc::bench {
namespace {

// Deterministic inputs in [-1, 1) without a random-number generator (the 4096 x 4096 buffers are 64 MiB each):
// a multiplicative hash of the index, 16 bits of it scaled.
void Fill(std::vector<float>& v, uint32_t seed) {
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t h = (static_cast<uint32_t>(i) ^ seed) * 2654435761u;
    v[i] = static_cast<float>(static_cast<int32_t>(h >> 16) - 32768) / 32768.0f;
  }
}

std::string FirstDifference(const char* what, const std::vector<float>& a, const std::vector<float>& ref) {
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::memcmp(&a[i], &ref[i], 4) != 0) {
      return fmt::format("{}[{}]: {} vs scalar {}", what, i, a[i], ref[i]);
    }
  }
  return "";
}

constexpr float kLearningRate = 1e-3f;

}  // namespace

const char* PeBenchKernelName(PeBenchKernel kernel) {
  switch (kernel) {
    case PeBenchKernel::kGather:
      return "learned_pe_gather";
    case PeBenchKernel::kGatherAdd:
      return "learned_pe_gather_add";
    case PeBenchKernel::kScatterAdd:
      return "learned_pe_scatter_add";
    case PeBenchKernel::kSgd:
      return "learned_pe_sgd";
    case PeBenchKernel::kSinusoidalAdd:
      return "sinusoidal_add";
  }
  return "?";
}

std::vector<PeCase> DefaultPeCases(const std::string& filter) {
  std::vector<PeCase> all;
  const std::pair<PeBenchKernel, const char*> kernels[] = {{PeBenchKernel::kGather, "gather"},
                                                           {PeBenchKernel::kGatherAdd, "gather_add"},
                                                           {PeBenchKernel::kScatterAdd, "scatter_add"},
                                                           {PeBenchKernel::kSgd, "sgd"},
                                                           {PeBenchKernel::kSinusoidalAdd, "sinusoidal_add"}};
  for (const auto& [kernel, name] : kernels) {
    for (int64_t d : {int64_t{768}, int64_t{4096}}) {
      all.push_back({fmt::format("{}_4096x{}", name, d), kernel, 4096, d, 4096, true});
    }
  }
  for (int64_t d : {int64_t{768}, int64_t{4096}}) {
    all.push_back({fmt::format("decode_gather_add_1x{}", d), PeBenchKernel::kGatherAdd, 1, d, 4096, false});
  }
  std::vector<PeCase> out;
  for (const PeCase& c : all) {
    if (MatchesFilter(c.name, filter)) out.push_back(c);
  }
  return out;
}

int64_t PeBytesMoved(const PeCase& c) {
  switch (c.kernel) {
    case PeBenchKernel::kGather:
      return 2 * c.n_tokens * c.d_model * 4;
    case PeBenchKernel::kGatherAdd:
    case PeBenchKernel::kScatterAdd:
      return 3 * c.n_tokens * c.d_model * 4;
    case PeBenchKernel::kSgd:
      return 3 * c.max_seq_len * c.d_model * 4;
    case PeBenchKernel::kSinusoidalAdd:
      return 2 * c.n_tokens * c.d_model * 4;
  }
  return 0;
}

struct PeWorkload::Buffers {
  LearnedPositionalEmbedding pe;      // wpe [max_seq_len, d_model]
  LearnedPositionalEmbedding frozen;  // sinusoidal cases: SinusoidalTable of positions 0 .. max_seq_len-1
  std::vector<float> x;               // x / out / dout [n_tokens, d_model]
  std::vector<float> dtable;          // [max_seq_len, d_model]
  std::vector<int64_t> positions;     // [n_tokens]
  SinusoidalParams sinusoidal;

  explicit Buffers(const PeCase& c)
      : pe(c.max_seq_len, c.d_model),
        frozen(c.kernel == PeBenchKernel::kSinusoidalAdd ? c.max_seq_len : 1, c.d_model),
        x(static_cast<size_t>(c.n_tokens * c.d_model)),
        dtable(static_cast<size_t>(c.max_seq_len * c.d_model)),
        positions(static_cast<size_t>(c.n_tokens)),
        sinusoidal{c.d_model, 10000.0, SinusoidalLayout::kInterleaved, SinusoidalDivisor::kHalf} {}
};

PeWorkload::PeWorkload(const PeCase& c) : case_(c), b_(std::make_unique<Buffers>(c)) {
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    b_->positions[static_cast<size_t>(t)] = c.n_tokens == 1 ? c.max_seq_len - 1 : t;
  }
  if (c.kernel == PeBenchKernel::kSinusoidalAdd) {
    std::vector<int64_t> all(static_cast<size_t>(c.max_seq_len));
    for (int64_t p = 0; p < c.max_seq_len; ++p) all[static_cast<size_t>(p)] = p;
    SinusoidalTable(b_->sinusoidal, all, b_->frozen.table());
  }
  std::vector<float> w(b_->pe.table().size());
  Fill(w, 1);
  std::copy(w.begin(), w.end(), b_->pe.table().begin());
  Fill(b_->x, 2);
  Fill(b_->dtable, 3);
}

PeWorkload::~PeWorkload() = default;

bool PeWorkload::Has(const std::string& which) const {
  const bool sinusoidal = case_.kernel == PeBenchKernel::kSinusoidalAdd;
  if (which == "simd" || which == "scalar") return true;
  if (which == "plain_cpp") return !sinusoidal;
  if (which == "table_gather_add") return sinusoidal;
  return false;
}

void PeWorkload::Run(const std::string& which) {
  Buffers& b = *b_;
  const int64_t n = case_.n_tokens, d = case_.d_model;
  if (which == "simd" || which == "scalar") {
    const kernels::PeKernelPath saved = kernels::GetPeKernelPath();
    kernels::SetPeKernelPath(which == "scalar" ? kernels::PeKernelPath::kScalar : kernels::PeKernelPath::kAuto);
    switch (case_.kernel) {
      case PeBenchKernel::kGather:
        LearnedPeForward(b.pe, b.positions, b.x);
        break;
      case PeBenchKernel::kGatherAdd:
        LearnedPeForwardAdd(b.pe, b.positions, b.x);
        break;
      case PeBenchKernel::kScatterAdd:
        LearnedPeBackward(b.pe, b.positions, b.x, b.dtable);
        break;
      case PeBenchKernel::kSgd:
        LearnedPeSgdStep(b.pe, b.dtable, kLearningRate);
        break;
      case PeBenchKernel::kSinusoidalAdd:
        AddSinusoidal(b.sinusoidal, b.positions, b.x);
        break;
    }
    kernels::SetPeKernelPath(saved);
    return;
  }
  if (which == "table_gather_add") {
    LearnedPeForwardAdd(b.frozen, b.positions, b.x);
    return;
  }
  if (which != "plain_cpp") throw std::invalid_argument("unknown PE bench variant " + which);
  // The first loop one writes (llm.c encoder_forward / encoder_backward style), no validation.
  float* x = b.x.data();
  float* w = b.pe.table().data();
  float* g = b.dtable.data();
  const int64_t* pos = b.positions.data();
  switch (case_.kernel) {
    case PeBenchKernel::kGather:
      for (int64_t t = 0; t < n; ++t) std::memcpy(x + t * d, w + pos[t] * d, static_cast<size_t>(d) * 4);
      break;
    case PeBenchKernel::kGatherAdd:
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t c = 0; c < d; ++c) x[t * d + c] += w[pos[t] * d + c];
      }
      break;
    case PeBenchKernel::kScatterAdd:
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t c = 0; c < d; ++c) g[pos[t] * d + c] += x[t * d + c];
      }
      break;
    case PeBenchKernel::kSgd: {
      const int64_t size = case_.max_seq_len * d;
      for (int64_t i = 0; i < size; ++i) w[i] -= kLearningRate * g[i];
      break;
    }
    case PeBenchKernel::kSinusoidalAdd:
      throw std::invalid_argument("plain_cpp does not apply to sinusoidal_add");
  }
}

std::string PeWorkload::Validate(const std::string& which) {
  Buffers& b = *b_;
  std::vector<float> w0(b.pe.table().begin(), b.pe.table().end());
  auto reset = [&] {
    std::copy(w0.begin(), w0.end(), b.pe.table().begin());
    Fill(b.x, 2);
    Fill(b.dtable, 3);
  };
  reset();
  Run("scalar");
  const std::vector<float> x_ref = b.x, dtable_ref = b.dtable;
  const std::vector<float> w_ref(b.pe.table().begin(), b.pe.table().end());
  reset();
  Run(which);
  const std::vector<float> w(b.pe.table().begin(), b.pe.table().end());
  std::string err = FirstDifference("x", b.x, x_ref);
  if (err.empty()) err = FirstDifference("dtable", b.dtable, dtable_ref);
  if (err.empty()) err = FirstDifference("table", w, w_ref);
  reset();
  return err;
}

namespace {

struct Variant {
  Variant(std::string n, std::function<void()> f) : name(std::move(n)), fn(std::move(f)) {}
  std::string name;
  std::function<void()> fn;
  int64_t batch = 1;             // hot cases: calls per timed batch
  std::vector<double> per_call;  // seconds
};

// Times every variant `reps` times, interleaved (rep r of each variant back to back), so load from other
// processes hits all variants alike. Cold cases flush the caches before each timed call; hot cases time batches
// sized to ~2 ms after a warm-up.
void TimeInterleaved(bool cold, int reps, std::vector<Variant>& variants) {
  for (Variant& v : variants) {
    v.fn();  // warm-up: page faults, OpenMP thread pool, code in cache
    if (cold) continue;
    for (v.batch = 1;; v.batch *= 2) {
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < v.batch; ++i) v.fn();
      if (Seconds(t0, Clock::now()) > 2e-3 || v.batch > (int64_t{1} << 24)) break;
    }
  }
  for (int r = 0; r < reps; ++r) {
    for (Variant& v : variants) {
      if (cold) FlushCaches();
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < v.batch; ++i) v.fn();
      v.per_call.push_back(Seconds(t0, Clock::now()) / static_cast<double>(v.batch));
    }
  }
}

}  // namespace

PeBenchReport RunPeBench(const PeBenchOptions& o) {
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  ValidateSuiteSettings(o.threads, o.stream_bytes);
  if (o.threads > 0) omp_set_num_threads(o.threads);
  PeBenchReport rep;
  rep.threads = omp_get_max_threads();
  rep.hwy_target = kernels::PeKernelTargetName();
  rep.cpu = fmt::format("{} ({} hardware threads), Highway target {}", CpuModel(), std::thread::hardware_concurrency(),
                        rep.hwy_target);
  rep.load_average_start = LoadAverage();
  if (o.stream_copy_gbps > 0 && o.stream_copy_gbps_1thread > 0 && o.stream_rmw_gbps > 0) {
    rep.stream_copy_gbps = o.stream_copy_gbps;
    rep.stream_copy_gbps_1thread = o.stream_copy_gbps_1thread;
    rep.stream_rmw_gbps = o.stream_rmw_gbps;
  } else {
    log(fmt::format("STREAM copy ({} MiB arrays, {} and 1 threads)...", o.stream_bytes >> 20, rep.threads));
    rep.stream_copy_gbps = StreamCopyGbps(rep.threads, o.stream_bytes, std::max(o.reps, 5));
    rep.stream_copy_gbps_1thread = StreamCopyGbps(1, o.stream_bytes, std::max(o.reps, 5));
    rep.stream_rmw_gbps = StreamRmwGbps(rep.threads, o.stream_bytes, std::max(o.reps, 5));
  }

  for (const PeCase& c : DefaultPeCases(o.filter)) {
    log("case " + c.name + "...");
    PeWorkload w(c);
    for (const char* which : {"simd", "plain_cpp", "table_gather_add"}) {
      if (!w.Has(which)) continue;
      const std::string err = w.Validate(which);
      if (!err.empty()) {
        throw std::runtime_error(fmt::format("{}: {} differs from the scalar path: {}", c.name, which, err));
      }
    }
    PeResult r;
    r.c = c;
    r.bytes = PeBytesMoved(c);
    std::vector<Variant> variants;
    variants.emplace_back("posenc", [&] { w.Run("simd"); });
    variants.emplace_back("posenc_1thread", [&] {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(1);
      w.Run("simd");
      omp_set_num_threads(saved);
    });
    for (const char* name : {"scalar", "plain_cpp", "table_gather_add"}) {
      if (w.Has(name)) variants.emplace_back(name, [&w, name] { w.Run(name); });
    }
    TimeInterleaved(c.cold, o.reps, variants);
    const double gb = static_cast<double>(r.bytes) * 1e-9;
    for (const Variant& v : variants) {
      const double best = *std::min_element(v.per_call.begin(), v.per_call.end());
      const double median = Median(v.per_call);
      if (v.name == "posenc") {
        r.ns_per_call = best * 1e9;
        r.ns_per_call_median = median * 1e9;
        r.gbps = gb / best;
        r.gbps_median = gb / median;
      } else if (v.name == "posenc_1thread") {
        r.gbps_1thread = gb / best;
      } else {
        r.baselines[v.name] = gb / best;
        r.baseline_ns[v.name] = best * 1e9;
      }
    }
    r.pct_of_stream = 100.0 * r.gbps / rep.stream_copy_gbps;
    r.pct_of_stream_rmw = 100.0 * r.gbps / rep.stream_rmw_gbps;
    rep.results.push_back(std::move(r));
  }
  rep.notes.push_back(
      "sinusoidal_add builds every row from double-precision std::sin/std::cos on each call (the accurate table, "
      "kept bit for bit); it is bound by libm, not memory. table_gather_add is the same result from a table "
      "precomputed once");
  rep.load_average_end = LoadAverage();
  return rep;
}

nlohmann::json ToJson(const PeBenchReport& rep) {
  nlohmann::json j;
  j["stream_copy_gbps"] = rep.stream_copy_gbps;
  j["stream_copy_gbps_1thread"] = rep.stream_copy_gbps_1thread;
  j["stream_rmw_gbps"] = rep.stream_rmw_gbps;
  j["threads"] = rep.threads;
  j["cpu"] = rep.cpu;
  j["hwy_target"] = rep.hwy_target;
  j["load_average"] = {rep.load_average_start, rep.load_average_end};
  j["results"] = nlohmann::json::array();
  for (const PeResult& r : rep.results) {
    nlohmann::json e;
    e["kernel"] = PeBenchKernelName(r.c.kernel);
    e["case"] = r.c.name;
    e["dtype"] = "float32";
    e["layout"] = r.c.kernel == PeBenchKernel::kSinusoidalAdd ? "interleaved" : "rows";
    e["shape"] = {r.c.n_tokens, 1, r.c.d_model};
    e["rotary_dim"] = nullptr;
    e["max_seq_len"] = r.c.max_seq_len;
    e["cold"] = r.c.cold;
    e["bytes"] = r.bytes;
    e["gbps"] = r.gbps;
    e["gbps_1thread"] = r.gbps_1thread;
    e["gbps_median"] = r.gbps_median;
    e["pct_of_stream"] = r.pct_of_stream;
    e["pct_of_stream_rmw"] = r.pct_of_stream_rmw;
    e["ns_per_call"] = r.ns_per_call;
    e["ns_per_call_median"] = r.ns_per_call_median;
    PutBaselines(e, r.gbps, r.baselines, r.baseline_ns);
    j["results"].push_back(e);
  }
  j["notes"] = rep.notes;
  return j;
}

std::string FormatPeReport(const PeBenchReport& rep) {
  std::string s;
  s += fmt::format("load average (1 min) at start / end: {:.2f} / {:.2f}\n", rep.load_average_start,
                   rep.load_average_end);
  s += fmt::format(
      "cpu: {}\nthreads: {}\nSTREAM copy: {:.1f} GB/s ({} thread(s)), {:.1f} GB/s (1 thread); in-place "
      "read-modify-write: {:.1f} GB/s\n\n",
      rep.cpu, rep.threads, rep.stream_copy_gbps, rep.threads, rep.stream_copy_gbps_1thread, rep.stream_rmw_gbps);
  s += fmt::format("{:<30} {:>8} {:>8} {:>8} {:>6} {:>12} {:>9} {:>9} {:>9}\n", "case", "GB/s", "GB/s 1t", "%STREAM",
                   "%RMW", "ns/call", "x scalar", "x plain", "x table");
  for (const PeResult& r : rep.results) {
    auto ratio = [&](const char* name) {
      const auto it = r.baselines.find(name);
      return it == r.baselines.end() ? std::string("-") : fmt::format("{:.2f}", r.gbps / it->second);
    };
    s += fmt::format("{:<30} {:>8.2f} {:>8.2f} {:>8.1f} {:>6.0f} {:>12.0f} {:>9} {:>9} {:>9}\n", r.c.name, r.gbps,
                     r.gbps_1thread, r.pct_of_stream, r.pct_of_stream_rmw, r.ns_per_call, ratio("scalar"),
                     ratio("plain_cpp"), ratio("table_gather_add"));
  }
  s += "\nbaselines (GB/s, best call): case: scalar / plain_cpp / table_gather_add\n";
  for (const PeResult& r : rep.results) {
    auto g = [&](const char* name) {
      const auto it = r.baselines.find(name);
      return it == r.baselines.end() ? std::string("-") : fmt::format("{:.2f}", it->second);
    };
    s += fmt::format("  {:<30} {:>8} / {:>8} / {:>8}\n", r.c.name, g("scalar"), g("plain_cpp"), g("table_gather_add"));
  }
  for (const std::string& n : rep.notes) s += "note: " + n + "\n";
  return s;
}

}  // namespace posenc::bench
