/* A C user of the installed wick: the C API only. */
#include <stdio.h>

#include "wick/wick_c.h"

int main(void) {
  const float v[4] = {1, 2, 3, 4};
  const int64_t shape[2] = {2, 2};
  const wick_device cpu = {WICK_DEVICE_CPU, 0};
  wick_tensor *x = NULL, *y = NULL;
  if (wick_tensor_from_host(v, sizeof v, WICK_F32, shape, 2, cpu, &x) != WICK_OK ||
      wick_softmax(x, -1, &y) != WICK_OK) {
    printf("consumer (C): %s\n", wick_last_error());
    return 1;
  }
  float out[4];
  if (wick_tensor_to_host(y, out, sizeof out) != WICK_OK) return 1;
  printf("consumer (C): wick %s, softmax row 0 = %.4f %.4f\n", wick_version(), out[0], out[1]);
  wick_tensor_free(x);
  wick_tensor_free(y);
  return out[0] + out[1] > 0.999f && out[0] + out[1] < 1.001f ? 0 : 1;
}
