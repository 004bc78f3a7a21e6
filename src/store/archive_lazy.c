/* See archive_lazy.h. */
#include "store/archive_lazy.h"

#include "dynlib.h"
#include "error.h"

ARCHIVE_LAZY_FUNCS(DYNLIB_PTR)
static const char *const archive_names[] = {ARCHIVE_LAZY_FUNCS(DYNLIB_NAME)};
static void **const archive_slots[] = {ARCHIVE_LAZY_FUNCS(DYNLIB_SLOT)};
static dynlib_t archive_lib = DYNLIB_INIT(
    "libarchive.so.13", "zip and tar.gz projects need libarchive13: apt-get install libarchive13",
    archive_names, archive_slots);

int archive_lazy_load(char *err, size_t errlen) {
  return dynlib_load(&archive_lib, err, errlen) ? SPD_ECONFIG : 0;
}
