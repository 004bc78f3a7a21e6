/* health_bench: what the health check (flow/health.h) adds to a job's end
 * on a large history: a SQLite store holds N ended jobs of S spiders (each
 * with the stats a crawl writes), then K more jobs end through jobs_end,
 * timed, first with the check as it runs and then only the check
 * (health_rate) for the same jobs.
 *
 * Build and run (optimised, no sanitizers), after `make build`:
 *   gcc -std=gnu11 -O2 -D_GNU_SOURCE -Isrc bench/health_bench.c build/libspiderd_lib.a \
 *     $(pkg-config --libs libuv libmicrohttpd jansson sqlite3 inih libzip hiredis zlib) \
 *     -lpthread -lm -ldl -o /tmp/health_bench
 *   /tmp/health_bench [-n JOBS] [-s SPIDERS] [-k ENDS]
 *
 * The store is a SQLite file in a new temporary directory, removed at the
 * end.
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "flow/health.h"
#include "flow/jobs.h"
#include "log.h"
#include "store/store.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static int rm_entry(const char *p, const struct stat *st, int type, struct FTW *f) {
  (void)st, (void)type, (void)f;
  return remove(p);
}

/* A job of spider i, ended or running, as a crawl leaves it. */
static void make_job(job_t *j, long i, int spiders) {
  char name[32], jobid[40];
  job_init(j);
  snprintf(name, sizeof(name), "spider%ld", i % spiders);
  snprintf(jobid, sizeof(jobid), "job%ld", i);
  j->jobid = strdup(jobid);
  j->project = strdup("bench");
  j->spider = strdup(name);
  j->args = json_pack("{s:s}", "page", "all");
  j->settings = json_object();
  j->state = JOB_RUNNING;
  j->start_ms = 1000 + i;
  j->created_ms = 1000 + i;
}

static json_t *stats(long items) {
  return json_pack("{s:I, s:i, s:I, s:s, s:{s:f, s:f}}", "items", (json_int_t)items, "errors", 1,
                   "requests", (json_int_t)items + 5, "finish_reason", "finished",
                   "item_fields", "name", 1.0, "price", 0.98);
}

static int fill(store_t *s, long n, int spiders) {
  for (long i = 0; i < n; i += 10000) {
    int rc = store_tx_begin(s);
    for (long k = i; !rc && k < i + 10000 && k < n; k++) {
      job_t j;
      make_job(&j, k, spiders);
      rc = store_job_insert(s, &j);
      json_t *st = stats(480 + k % 40);
      if (!rc) rc = store_job_finish(s, j.id, JOB_FINISHED, 2000 + k, 0, 0, st);
      json_decref(st);
      job_release(&j);
    }
    if (rc) return rc;
    if ((rc = store_tx_commit(s))) return rc;
  }
  return 0;
}

int main(int argc, char **argv) {
  long n = 1000000, k = 1000;
  int spiders = 1000, opt;
  while ((opt = getopt(argc, argv, "n:s:k:")) != -1) {
    if (opt == 'n') n = atol(optarg);
    else if (opt == 's') spiders = atoi(optarg);
    else if (opt == 'k') k = atol(optarg);
    else return 2;
  }
  char dir[] = "/tmp/health_bench-XXXXXX", url[256], err[256];
  if (!mkdtemp(dir)) return 1;
  snprintf(url, sizeof(url), "sqlite:%s/bench.db", dir);
  log_set_level("warning");
  store_t *s = NULL;
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  int rc = store_open(url, &s, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  double t0 = now_s();
  if ((rc = fill(s, n, spiders))) {
    fprintf(stderr, "fill: %d\n", rc);
    return 1;
  }
  printf("history: %ld ended jobs of %d spiders in %.1f s\n", n, spiders, now_s() - t0);
  double t_end = 0, t_rate = 0;
  for (int pass = 0; pass < 2 && !rc; pass++) {
    for (long i = 0; i < k && !rc; i++) {
      job_t j;
      make_job(&j, n + i, spiders);
      json_t *st = stats(i % 10 ? 490 : 3);
      rc = store_job_insert(s, &j);
      double a = now_s();
      if (!rc && pass == 0) {
        jobs_end_t e = {.job = &j, .state = JOB_FINISHED, .end_ms = 9000000 + i, .stats = st};
        rc = store_tx_begin(s);
        if (!rc) rc = jobs_end(s, &e);
        if (!rc) rc = store_tx_commit(s);
        t_end += now_s() - a;
      } else if (!rc) {
        health_verdict_t v;
        rc = health_rate(s, &j, JOB_FINISHED, st, 9000000 + i, NULL, &v);
        health_verdict_release(&v);
        t_rate += now_s() - a;
      }
      json_decref(st);
      job_release(&j);
    }
  }
  if (rc) fprintf(stderr, "ends: %d\n", rc);
  printf("jobs_end with the check: %.3f ms per job (%ld jobs)\n", t_end * 1000 / k, k);
  printf("the check alone (health_rate): %.3f ms per job\n", t_rate * 1000 / k);
  store_close(s);
  nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
  return rc ? 1 : 0;
}
