/* See archive_lazy.h. */
#include "store/archive_lazy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "error.h"

#define ARCHIVE_LAZY_DEF(fn) __typeof__(fn) *lazy_##fn;
ARCHIVE_LAZY_FUNCS(ARCHIVE_LAZY_DEF)

static pthread_once_t al_once = PTHREAD_ONCE_INIT;
static char al_error[320];
static int al_ok;

static void al_open(void) {
  void *h = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(al_error, sizeof(al_error),
             "zip and tar.gz projects need libarchive13: apt-get install libarchive13 (%s)",
             dlerror());
    return;
  }
  int ok = 1;
  /* #fn is the plain name: # does not expand archive_lazy.h's macros. */
#define ARCHIVE_LAZY_SYM(fn) ok &= (*(void **)&lazy_##fn = dlsym(h, #fn)) != NULL;
  ARCHIVE_LAZY_FUNCS(ARCHIVE_LAZY_SYM)
  if (!ok)
    snprintf(al_error, sizeof(al_error),
             "libarchive.so.13 lacks a function spiderd uses (too old a libarchive13?)");
  al_ok = ok;
}

int archive_lazy_load(char *err, size_t errlen) {
  pthread_once(&al_once, al_open);
  if (!al_ok && err && errlen) snprintf(err, errlen, "%s", al_error);
  return al_ok ? 0 : SPD_ECONFIG;
}
