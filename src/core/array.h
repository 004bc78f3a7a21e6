/* Growable arrays: the doubling growth every {v, n, cap} list in spiderd uses,
 * written once.
 *
 * Ownership: the array stays the caller's (it frees it with free()); these
 * only realloc it. On failure the array and its capacity are left as they
 * were, so the caller's clean-up path is unchanged.
 */
#ifndef SPIDERD_CORE_ARRAY_H
#define SPIDERD_CORE_ARRAY_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Makes room in *v (*cap elements of size bytes allocated) for at least
 * need elements, doubling the allocation (16 at first) until it holds them.
 * 0, or -ENOMEM. */
int array_reserve(void **v, size_t *cap, size_t need, size_t size);

/* Appends one zeroed element to *v of *n elements: the element, or NULL
 * when out of memory (nothing appended). */
void *array_push(void **v, size_t *n, size_t *cap, size_t size);

/* Defines `void fn(list_type *l)` for a list {v, n[, cap]}: releases each
 * element with item_release, frees the array and zeroes *l; a NULL l is
 * nothing to do. */
#define ARRAY_LIST_RELEASE(fn, list_type, item_release)        \
  void fn(list_type *l) {                                      \
    if (!l) return;                                            \
    for (size_t i = 0; i < l->n; i++) item_release(&l->v[i]);  \
    free(l->v);                                                \
    memset(l, 0, sizeof(*l));                                  \
  }

#endif
