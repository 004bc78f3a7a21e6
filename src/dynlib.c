/* See dynlib.h. */
#include "dynlib.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

/* 1 when every symbol is resolved, else -1 with d->error said. */
static int dynlib_open(dynlib_t *d) {
  void *h = dlopen(d->soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (d->hint)
      snprintf(d->error, sizeof(d->error), "%s (cannot load %s: %s)", d->hint, d->soname,
               dlerror());
    else
      snprintf(d->error, sizeof(d->error), "cannot load %s: %s", d->soname, dlerror());
    return -1;
  }
  for (size_t i = 0; i < d->n; i++) {
    if ((*d->slots[i] = dlsym(h, d->names[i]))) continue;
    snprintf(d->error, sizeof(d->error), "%s lacks %s, which spiderd uses (too old?)%s%s%s",
             d->soname, d->names[i], d->hint ? " (" : "", d->hint ? d->hint : "",
             d->hint ? ")" : "");
    for (size_t j = 0; j < d->n; j++) *d->slots[j] = NULL;
    return -1;
  }
  return 1;
}

int dynlib_load(dynlib_t *d, char *err, size_t errlen) {
  int state = __atomic_load_n(&d->state, __ATOMIC_ACQUIRE);
  if (!state) {
    pthread_mutex_lock(&d->lock);
    if (!(state = d->state)) /* the pointers are set before the state says so */
      __atomic_store_n(&d->state, state = dynlib_open(d), __ATOMIC_RELEASE);
    pthread_mutex_unlock(&d->lock);
  }
  if (state > 0) return 0;
  if (err && errlen) snprintf(err, errlen, "%s", d->error);
  return -ENOENT;
}
