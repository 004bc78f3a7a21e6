/* A growable string: appends keep it NUL-terminated. A failed append
 * leaves what was there and sets `failed`, so a long run of appends may
 * check once at the end.
 *
 * Ownership: p is malloc'd (NULL until the first append); strbuf_release
 * frees it.
 */
#ifndef SPIDERD_STRBUF_H
#define SPIDERD_STRBUF_H

#include <stddef.h>

typedef struct strbuf {
  char *p;
  size_t len, cap;
  int failed; /* an append ran out of memory */
} strbuf_t;

/* Appends n bytes of s. 0 or -ENOMEM. */
int strbuf_add(strbuf_t *b, const char *s, size_t n);
int strbuf_adds(strbuf_t *b, const char *s);
/* Appends printf-style. 0 or -ENOMEM. */
int strbuf_addf(strbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_release(strbuf_t *b);

#endif
