#include "posenc/eval/distributed.h"

#include <algorithm>
#include <numeric>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/dist/data_parallel.h"
#include "posenc/dist/fingerprint.h"
#include "posenc/eval/evaluate.h"
#include "posenc/eval/perplexity.h"
#include "posenc/eval/windows.h"

namespace posenc {
namespace {

void AddOptional(Fingerprint& f, const std::optional<double>& v) {
  f.Add(static_cast<int64_t>(v.has_value()));
  if (v) f.Add(std::as_bytes(std::span<const double>(&*v, 1)));
}

void AddDoubles(Fingerprint& f, const std::vector<double>& v) {
  f.Add(static_cast<int64_t>(v.size()));
  f.Add(std::as_bytes(std::span<const double>(v)));
}

void AddParams(Fingerprint& f, const std::optional<RopeParams>& p) {
  f.Add(static_cast<int64_t>(p.has_value()));
  if (!p) return;
  f.Add(static_cast<int64_t>(p->rope_type)).Add(p->head_dim).Add(p->rotary_dim).Add(p->max_position_embeddings);
  f.Add(std::as_bytes(std::span<const double>(&p->rope_theta, 1)));
  f.Add(p->original_max_position_embeddings.value_or(-1)).Add(static_cast<int64_t>(p->truncate));
  for (const auto* v : {&p->factor, &p->attention_factor, &p->beta_fast, &p->beta_slow, &p->mscale,
                        &p->mscale_all_dim, &p->low_freq_factor, &p->high_freq_factor}) {
    AddOptional(f, *v);
  }
  AddDoubles(f, p->short_factor);
  AddDoubles(f, p->long_factor);
}

// The file's bytes, or those of every regular file of a folder (sorted by name, each preceded by its name).
void AddPath(Fingerprint& f, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    f.Add(static_cast<int64_t>(FingerprintFile(path)));
    return;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  if (ec) throw IoError(fmt::format("cannot list the folder '{}': {}", path, ec.message()));
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    f.Add(std::string_view(file.filename().string()));
    f.Add(static_cast<int64_t>(FingerprintFile(file.string())));
  }
}

uint64_t PathFingerprint(const std::string& path) {
  Fingerprint f;
  AddPath(f, path);
  return f.value();
}

}  // namespace

std::vector<double> DataParallelNll(const Transformer& model, std::span<const int> tokens, int64_t n_pred,
                                    const MethodRope& rope, int threads, Communicator& comm,
                                    const std::function<void(int64_t, int64_t)>& on_window) {
  const int64_t L = rope.ctx;
  const int64_t ctxs[1] = {L};
  ValidateWindows(static_cast<int64_t>(tokens.size()), n_pred, ctxs);
  const int64_t n_windows = n_pred / L;
  const std::vector<double> costs(static_cast<size_t>(n_windows), 1.0);
  const std::vector<std::vector<double>> per_window =
      RunDataParallelBatch(comm, costs, [&](std::span<const int64_t> windows) {
        std::function<void(int64_t, int64_t)> progress;
        if (on_window) progress = [&](int64_t done, int64_t) { on_window(done, n_windows); };
        const std::vector<double> nll = NllOfWindows(model, tokens, windows, rope, threads, progress);
        std::vector<std::vector<double>> out(windows.size());
        for (size_t i = 0; i < windows.size(); ++i) {
          out[i].assign(nll.begin() + static_cast<std::ptrdiff_t>(i) * L,
                        nll.begin() + static_cast<std::ptrdiff_t>(i + 1) * L);
        }
        return out;
      });
  if (comm.rank() != 0) return {};
  std::vector<double> nll;
  nll.reserve(static_cast<size_t>(n_pred));
  for (const std::vector<double>& w : per_window) {
    if (static_cast<int64_t>(w.size()) != L) {
      throw DistError(fmt::format("rank 0: a window's result holds {} values, expected ctx = {}", w.size(), L));
    }
    nll.insert(nll.end(), w.begin(), w.end());
  }
  return nll;
}

std::vector<double> ContextParallelNll(const Transformer& model, std::span<const int> tokens, int64_t n_pred,
                                       const MethodRope& rope, ContextSplitKind split_kind, Communicator& comm,
                                       ContextParallelStats* stats,
                                       const std::function<void(int64_t, int64_t)>& on_window) {
  const int64_t L = rope.ctx;
  const int64_t ctxs[1] = {L};
  ValidateWindows(static_cast<int64_t>(tokens.size()), n_pred, ctxs);
  const ContextSplit split = MakeContextSplit(L, comm.size(), split_kind);
  const int64_t n_windows = n_pred / L;
  const int64_t vocab = model.config().vocab_size, dim = model.config().dim;
  const ForwardRope frope = rope.forward();
  std::vector<int64_t> positions(static_cast<size_t>(L));
  std::iota(positions.begin(), positions.end(), int64_t{0});  // every window restarts at position 0
  ForwardState state;
  RingScratch ring;
  const int64_t chunk = std::min<int64_t>(split.MaxCount(), 256);  // logits rows formed at once (as WindowedNll)
  std::vector<float> logits(static_cast<size_t>(chunk * vocab));
  std::vector<double> nll(comm.rank() == 0 ? static_cast<size_t>(n_pred) : 0);
  std::vector<double> mine;
  for (int64_t w = 0; w < n_windows; ++w) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::span<const int> in = tokens.subspan(static_cast<size_t>(w * L), static_cast<size_t>(L));
    int64_t p = -1;  // the position being scored, -1 while in the forward pass
    RingStats ring_stats;
    try {
      model.ForwardHiddenContextParallel(in, positions, split, frope, state, comm, ring, &ring_stats);
      const int64_t n_local = static_cast<int64_t>(state.positions.size());
      mine.resize(static_cast<size_t>(n_local));
      for (int64_t i0 = 0; i0 < n_local; i0 += chunk) {
        const int64_t rows = std::min(chunk, n_local - i0);
        model.Logits(state.xb.data() + i0 * dim, rows, state.positions[static_cast<size_t>(i0)], logits.data());
        for (int64_t i = i0; i < i0 + rows; ++i) {
          p = state.positions[static_cast<size_t>(i)];
          mine[static_cast<size_t>(i)] = TokenNll(logits.data() + (i - i0) * vocab, vocab,
                                                  tokens[static_cast<size_t>(w * L + p + 1)]);
        }
        p = -1;
      }
    } catch (const NumericError& e) {
      throw NumericError(fmt::format("window {} (tokens [{}, {})){}: {}", w, w * L, w * L + L,
                                     p >= 0 ? fmt::format(", prediction at position {}", p) : "", e.what()));
    }
    const std::vector<std::vector<std::byte>> all = comm.Gather(std::as_bytes(std::span<const double>(mine)), 0);
    if (comm.rank() == 0) {
      for (int r = 0; r < comm.size(); ++r) {
        const std::vector<std::byte>& bytes = all[static_cast<size_t>(r)];
        if (static_cast<int64_t>(bytes.size()) != split.Count(r) * static_cast<int64_t>(sizeof(double))) {
          throw DistError(fmt::format("rank 0: rank {} sent {} bytes of NLL for window {}, expected {} positions",
                                      r, bytes.size(), w, split.Count(r)));
        }
        size_t offset = 0;
        for (const PositionRange& range : split.ranges[static_cast<size_t>(r)]) {
          std::memcpy(nll.data() + w * L + range.begin, bytes.data() + offset,
                      static_cast<size_t>(range.size()) * sizeof(double));
          offset += static_cast<size_t>(range.size()) * sizeof(double);
        }
      }
    }
    if (stats != nullptr) {
      stats->windows += 1;
      stats->ring += ring_stats;
      stats->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (on_window) on_window(w + 1, n_windows);
  }
  return nll;
}

EvalInputsFingerprint FingerprintEvalInputs(const EvalOptions& o, int64_t train_ctx) {
  EvalInputsFingerprint out;
  Fingerprint f;
  f.Add(train_ctx).Add(static_cast<int64_t>(o.weights)).Add(static_cast<int64_t>(o.compute)).Add(o.n_pred);
  f.Add(static_cast<int64_t>(o.ctx.size()));
  for (const int64_t L : o.ctx) f.Add(L);
  f.Add(static_cast<int64_t>(o.methods.size()));
  for (const RopeMethod m : o.methods) f.Add(static_cast<int64_t>(m));
  AddOptional(f, o.method_options.factor);
  AddParams(f, o.method_options.llama3);
  AddParams(f, o.method_options.longrope);
  const PositionMapOptions& pm = o.method_options.position_map;
  for (const std::optional<int64_t>& v :
       {pm.group, pm.window, pm.sinks, pm.n_global, pm.chunk_size, pm.local_size}) {
    f.Add(static_cast<int64_t>(v.has_value())).Add(v.value_or(0));
  }
  AddOptional(f, pm.leak);
  f.Add(static_cast<int64_t>(o.reuse_identical_rows)).Add(static_cast<int64_t>(o.context_parallel));
  f.Add(static_cast<int64_t>(o.context_split));
  f.Add(static_cast<int64_t>(o.add_bos ? (*o.add_bos ? 1 : 0) : -1));
  f.Add(static_cast<int64_t>(o.parse_special ? 1 : 0));
  f.Add(static_cast<int64_t>(o.load.allow_unused_tensors));
  out.options = f.value();
  out.model = PathFingerprint(o.model_path);
  out.tokenizer = o.tokenizer_path.empty() ? 0 : PathFingerprint(o.tokenizer_path);
  out.text = PathFingerprint(o.text_path);
  return out;
}

}  // namespace posenc
