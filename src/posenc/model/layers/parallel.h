// Work splitting shared by the training layers (internal to posenc/model/layers and posenc/train): a range
// [0, n) cut into contiguous pieces, one per thread (as many as OpenMP would use), so that every output element
// is written by exactly one piece; work whose result depends on how it is cut (BLAS calls) goes in fixed-size blocks (ForEachBlock),
// and reductions over rows through fixed-size blocks summed in block order (ReduceRowBlocks), so results do not
// depend on the thread count or on scheduling.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <vector>

namespace posenc::layers {

/// Whether the calling thread is running a piece of RunPieces (nested calls then run on the caller).
bool InPieces();

/// Pieces [0, n) is cut into: min(threads, ceil(n / min_piece)), at least 1; threads = omp_get_max_threads() (so
/// OMP_NUM_THREADS and omp_set_num_threads decide), or 1 inside a piece or an active OpenMP parallel region.
inline int64_t NumPieces(int64_t n, int64_t min_piece) {
  const int64_t threads = InPieces() || omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t by_size = (n + std::max<int64_t>(min_piece, 1) - 1) / std::max<int64_t>(min_piece, 1);
  return std::max<int64_t>(1, std::min(threads, by_size));
}

/// Piece k of `pieces` over [0, n): [k n / pieces, (k + 1) n / pieces).
inline int64_t PieceBegin(int64_t n, int64_t pieces, int64_t k) { return k * n / pieces; }

/// Runs fn(k) for k in [0, pieces): piece 0 on the calling thread, the others on a process-wide pool of worker
/// threads that BLOCK while idle (a condition variable, after a short spin). OpenMP's default waiting spins for
/// ~0.3 ms after every region; on a machine shared with other processes a spinning thread takes CPU time from its
/// own process's working thread (the scheduler shares a process's time among its threads), which slowed a
/// training step of ~125 short regions down 2-3x in measurements here. One dispatch at a time (callers from several
/// threads are serialised); fn must not throw.
void RunPieces(int64_t pieces, const std::function<void(int64_t)>& fn);

/// Calls fn(k, begin, end) for each of the NumPieces(n, min_piece) pieces, piece k on worker k of RunPieces. If fn
/// throws, the other pieces still finish and the exception of the lowest piece is rethrown.
template <typename Fn>
void ForEachPiece(int64_t n, int64_t min_piece, Fn&& fn) {
  const int64_t pieces = NumPieces(n, min_piece);
  if (pieces == 1) {
    fn(int64_t{0}, int64_t{0}, n);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(pieces));
  RunPieces(pieces, [&](int64_t k) {
    try {
      fn(k, PieceBegin(n, pieces, k), PieceBegin(n, pieces, k + 1));
    } catch (...) {
      errors[static_cast<size_t>(k)] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

/// Calls fn(begin, end) for the fixed-size blocks [k block, min(n, (k + 1) block)) of [0, n), the blocks spread
/// over the OpenMP threads in contiguous runs. The blocks do not depend on the thread count, so a computation
/// whose result depends on how it is cut (a BLAS call's result depends on its row count) gives the same bits for
/// any number of threads.
template <typename Fn>
void ForEachBlock(int64_t n, int64_t block, Fn&& fn) {
  const int64_t blocks = (n + block - 1) / block;
  ForEachPiece(blocks, 1, [&](int64_t, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) fn(b * block, std::min(n, (b + 1) * block));
  });
}

/// Rows per block of ReduceRowBlocks: fixed, so that the summation order never depends on the thread count.
inline constexpr int64_t kReduceBlock = 256;

/// out[0, width) = sum over rows [0, n) of per-row contributions, in float64: fn(r0, r1, acc) adds rows
/// [r0, r1) into acc[width] (acc starts at 0). Rows are grouped in blocks of kReduceBlock, each block summed by
/// one thread in row order, then the blocks are added in block order, so the result does not depend on the
/// thread count. out is overwritten.
template <typename Fn>
void ReduceRowBlocks(int64_t n, int64_t width, Fn&& fn, double* out) {
  const int64_t blocks = (n + kReduceBlock - 1) / kReduceBlock;
  std::vector<double> partial(static_cast<size_t>(std::max<int64_t>(blocks, 1) * width), 0.0);
  ForEachPiece(blocks, 1, [&](int64_t, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      fn(b * kReduceBlock, std::min(n, (b + 1) * kReduceBlock), partial.data() + b * width);
    }
  });
  for (int64_t c = 0; c < width; ++c) out[c] = 0.0;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t c = 0; c < width; ++c) out[c] += partial[static_cast<size_t>(b * width + c)];
  }
}

}  // namespace posenc::layers
