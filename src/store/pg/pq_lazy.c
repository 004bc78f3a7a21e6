/* See pq_lazy.h. */
#include "store/pg/pq_lazy.h"

#include "dynlib.h"
#include "error.h"

PQ_LAZY_FUNCS(DYNLIB_PTR)
static const char *const pq_names[] = {PQ_LAZY_FUNCS(DYNLIB_NAME)};
static void **const pq_slots[] = {PQ_LAZY_FUNCS(DYNLIB_SLOT)};
static dynlib_t pq_lib = DYNLIB_INIT("libpq.so.5",
                                     "PostgreSQL store needs libpq5: apt-get install libpq5",
                                     pq_names, pq_slots);

int pq_lazy_load(char *err, size_t errlen) {
  return dynlib_load(&pq_lib, err, errlen) ? SPD_ECONFIG : 0;
}
