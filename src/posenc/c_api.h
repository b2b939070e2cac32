// posenc C API: RoPE from a Hugging Face config, for C callers and for bindings (Rust, Go, ...).
//
// Stable C ABI: C99 types, opaque handles, fixed-width integers for every enum-valued argument, a status code
// from every function that can fail and a per-thread message describing the last failure. No C++ exception
// crosses this boundary, and no function keeps a pointer the caller passed after it returns. It is a thin
// layer over the C++ API (posenc/rope/hf_config.h, posenc/rope/frequencies.h, cos_sin.h, apply.h): the same
// numbers, checks and messages.
// Linking: the posenc library is C++; link as C++, or add what `pkg-config --libs posenc` prints.
//
// Conventions shared by every function:
//   - Positions are 0-based token indices (int64). Angles are radians; inv_freq is radians/token.
//   - seq_len selects the table of the position-dependent rope types (dynamic NTK grows its base past
//     max_position_embeddings; longrope switches to its long factors past original_max_position_embeddings):
//     > 0 is that sequence length in tokens; POSENC_SEQ_LEN_INIT (0) is the table Hugging Face's init builds
//     (no sequence length); POSENC_SEQ_LEN_FROM_POSITIONS (-1) is the largest position id + 1, what a fresh
//     HF rotary module uses for a call. Other rope types ignore it.
//   - Buffers are caller-owned; a capacity argument is the buffer's size in elements, checked before any write.
#ifndef POSENC_C_API_H_
#define POSENC_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Version of this interface; bumped only when a declaration changes incompatibly.
#define POSENC_C_API_VERSION 1

/// Status of a call: POSENC_OK or the kind of failure; posenc_last_error() has the message.
typedef int32_t posenc_status;
enum {
  POSENC_OK = 0,
  POSENC_ERROR_INVALID_ARGUMENT = 1,  // null pointer, unknown enum value, buffer too small
  POSENC_ERROR_CONFIG = 2,            // config text is not JSON, or a rope field is invalid or missing
  POSENC_ERROR_SHAPE = 3,             // view shape or strides do not fit (posenc::ShapeError)
  POSENC_ERROR_RANGE = 4,             // a position or row outside what the call accepts (posenc::RangeError)
  POSENC_ERROR_IO = 5,                // a file could not be read (posenc::IoError)
  POSENC_ERROR_OUT_OF_MEMORY = 6,
  POSENC_ERROR_INTERNAL = 7           // anything else; the message says what
};

/// Element type of a posenc_heads_view; math is always float32, results rounded once to the storage type.
typedef int32_t posenc_dtype;
enum { POSENC_DTYPE_F32 = 0, POSENC_DTYPE_BF16 = 1, POSENC_DTYPE_F16 = 2 };

/// Channel pairs: half-split (i, i + rotary_dim/2), as Hugging Face and GPT-NeoX; interleaved (2i, 2i+1), as
/// GPT-J and llama2.c. POSENC_LAYOUT_FROM_CONFIG: the config's own layout (posenc_rope_config_layout).
typedef int32_t posenc_layout;
enum { POSENC_LAYOUT_HALF_SPLIT = 0, POSENC_LAYOUT_INTERLEAVED = 1, POSENC_LAYOUT_FROM_CONFIG = -1 };

/// Rotation direction: forward R; backward R^T (dL/dx from dL/dy); inverse (undoes forward, also with an
/// attention factor folded into cos/sin).
typedef int32_t posenc_direction;
enum { POSENC_FORWARD = 0, POSENC_BACKWARD = 1, POSENC_INVERSE = 2 };

/// How the angle pos * inv_freq is formed: exact (cos/sin within 1 ulp of the true values) or hf (Hugging
/// Face's float32 product; within 2 ulp of HF's own float32 cos/sin). See posenc/rope/cos_sin.h.
typedef int32_t posenc_precision;
enum { POSENC_PRECISION_EXACT = 0, POSENC_PRECISION_HF = 1 };

/// Special seq_len values (see the conventions above).
enum { POSENC_SEQ_LEN_INIT = 0, POSENC_SEQ_LEN_FROM_POSITIONS = -1 };

/// A validated rotary-embedding configuration: rope type and its parameters, rotary_dim, layout. Opaque.
typedef struct posenc_rope_config posenc_rope_config;

/// A strided view [n_tokens, n_heads, head_dim] of dtype elements. The last dimension is contiguous;
/// token_stride and head_stride are in elements and may be negative; no two (token, head) rows may overlap.
/// HF's [batch, heads, seq, head_dim] is one view per batch row (token_stride = head_dim, head_stride =
/// seq * head_dim).
typedef struct posenc_heads_view {
  void* data;             // first element of token 0, head 0
  posenc_dtype dtype;
  int64_t n_tokens;
  int64_t n_heads;
  int64_t head_dim;
  int64_t token_stride;   // elements between token t and t + 1
  int64_t head_stride;    // elements between head h and h + 1
} posenc_heads_view;

/// POSENC_C_API_VERSION of the library linked at run time (compare with the header's to detect a mismatch).
int32_t posenc_c_api_version(void);

/// The message of the last failed call on this thread ("" if none has failed). Valid until the next call into
/// posenc on this thread. Messages name the argument or config field and the value.
const char* posenc_last_error(void);

/// "ok", "invalid_argument", "config", "shape", "range", "io", "out_of_memory", "internal" or "unknown".
const char* posenc_status_name(posenc_status status);

/// Parses the rope fields of a Hugging Face config.json given as text.
///
/// Shapes:  json is json_len bytes of UTF-8 (need not be NUL-terminated).
/// Result:  on success *out owns a new handle (free with posenc_rope_config_free); on failure *out is NULL.
/// Errors:  INVALID_ARGUMENT (json or out null); CONFIG (not JSON; a missing, mistyped, conflicting or invalid
///          rope field, named with its value).
/// Source:  transformers v5 `standardize_rope_params` / `validate_rope` (rope_parameters or v4 rope_scaling,
///          partial_rotary_factor, head_dim rules): posenc::ParseHfRopeConfig (posenc/rope/hf_config.h).
posenc_status posenc_rope_config_from_json(const char* json, size_t json_len, posenc_rope_config** out);

/// Frees a handle; NULL is ignored.
void posenc_rope_config_free(posenc_rope_config* config);

/// rotary_dim (rotated channels per head) and head_dim of the config; either pointer may be NULL.
/// Errors: INVALID_ARGUMENT (config null).
posenc_status posenc_rope_config_dims(const posenc_rope_config* config, int64_t* rotary_dim, int64_t* head_dim);

/// The config's channel layout: POSENC_LAYOUT_INTERLEAVED for models whose checkpoints pair (2i, 2i+1)
/// (rope_interleave, GPT-J, DeepSeek-V2/V3), else POSENC_LAYOUT_HALF_SPLIT.
/// Errors: INVALID_ARGUMENT (a pointer null).
posenc_status posenc_rope_config_layout(const posenc_rope_config* config, posenc_layout* layout);

/// The rope type as Hugging Face spells it ("default", "linear", "dynamic", "yarn", "llama3", "longrope"), or
/// "ntk" (static NTK-aware); a static string. NULL for a NULL config.
const char* posenc_rope_config_rope_type(const posenc_rope_config* config);

/// Inverse frequencies of the config at seq_len.
///
/// Shapes:  inv_freq [rotary_dim / 2] float32 (pair i turns by pos * inv_freq[i]); capacity >= rotary_dim / 2.
/// Units:   radians/token. attention_factor multiplies cos and sin; softmax_scale_multiplier multiplies
///          head_dim^-0.5 (DeepSeek yarn mscale_all_dim; 1 otherwise). Either double pointer may be NULL.
/// Errors:  INVALID_ARGUMENT (config or inv_freq null, capacity too small, seq_len < 0).
/// Source:  transformers `ROPE_INIT_FUNCTIONS` (v5), float32 operation order: posenc::ComputeRopeFrequencies.
/// Precision: within 1 ulp of HF's float32 inv_freq.
posenc_status posenc_inv_freq(const posenc_rope_config* config, int64_t seq_len, float* inv_freq, size_t capacity,
                              double* attention_factor, double* softmax_scale_multiplier);

/// cos and sin of each position id, attention factor folded in.
///
/// Shapes:  position_ids [n]; cos and sin [n, rotary_dim / 2] row-major float32 (row t = position_ids[t];
///          Hugging Face's [n, rotary_dim] rows are cat(row, row)); capacity (of each) >= n * rotary_dim / 2.
/// Units:   positions in tokens (negative positions rotate backwards); angles in radians.
/// Errors:  INVALID_ARGUMENT (a pointer null with n > 0, capacity too small, unknown precision, seq_len < -1);
///          RANGE (|position| > 2^40, named by index).
/// Source:  transformers `LlamaRotaryEmbedding.forward` (precision hf): posenc::ComputeCosSin.
posenc_status posenc_cos_sin(const posenc_rope_config* config, const int64_t* position_ids, size_t n,
                             int64_t seq_len, posenc_precision precision, float* cos, float* sin, size_t capacity);

/// Rotates x in place by its tokens' position ids, cos/sin computed inside the kernel from the config's
/// frequencies at seq_len.
///
/// Shapes:  x as posenc_heads_view; position_ids [n], n == x->n_tokens.
/// Layout:  channels [0, rotary_dim) rotated in `layout`; [rotary_dim, head_dim) untouched.
/// Errors:  INVALID_ARGUMENT (a pointer null, unknown dtype, layout, direction or precision, seq_len < -1);
///          SHAPE (rotary_dim > head_dim, strides that overlap rows, n != n_tokens); RANGE (|position| >= 2^29).
/// Source:  Su et al. 2021 (RoFormer) Sec. 3.4.2; HF `apply_rotary_pos_emb`: posenc::ApplyRope (on the fly).
posenc_status posenc_apply_rope(const posenc_rope_config* config, const posenc_heads_view* x,
                                const int64_t* position_ids, size_t n, int64_t seq_len, posenc_layout layout,
                                posenc_direction direction, posenc_precision precision);

/// Rotates x in place with the caller's cos/sin table (as posenc_cos_sin writes it).
///
/// Shapes:  x as posenc_heads_view; rows [n], n == x->n_tokens, token t uses row rows[t]; cos and sin
///          [n_rows, half] row-major float32.
/// Layout:  channels [0, 2 * half) rotated in `layout` (POSENC_LAYOUT_HALF_SPLIT or _INTERLEAVED);
///          [2 * half, head_dim) untouched.
/// Errors:  INVALID_ARGUMENT (a pointer null, unknown dtype, layout or direction); SHAPE (half < 1,
///          2 * half > head_dim, strides that overlap rows, n != n_tokens); RANGE (a row outside [0, n_rows),
///          named with its token).
/// Source:  as posenc_apply_rope: posenc::ApplyRope (table).
posenc_status posenc_apply_rope_table(const posenc_heads_view* x, const int64_t* rows, size_t n, const float* cos,
                                      const float* sin, int64_t n_rows, int64_t half, posenc_layout layout,
                                      posenc_direction direction);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // POSENC_C_API_H_
