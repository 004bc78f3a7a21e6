/* Store URLs (store/store.c, pg/pg.c, redis/redis.c): each input line is
 * given to store_open and store_watch_open, as [spiderd] store is, and to
 * config_redact_url. The calls that would connect or create a file are
 * replaced below, so every URL is parsed and then fails at its connect:
 * nothing is dialled, no file or directory is made. */
#include <hiredis/hiredis.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "store/pg/pq_lazy.h"
#include "store/store.h"

/* libpq is opened with dlopen (store/pg/pq_lazy.h), so an executable's
 * PQconnectdb would not be the one called: its pointer is replaced once
 * libpq is loaded. */
static PGconn *no_connectdb(const char *conninfo) {
  (void)conninfo;
  return NULL;
}

/* The executable's definitions win over the shared libraries' for every
 * call in this program. */
redisContext *redisConnectWithTimeout(const char *ip, int port, const struct timeval tv) {
  (void)ip;
  (void)port;
  (void)tv;
  return NULL;
}
redisContext *redisConnectUnixWithTimeout(const char *path, const struct timeval tv) {
  (void)path;
  (void)tv;
  return NULL;
}
/* sqlite_open refuses a library without threads before it makes the
 * database's directory or opens the file. */
int sqlite3_threadsafe(void) { return 0; }

static void one(const char *url) {
  char err[1024], red[1024];
  store_t *s = NULL;
  if (!store_open(url, &s, err, sizeof(err))) store_close(s);
  store_watch_t *w = NULL;
  if (!store_watch_open(url, &w, err, sizeof(err))) store_watch_close(w);
  config_redact_url(url, red, sizeof(red));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 8192) return 0;
  /* Without libpq every postgresql:// URL fails before it is parsed, which
   * is no test of the parser: fail loudly instead. */
  if (lazy_PQconnectdb != no_connectdb) {
    char err[320];
    if (pq_lazy_load(err, sizeof(err))) {
      fprintf(stderr, "fuzz_store_url: %s\n", err);
      abort();
    }
    lazy_PQconnectdb = no_connectdb;
  }
  char *buf = fuzz_strndup(data, size);
  for (char *p = buf; p;) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = '\0';
    one(p);
    p = nl ? nl + 1 : NULL;
  }
  free(buf);
  return 0;
}
