/* A C program using posenc's C API: reads a Hugging Face config.json, prints its rope type, rotary_dim and
 * inv_freq, then rotates one head of ones at positions 0..3 and prints |x| of each (a rotation keeps it).
 * Build against the installed package:
 *   cmake -S examples/c -B c-build -DCMAKE_PREFIX_PATH=<posenc install prefix> && cmake --build c-build
 *   c-build/posenc_c_example examples/configs/llama3.1-8b.json */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "posenc/c_api.h"

static char* read_file(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  char* text = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    const long size = ftell(f);
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)size + 1)) != NULL) {
      *len = fread(text, 1, (size_t)size, f);
    }
  }
  fclose(f);
  return text;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s config.json\n", argv[0]);
    return 2;
  }
  size_t len = 0;
  char* json = read_file(argv[1], &len);
  if (!json) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  posenc_rope_config* config = NULL;
  posenc_status s = posenc_rope_config_from_json(json, len, &config);
  free(json);
  if (s != POSENC_OK) {
    fprintf(stderr, "%s: %s\n", posenc_status_name(s), posenc_last_error());
    return 1;
  }
  int64_t rotary_dim = 0, head_dim = 0;
  posenc_rope_config_dims(config, &rotary_dim, &head_dim);
  printf("rope_type %s, rotary_dim %lld, head_dim %lld\n", posenc_rope_config_rope_type(config),
         (long long)rotary_dim, (long long)head_dim);

  float* inv_freq = malloc(sizeof(float) * (size_t)(rotary_dim / 2));
  float* x = malloc(sizeof(float) * (size_t)(4 * head_dim));
  if (!inv_freq || !x) return 1;
  s = posenc_inv_freq(config, POSENC_SEQ_LEN_INIT, inv_freq, (size_t)(rotary_dim / 2), NULL, NULL);
  if (s == POSENC_OK) printf("inv_freq[0] = %.6g, inv_freq[last] = %.6g\n", inv_freq[0], inv_freq[rotary_dim / 2 - 1]);

  for (int64_t i = 0; i < 4 * head_dim; ++i) x[i] = 1.0f;
  const int64_t position_ids[4] = {0, 1, 2, 3};
  const posenc_heads_view view = {x, POSENC_DTYPE_F32, 4, 1, head_dim, head_dim, head_dim};
  if (s == POSENC_OK) {
    s = posenc_apply_rope(config, &view, position_ids, 4, POSENC_SEQ_LEN_FROM_POSITIONS, POSENC_LAYOUT_FROM_CONFIG,
                          POSENC_FORWARD, POSENC_PRECISION_EXACT);
  }
  if (s != POSENC_OK) {
    fprintf(stderr, "%s: %s\n", posenc_status_name(s), posenc_last_error());
    return 1;
  }
  for (int t = 0; t < 4; ++t) {
    double norm = 0;
    for (int64_t i = 0; i < head_dim; ++i) norm += (double)x[t * head_dim + i] * x[t * head_dim + i];
    printf("position %d: |x| = %.4f\n", t, sqrt(norm));
  }
  free(x);
  free(inv_freq);
  posenc_rope_config_free(config);
  return 0;
}
