/* The one-shot "done" callback of an asynchronous stop or drain (the
 * done, ud pair a *_stop or *_drain takes), shared by the run/ components.
 *
 * Ownership: ud is the caller's; nothing is allocated.
 */
#ifndef SPIDERD_RUN_DONE_H
#define SPIDERD_RUN_DONE_H

#include <stddef.h>

typedef struct run_done {
  void (*fn)(void *ud); /* NULL: none armed */
  void *ud;
} run_done_t;

static inline void run_done_set(run_done_t *d, void (*fn)(void *ud), void *ud) {
  d->fn = fn;
  d->ud = ud;
}

/* Calls the armed callback once: it is disarmed first, so it may free the
 * component or arm it again. */
static inline void run_done_fire(run_done_t *d) {
  void (*fn)(void *) = d->fn;
  d->fn = NULL;
  if (fn) fn(d->ud);
}

#endif
