// The one parallel loop of the eval's forward passes (perplexity windows, passkey prompts): items on OpenMP
// threads, each thread with its own forward state, the first error rethrown as it was thrown.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "posenc/model/block.h"

namespace posenc {

/// Runs score(i, state, logits) for items i in [0, n_items) on n_threads OpenMP threads, each thread with its
/// own ForwardState and a logits buffer of logit_floats floats (0: none; work without a forward pass leaves
/// both unused); items in any order. Threads: with n_threads > 1 and several items, one item per thread at a time
/// (the work inside single-threaded); with one item, or n_threads <= 1, the items in order on the calling thread,
/// the work inside on up to n_threads threads (n_threads = 1: one thread in all). After the first exception the items not yet started are skipped and that
/// exception is rethrown (its own type). on_item(done, n_items), if set, after every finished one (serialised).
/// Errors: whatever score throws.
void ForEachWindow(int64_t n_items, int n_threads, int64_t logit_floats,
                   const std::function<void(int64_t, int64_t)>& on_item,
                   const std::function<void(int64_t, ForwardState&, std::vector<float>&)>& score);

}  // namespace posenc
