// The C API (posenc/c_api.h) exercised from C: compiled as C11, no C++ in this file. Expected values come from
// the definitions (inv_freq_i = theta^(-2i/d), the llama3 low-frequency rule, the rotation formula evaluated in
// double from the library's own float32 cos/sin) and from the documented error contract.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "posenc/c_api.h"

static int g_failures = 0;

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                   \
    }                                                                 \
  } while (0)

#define CHECK_STATUS(call, expected)                                                              \
  do {                                                                                            \
    posenc_status s_ = (call);                                                                    \
    if (s_ != (expected)) {                                                                       \
      fprintf(stderr, "%s:%d: %s returned %s (%s), expected %s\n", __FILE__, __LINE__, #call,     \
              posenc_status_name(s_), posenc_last_error(), posenc_status_name(expected));         \
      ++g_failures;                                                                               \
    }                                                                                             \
  } while (0)

// One float32 ulp at the magnitude of x.
static double ulp_of(float x) {
  float ax = fabsf(x);
  return (double)(nextafterf(ax, INFINITY) - ax);
}

static posenc_rope_config* from_json(const char* text) {
  posenc_rope_config* config = NULL;
  CHECK_STATUS(posenc_rope_config_from_json(text, strlen(text), &config), POSENC_OK);
  CHECK(config != NULL);
  return config;
}

static void test_version_and_names(void) {
  CHECK(posenc_c_api_version() == POSENC_C_API_VERSION);
  CHECK(strcmp(posenc_status_name(POSENC_OK), "ok") == 0);
  CHECK(strcmp(posenc_status_name(POSENC_ERROR_RANGE), "range") == 0);
  CHECK(strcmp(posenc_status_name(12345), "unknown") == 0);
}

// Default RoPE, head_dim 4, theta 10000: inv_freq = (1, 10000^-0.5) = (1, fl32(0.01)).
static void test_default_inv_freq(void) {
  posenc_rope_config* c = from_json("{\"head_dim\": 4, \"rope_theta\": 10000.0, \"max_position_embeddings\": 2048}");
  int64_t rotary_dim = 0, head_dim = 0;
  posenc_layout layout = -5;
  CHECK_STATUS(posenc_rope_config_dims(c, &rotary_dim, &head_dim), POSENC_OK);
  CHECK(rotary_dim == 4 && head_dim == 4);
  CHECK_STATUS(posenc_rope_config_layout(c, &layout), POSENC_OK);
  CHECK(layout == POSENC_LAYOUT_HALF_SPLIT);
  CHECK(strcmp(posenc_rope_config_rope_type(c), "default") == 0);
  float inv[2] = {0, 0};
  double attention_factor = 0, softmax = 0;
  CHECK_STATUS(posenc_inv_freq(c, POSENC_SEQ_LEN_INIT, inv, 2, &attention_factor, &softmax), POSENC_OK);
  CHECK(inv[0] == 1.0f);
  CHECK(inv[1] == 0.01f);
  CHECK(attention_factor == 1.0 && softmax == 1.0);
  posenc_rope_config_free(c);
}

// Llama 3.1 scaling: pair 0 (wavelength 2 pi < 8192 / high_freq_factor) is kept; the last pair (wavelength far
// above 8192 / low_freq_factor) is divided by factor 8.
static void test_llama3_inv_freq(void) {
  posenc_rope_config* c = from_json(
      "{\"hidden_size\": 4096, \"num_attention_heads\": 32, \"max_position_embeddings\": 131072,"
      " \"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0,"
      " \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}");
  CHECK(strcmp(posenc_rope_config_rope_type(c), "llama3") == 0);
  float inv[64];
  CHECK_STATUS(posenc_inv_freq(c, POSENC_SEQ_LEN_INIT, inv, 64, NULL, NULL), POSENC_OK);
  CHECK(inv[0] == 1.0f);
  const double last = 1.0 / pow(500000.0, 126.0 / 128.0) / 8.0;
  // float32 operation order (HF's) against the double value: a few roundings of a 1-ulp quantity.
  CHECK(fabs(inv[63] - last) <= 4 * ulp_of((float)last));
  posenc_rope_config_free(c);
}

// cos/sin in exact precision are within 1 ulp of cos(inv_freq * pos) for the float32 inv_freq.
static void test_cos_sin_exact(void) {
  posenc_rope_config* c = from_json("{\"head_dim\": 8, \"rope_theta\": 10000.0}");
  float inv[4];
  CHECK_STATUS(posenc_inv_freq(c, POSENC_SEQ_LEN_INIT, inv, 4, NULL, NULL), POSENC_OK);
  const int64_t pos[3] = {0, 7, 100000};
  float cs[12], sn[12];
  CHECK_STATUS(posenc_cos_sin(c, pos, 3, POSENC_SEQ_LEN_INIT, POSENC_PRECISION_EXACT, cs, sn, 12), POSENC_OK);
  for (int t = 0; t < 3; ++t) {
    for (int i = 0; i < 4; ++i) {
      const double angle = (double)inv[i] * (double)pos[t];
      CHECK(fabs(cs[t * 4 + i] - cos(angle)) <= ulp_of((float)cos(angle)));
      CHECK(fabs(sn[t * 4 + i] - sin(angle)) <= ulp_of((float)sin(angle)));
    }
  }
  CHECK_STATUS(posenc_cos_sin(c, pos, 3, POSENC_SEQ_LEN_INIT, POSENC_PRECISION_EXACT, cs, sn, 11),
               POSENC_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(posenc_last_error(), "capacity") != NULL);
  posenc_rope_config_free(c);
}

// x [3 tokens, 2 heads, head_dim 8] with rotary_dim 4 (partial_rotary_factor 0.5), token stride 20 (padding
// between tokens): each rotated pair (a, b) becomes (a c - b s, a s + b c) with the config's cos/sin, within
// 2u (|a c| + |b s|) (u = 2^-24: two roundings); pass-through channels and the padding are untouched.
static void check_rotation(int layout, int use_table) {
  posenc_rope_config* c = from_json("{\"head_dim\": 8, \"rope_theta\": 10000.0, \"partial_rotary_factor\": 0.5}");
  enum { kTokens = 3, kHeads = 2, kDim = 8, kStride = 20, kHalf = 2 };
  float x[kTokens * kStride], x0[kTokens * kStride];
  for (int i = 0; i < kTokens * kStride; ++i) x0[i] = x[i] = (float)sin(0.37 * i + 0.1) * 3.0f;
  const int64_t pos[kTokens] = {0, 5, 4095};
  float cs[kTokens * kHalf], sn[kTokens * kHalf];
  CHECK_STATUS(posenc_cos_sin(c, pos, kTokens, POSENC_SEQ_LEN_INIT, POSENC_PRECISION_EXACT, cs, sn,
                              kTokens * kHalf), POSENC_OK);
  posenc_heads_view v = {x, POSENC_DTYPE_F32, kTokens, kHeads, kDim, kStride, kDim};
  if (use_table) {
    const int64_t rows[kTokens] = {0, 1, 2};
    CHECK_STATUS(posenc_apply_rope_table(&v, rows, kTokens, cs, sn, kTokens, kHalf, layout, POSENC_FORWARD),
                 POSENC_OK);
  } else {
    CHECK_STATUS(posenc_apply_rope(c, &v, pos, kTokens, POSENC_SEQ_LEN_INIT, layout, POSENC_FORWARD,
                                   POSENC_PRECISION_EXACT), POSENC_OK);
  }
  for (int t = 0; t < kTokens; ++t) {
    for (int h = 0; h < kHeads; ++h) {
      const int base = t * kStride + h * kDim;
      for (int i = 0; i < kHalf; ++i) {
        const int ia = layout == POSENC_LAYOUT_INTERLEAVED ? base + 2 * i : base + i;
        const int ib = layout == POSENC_LAYOUT_INTERLEAVED ? base + 2 * i + 1 : base + i + kHalf;
        const double a = x0[ia], b = x0[ib], cc = cs[t * kHalf + i], ss = sn[t * kHalf + i];
        // On the fly, the kernel's cos/sin are within 1 ulp (<= 2^-23 for |value| <= 1) of the table's.
        const double coef = use_table ? 0.0 : (fabs(a) + fabs(b)) * 0x1p-23;
        const double bound = 2 * 0x1p-24 * (fabs(a * cc) + fabs(b * ss) + fabs(a * ss) + fabs(b * cc)) + coef;
        CHECK(fabs(x[ia] - (a * cc - b * ss)) <= bound);
        CHECK(fabs(x[ib] - (a * ss + b * cc)) <= bound);
      }
      for (int j = 2 * kHalf; j < kDim; ++j) CHECK(x[base + j] == x0[base + j]);
    }
    for (int j = kHeads * kDim; j < kStride; ++j) CHECK(x[t * kStride + j] == x0[t * kStride + j]);
  }
  posenc_rope_config_free(c);
}

static void test_rotation(void) {
  check_rotation(POSENC_LAYOUT_HALF_SPLIT, 0);
  check_rotation(POSENC_LAYOUT_HALF_SPLIT, 1);
  check_rotation(POSENC_LAYOUT_INTERLEAVED, 0);
  check_rotation(POSENC_LAYOUT_INTERLEAVED, 1);
}

// Backward is the transpose: <R x, y> = <x, R^T y> exactly for the same coefficients, so the two float32 results
// differ only by their roundings. Each rotated element of a pair (a, b) is within 2u (|a| + |b|) of exact
// (|c|, |s| <= 1, u = 2^-24), hence |lhs - rhs| <= 2u * sum over pairs of 2 (|x_a| + |x_b|)(|y_a| + |y_b|);
// the double sums add nothing at this scale.
static void test_backward_is_transpose(void) {
  posenc_rope_config* c = from_json("{\"head_dim\": 8, \"rope_theta\": 10000.0}");
  float x[16], y[16], rx[16], rty[16];
  for (int i = 0; i < 16; ++i) x[i] = rx[i] = (float)cos(1.3 * i), y[i] = rty[i] = (float)sin(0.7 * i + 0.2);
  const int64_t pos[2] = {3, 1000};
  posenc_heads_view vx = {rx, POSENC_DTYPE_F32, 2, 1, 8, 8, 8};
  posenc_heads_view vy = {rty, POSENC_DTYPE_F32, 2, 1, 8, 8, 8};
  CHECK_STATUS(posenc_apply_rope(c, &vx, pos, 2, POSENC_SEQ_LEN_INIT, POSENC_LAYOUT_FROM_CONFIG, POSENC_FORWARD,
                                 POSENC_PRECISION_EXACT), POSENC_OK);
  CHECK_STATUS(posenc_apply_rope(c, &vy, pos, 2, POSENC_SEQ_LEN_INIT, POSENC_LAYOUT_FROM_CONFIG, POSENC_BACKWARD,
                                 POSENC_PRECISION_EXACT), POSENC_OK);
  double lhs = 0, rhs = 0, mag = 0;
  for (int i = 0; i < 16; ++i) {
    lhs += (double)rx[i] * y[i];
    rhs += (double)x[i] * rty[i];
  }
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < 4; ++i) {  // half-split pairs (i, i + 4)
      const int a = t * 8 + i, b = a + 4;
      mag += 2 * (fabs((double)x[a]) + fabs((double)x[b])) * (fabs((double)y[a]) + fabs((double)y[b]));
    }
  }
  CHECK(fabs(lhs - rhs) <= 2 * 0x1p-24 * mag);
  posenc_rope_config_free(c);
}

static void test_errors(void) {
  posenc_rope_config* c = (posenc_rope_config*)1;  // must be reset to NULL on failure
  CHECK_STATUS(posenc_rope_config_from_json("{not json", 9, &c), POSENC_ERROR_CONFIG);
  CHECK(c == NULL);
  CHECK(strlen(posenc_last_error()) > 0);
  const char* no_head_dim = "{\"rope_theta\": 10000.0}";
  CHECK_STATUS(posenc_rope_config_from_json(no_head_dim, strlen(no_head_dim), &c), POSENC_ERROR_CONFIG);
  CHECK(strstr(posenc_last_error(), "head_dim") != NULL);
  const char* bad_type = "{\"head_dim\": 8, \"rope_scaling\": {\"rope_type\": \"nope\", \"factor\": 2.0}}";
  CHECK_STATUS(posenc_rope_config_from_json(bad_type, strlen(bad_type), &c), POSENC_ERROR_CONFIG);
  CHECK(strstr(posenc_last_error(), "nope") != NULL);
  const char* bad_factor = "{\"head_dim\": 8, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": -2.0}}";
  CHECK_STATUS(posenc_rope_config_from_json(bad_factor, strlen(bad_factor), &c), POSENC_ERROR_CONFIG);
  CHECK(strstr(posenc_last_error(), "factor") != NULL);
  CHECK_STATUS(posenc_rope_config_from_json(no_head_dim, strlen(no_head_dim), NULL), POSENC_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(posenc_rope_config_from_json(NULL, 3, &c), POSENC_ERROR_INVALID_ARGUMENT);

  c = from_json("{\"head_dim\": 8}");
  float inv[4];
  CHECK_STATUS(posenc_inv_freq(c, 0, inv, 3, NULL, NULL), POSENC_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(posenc_last_error(), "capacity") != NULL);
  CHECK_STATUS(posenc_inv_freq(NULL, 0, inv, 4, NULL, NULL), POSENC_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(posenc_inv_freq(c, -1, inv, 4, NULL, NULL), POSENC_ERROR_INVALID_ARGUMENT);

  float x[16] = {0};
  const int64_t pos[2] = {0, 1};
  posenc_heads_view v = {x, POSENC_DTYPE_F32, 2, 1, 8, 8, 8};
  CHECK_STATUS(posenc_apply_rope(c, &v, pos, 1, 0, POSENC_LAYOUT_FROM_CONFIG, POSENC_FORWARD, 0),
               POSENC_ERROR_SHAPE);  // one position for two tokens
  const int64_t far[2] = {0, (int64_t)1 << 30};
  CHECK_STATUS(posenc_apply_rope(c, &v, far, 2, 0, POSENC_LAYOUT_FROM_CONFIG, POSENC_FORWARD, 0),
               POSENC_ERROR_RANGE);
  CHECK_STATUS(posenc_apply_rope(c, &v, pos, 2, 0, 7, POSENC_FORWARD, 0), POSENC_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(posenc_last_error(), "layout") != NULL);
  CHECK_STATUS(posenc_apply_rope(c, &v, pos, 2, 0, POSENC_LAYOUT_FROM_CONFIG, 9, 0), POSENC_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(posenc_apply_rope(c, &v, pos, 2, 0, POSENC_LAYOUT_FROM_CONFIG, POSENC_FORWARD, 4),
               POSENC_ERROR_INVALID_ARGUMENT);
  posenc_heads_view bad_dtype = v;
  bad_dtype.dtype = 7;
  CHECK_STATUS(posenc_apply_rope(c, &bad_dtype, pos, 2, 0, POSENC_LAYOUT_FROM_CONFIG, POSENC_FORWARD, 0),
               POSENC_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(posenc_last_error(), "dtype") != NULL);
  posenc_heads_view overlapping = v;
  overlapping.n_heads = 2;
  overlapping.head_stride = 4;  // heads of 8 channels 4 apart
  CHECK_STATUS(posenc_apply_rope(c, &overlapping, pos, 2, 0, POSENC_LAYOUT_FROM_CONFIG, POSENC_FORWARD, 0),
               POSENC_ERROR_SHAPE);
  CHECK_STATUS(posenc_apply_rope(c, NULL, pos, 2, 0, POSENC_LAYOUT_FROM_CONFIG, POSENC_FORWARD, 0),
               POSENC_ERROR_INVALID_ARGUMENT);
  /* Strides whose offsets t * token_stride (times 4 bytes) pass 64 bits would wrap to memory before or after
     the caller's buffer: refused by both entry points, nothing written around the view. */
  const int64_t huge_strides[3] = {INT64_MAX - 1, (int64_t)1 << 62, INT64_MIN / 2};
  for (int i = 0; i < 3; ++i) {
    float guarded[3 * 8 + 2];
    for (int j = 0; j < 3 * 8 + 2; ++j) guarded[j] = 7.0f;
    posenc_heads_view huge = {guarded + 1, POSENC_DTYPE_F32, 3, 1, 8, huge_strides[i], 8};
    const int64_t pos3[3] = {0, 1, 2};
    CHECK_STATUS(posenc_apply_rope(c, &huge, pos3, 3, 0, POSENC_LAYOUT_FROM_CONFIG, POSENC_FORWARD, 0),
                 POSENC_ERROR_SHAPE);
    CHECK(strstr(posenc_last_error(), "64-bit offset") != NULL);
    const float ones[4] = {1, 1, 1, 1}, zeros[4] = {0, 0, 0, 0};
    const int64_t rows3[3] = {0, 0, 0};
    CHECK_STATUS(posenc_apply_rope_table(&huge, rows3, 3, ones, zeros, 1, 4, POSENC_LAYOUT_HALF_SPLIT,
                                         POSENC_FORWARD),
                 POSENC_ERROR_SHAPE);
    for (int j = 0; j < 3 * 8 + 2; ++j) CHECK(guarded[j] == 7.0f);
  }

  const float cs[4] = {1, 1, 1, 1}, sn[4] = {0, 0, 0, 0};
  const int64_t rows[2] = {0, 1};
  CHECK_STATUS(posenc_apply_rope_table(&v, rows, 2, cs, sn, 1, 4, POSENC_LAYOUT_HALF_SPLIT, POSENC_FORWARD),
               POSENC_ERROR_RANGE);  // row 1 of a one-row table
  CHECK(strstr(posenc_last_error(), "token 1") != NULL);
  CHECK_STATUS(posenc_apply_rope_table(&v, rows, 2, cs, sn, 2, 4, POSENC_LAYOUT_FROM_CONFIG, POSENC_FORWARD),
               POSENC_ERROR_INVALID_ARGUMENT);  // no config to take the layout from
  CHECK_STATUS(posenc_apply_rope_table(&v, rows, 2, cs, sn, 2, 8, POSENC_LAYOUT_HALF_SPLIT, POSENC_FORWARD),
               POSENC_ERROR_SHAPE);  // rotary_dim 16 > head_dim 8
  posenc_rope_config_free(c);
  posenc_rope_config_free(NULL);
}

int main(void) {
  test_version_and_names();
  test_default_inv_freq();
  test_llama3_inv_freq();
  test_cos_sin_exact();
  test_rotation();
  test_backward_is_transpose();
  test_errors();
  if (g_failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
