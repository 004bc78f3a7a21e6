/* The store contract tests' fixture: a fresh, empty store per test, on the
 * backend SPIDERD_TEST_STORE_URL names (see test_store.c), or a SQLite file
 * in a temporary directory. Included by each contract test file. */
#ifndef SPIDERD_TEST_STORE_FX_H
#define SPIDERD_TEST_STORE_FX_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

struct fx {
  char dir[256];
  char url[512];
  int sqlite_default; /* the URL is our own SQLite file in dir */
  int nurls;
  store_t *s;
};

/* Builds a fresh store URL; name makes it unique within the test. */
static void fx_url(struct fx *f, const char *name, char *out, size_t len) {
  const char *tmpl = getenv("SPIDERD_TEST_STORE_URL");
  if (!tmpl || !*tmpl) {
    snprintf(out, len, "sqlite:%s/%s.db", f->dir, name);
    return;
  }
  const char *hole = strstr(tmpl, "{}");
  if (!hole) {
    snprintf(out, len, "%s", tmpl);
    return;
  }
  /* The temp dir's random suffix keeps runs from colliding too. */
  snprintf(out, len, "%.*s%s_%s%s", (int)(hole - tmpl), tmpl,
           strrchr(f->dir, '-') + 1, name, hole + 2);
}

static int fx_setup(void **state) {
  struct fx *f = calloc(1, sizeof(*f));
  char err[256];
  assert_non_null(f);
  const char *tmp = getenv("TMPDIR");
  snprintf(f->dir, sizeof(f->dir), "%s/spiderd-test-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  assert_non_null(mkdtemp(f->dir));
  const char *env = getenv("SPIDERD_TEST_STORE_URL");
  f->sqlite_default = !env || !*env;
  fx_url(f, "main", f->url, sizeof(f->url));
  int rc = store_open(f->url, &f->s, err, sizeof(err));
  if (rc) fail_msg("store_open(%s): %s", f->url, err);
  *state = f;
  return 0;
}

static int fx_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  return remove(path);
}

static int fx_teardown(void **state) {
  struct fx *f = *state;
  store_close(f->s);
  nftw(f->dir, fx_rm, 16, FTW_DEPTH | FTW_PHYS);
  free(f);
  return 0;
}

/* A job of project/spider inserted in state st (node NULL: none; start_ms
 * 0: it never started); its id. jobid NULL: a fresh one. */
static inline int64_t fx_job(store_t *s, const char *jobid, const char *project,
                             const char *spider, job_state_t st, const char *node,
                             int64_t start_ms, int64_t end_ms) {
  static int seq;
  char fresh[32];
  job_t j;
  job_init(&j);
  snprintf(fresh, sizeof(fresh), "fxjob%d", ++seq);
  j.jobid = strdup(jobid ? jobid : fresh);
  j.project = strdup(project);
  j.spider = strdup(spider);
  j.state = st;
  j.node = node ? strdup(node) : NULL;
  j.start_ms = start_ms;
  j.end_ms = end_ms;
  assert_int_equal(store_job_insert(s, &j), 0);
  int64_t id = j.id;
  job_release(&j);
  return id;
}

/* Job id as stored (the caller releases it). */
static inline job_t fx_get(store_t *s, int64_t id) {
  job_t j;
  assert_int_equal(store_job_get(s, id, &j), 0);
  return j;
}

static inline store_t *fx_open(const char *url) {
  char err[256];
  store_t *s = NULL;
  int rc = store_open(url, &s, err, sizeof(err));
  if (rc) fail_msg("store_open(%s): %s", url, err);
  return s;
}

#endif
