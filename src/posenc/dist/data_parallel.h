// Data-parallel evaluation: independent work items (e.g. one eval window of one (method, ctx) run) dealt to the
// ranks, computed where they land, and their per-position results gathered on rank 0 in item order, so every
// sum taken afterwards is the one-process sum bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "posenc/dist/communicator.h"

namespace posenc {

/// Owner rank of each item: items in order of decreasing cost (ties: lower index first) each go to the rank with
/// the least cost so far (ties: lower rank) — the longest-processing-time rule (Graham 1969), within 4/3 of the
/// best possible makespan. Deterministic: depends only on the costs and n_ranks.
///
/// Shapes:  costs [n_items] (any unit, e.g. ctx^2 + c ctx for a window); returns owner [n_items] in [0, n_ranks).
/// Errors:  ConfigError if n_ranks < 1 or a cost is negative or not finite (names the item and value).
std::vector<int> AssignItems(std::span<const double> costs, int n_ranks);

/// Computes this rank's items (AssignItems(costs, comm.size()), in increasing item order) with compute(item) and
/// gathers every item's result on rank 0. Collective: every rank calls it with the same costs.
///
/// Returns: on rank 0, results [n_items] with results[i] = compute(i) exactly as the owner computed it (the
///          doubles travel as bytes); on the other ranks, an empty vector.
/// Bit-identity: if compute(i) gives the same bits on every rank (the same code and inputs, no dependence on
///          which rank or thread runs it), rank 0's results equal a one-process loop's, and so does any sum over
///          them taken in a fixed order (e.g. SummarizeNll over the windows in order).
/// Errors:  whatever compute throws (the rank's own item; with MPI the job then ends, see dist/mpi); DistError
///          from the communicator; DistError on rank 0 if a gathered message is malformed.
std::vector<std::vector<double>> RunDataParallel(Communicator& comm, std::span<const double> costs,
                                                 const std::function<std::vector<double>(int64_t item)>& compute);

/// RunDataParallel with the rank's items computed in one call (so they can run in parallel on the rank's
/// threads): compute(items) gets this rank's items in increasing order and returns one result per item, in
/// that order. Collective; returns, bit-identity and errors as RunDataParallel, plus ShapeError if compute
/// returns another number of results than it got items.
std::vector<std::vector<double>> RunDataParallelBatch(
    Communicator& comm, std::span<const double> costs,
    const std::function<std::vector<std::vector<double>>(std::span<const int64_t> items)>& compute);

}  // namespace posenc
