/* Libraries opened on first use instead of linked (ICU, libcurl, libcrypto,
 * libpq, libarchive): a daemon that never needs one never maps it, and its
 * idle memory stays small. A module lists the functions it calls with an
 * X-macro, keeps a pointer for each, and describes them in a dynlib_t:
 *
 *   #define PQ_FUNCS(X) X(PQexec) X(PQclear)
 *   PQ_FUNCS(DYNLIB_PTR)                          (__typeof__(PQexec) *lazy_PQexec; ...)
 *   static const char *const names[] = {PQ_FUNCS(DYNLIB_NAME)};
 *   static void **const slots[] = {PQ_FUNCS(DYNLIB_SLOT)};
 *   static dynlib_t lib = DYNLIB_INIT("libpq.so.5", "apt-get install libpq5", names, slots);
 *   ... if (dynlib_load(&lib, err, errlen)) fail;
 *
 * A library stays open for the process's life: nothing to free. */
#ifndef SPIDERD_DYNLIB_H
#define SPIDERD_DYNLIB_H

#include <pthread.h>
#include <stddef.h>

/* X-macro helpers: the pointer lazy_NAME, the symbol's name ("#fn" does not
 * expand a macro of that name, such as the header's PQexec -> lazy call),
 * and the pointer's address. */
#define DYNLIB_PTR(fn) __typeof__(fn) *lazy_##fn;
#define DYNLIB_NAME(fn) #fn,
#define DYNLIB_SLOT(fn) (void **)&lazy_##fn,

typedef struct dynlib {
  const char *soname;
  const char *hint;         /* what to do when it is missing, or NULL */
  const char *const *names; /* the symbols, in slots' order */
  void **const *slots;
  size_t n;
  pthread_mutex_t lock;
  int state;                /* 0 not tried, 1 loaded, -1 not to be had */
  char error[320];
} dynlib_t;

#define DYNLIB_INIT(soname, hint, names, slots)                                         \
  {(soname), (hint), (names), (slots), sizeof(names) / sizeof(*(names)),               \
   PTHREAD_MUTEX_INITIALIZER, 0, ""}

/* Opens the library and resolves every symbol, once for the process
 * (thread-safe; later calls answer at once). 0 when all are there; else
 * -ENOENT, every pointer left NULL, and err (may be NULL) says why: the
 * library or a symbol missing, and the hint. */
int dynlib_load(dynlib_t *d, char *err, size_t errlen);

#endif
