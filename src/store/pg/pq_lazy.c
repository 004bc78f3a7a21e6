/* See pq_lazy.h. */
#include "store/pg/pq_lazy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "error.h"

#define PQ_LAZY_DEF(fn) __typeof__(fn) *lazy_##fn;
PQ_LAZY_FUNCS(PQ_LAZY_DEF)

static pthread_once_t pq_once = PTHREAD_ONCE_INIT;
static char pq_error[320];
static int pq_ok;

static void pq_open(void) {
  void *h = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(pq_error, sizeof(pq_error),
             "PostgreSQL store needs libpq5: apt-get install libpq5 (%s)", dlerror());
    return;
  }
  int ok = 1;
  /* #fn is the plain name: # does not expand pq_lazy.h's macros. */
#define PQ_LAZY_SYM(fn) ok &= (*(void **)&lazy_##fn = dlsym(h, #fn)) != NULL;
  PQ_LAZY_FUNCS(PQ_LAZY_SYM)
  if (!ok)
    snprintf(pq_error, sizeof(pq_error),
             "PostgreSQL store: libpq.so.5 lacks a function spiderd uses (too old a libpq5?)");
  pq_ok = ok;
}

int pq_lazy_load(char *err, size_t errlen) {
  pthread_once(&pq_once, pq_open);
  if (!pq_ok && err && errlen) snprintf(err, errlen, "%s", pq_error);
  return pq_ok ? 0 : SPD_ECONFIG;
}
