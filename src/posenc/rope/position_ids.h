// Position ids for padded, packed and cached batches: where each token sits, per sequence.
#pragma once

#include <cstdint>
#include <vector>

namespace posenc {

/// Position ids from a left- or right-padded attention mask: the k-th real token of a row gets position k;
/// pad tokens get 1 (a harmless in-range value; their outputs are masked anyway).
///
/// Shapes:  attention_mask [batch, seq] row-major, entries 0 (pad) or 1 (real); returns [batch, seq].
/// Errors:  ShapeError if attention_mask.size() != batch * seq; ConfigError naming the index if an entry
///          is not 0 or 1.
/// Source:  transformers `prepare_inputs_for_generation`: position_ids = cumsum(mask) - 1, masked_fill(
///          mask == 0, 1) (the fix of huggingface/transformers#22161, pull request #22382).
std::vector<int64_t> PositionIdsFromAttentionMask(const std::vector<int64_t>& attention_mask, int64_t batch,
                                                  int64_t seq);

/// The position of the next decoded token of each row: the number of real tokens in it.
/// Shapes: attention_mask [batch, seq]; returns [batch]. Errors: as PositionIdsFromAttentionMask.
std::vector<int64_t> NextDecodePositions(const std::vector<int64_t>& attention_mask, int64_t batch, int64_t seq);

/// Position ids for documents packed into one row: each document restarts at 0.
/// Shapes: doc_lens [n_docs] (tokens, each >= 1); returns [sum(doc_lens)].
/// Errors: ConfigError naming the index if a length is < 1.
/// Source: the `cu_seqlens` convention of flash-attention varlen / OLMo-core packing (PR #591).
std::vector<int64_t> PositionIdsForPackedDocuments(const std::vector<int64_t>& doc_lens);

/// Position ids offset..offset+n-1, e.g. the new tokens of a KV-cached step (offset = cache length).
/// Errors: RangeError if offset < 0 or n < 0.
std::vector<int64_t> PositionRange(int64_t offset, int64_t n);

}  // namespace posenc
