#include "core/array.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int array_reserve(void **v, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 0;
  size_t ncap = *cap ? *cap : 16;
  while (ncap < need) ncap *= 2;
  void *nv = realloc(*v, ncap * size);
  if (!nv) return -ENOMEM;
  *v = nv;
  *cap = ncap;
  return 0;
}

void *array_push(void **v, size_t *n, size_t *cap, size_t size) {
  if (array_reserve(v, cap, *n + 1, size)) return NULL;
  void *at = (char *)*v + (*n)++ * size;
  memset(at, 0, size);
  return at;
}
