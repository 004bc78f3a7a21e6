#include "strbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for `more` bytes and the NUL. */
static int strbuf_grow(strbuf_t *b, size_t more) {
  if (b->len + more + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + more + 1) cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) {
    b->failed = 1;
    return -ENOMEM;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

int strbuf_add(strbuf_t *b, const char *s, size_t n) {
  if (strbuf_grow(b, n)) return -ENOMEM;
  if (n) memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
  return 0;
}

int strbuf_adds(strbuf_t *b, const char *s) { return strbuf_add(b, s, strlen(s)); }

int strbuf_addf(strbuf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int need = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
  va_end(ap);
  if (need < 0) {
    b->failed = 1;
    return -ENOMEM;
  }
  if (b->p && b->len + (size_t)need < b->cap) {
    b->len += (size_t)need;
    return 0;
  }
  if (strbuf_grow(b, (size_t)need)) return -ENOMEM;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)need;
  return 0;
}

void strbuf_release(strbuf_t *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
}
