/* store_bench: round trips through the store pool (store/async.h), as the
 * daemon's loop makes them: submit, the op runs and commits on a store
 * thread, the callback runs on the loop, and only then the next submit.
 *
 * Build and run (optimised, no sanitizers):
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Isrc bench/store_bench.c src/store/async.c \
 *     src/store/store.c src/store/sqlite/sqlite.c src/store/sqlite/sched.c \
 *     src/store/sqlite/janitor.c src/core/job.c src/core/schedule.c src/core/cron.c \
 *     src/clock.c src/error.c src/log.c $(pkg-config --cflags icu-i18n) \
 *     $(pkg-config --cflags --libs sqlite3 jansson libuv) -lpthread -o /tmp/store_bench
 *   /tmp/store_bench [-n OPS] [-c CLIENTS] [-u URL]
 *
 * Each phase runs OPS round trips, first from one sequential client, then
 * from CLIENTS clients each keeping one op in flight (which is what lets
 * group commit batch them). Without -u the store is a SQLite file in a new
 * temporary directory, removed at the end.
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "error.h"
#include "log.h"
#include "store/async.h"

struct bench;

struct client {
  struct bench *b;
  job_t job;          /* borrows the template's strings and JSON */
  job_list_t claimed; /* claim+finish: the job this client runs */
  char jobid[32];     /* unique per insert, as Scrapyd's job ids are */
  int step;
};

struct bench {
  uv_loop_t loop;
  store_pool_t *pool;
  job_t tmpl;
  const char *name;
  void (*next)(struct client *c);
  int64_t to_submit; /* round trips not yet started */
  int64_t finished;  /* round trips done */
  int64_t total;
  int64_t errors;
  int first_error;
  int64_t seq; /* job ids handed out so far */
};

static int bench_fn_noop(store_t *s, void *arg) { return 0; }

static int bench_fn_insert(store_t *s, void *arg) {
  struct client *c = arg;
  c->job.id = 0;
  c->job.created_ms = 0;
  return store_job_insert(s, &c->job);
}

static int bench_fn_claim(store_t *s, void *arg) {
  struct client *c = arg;
  job_list_release(&c->claimed);
  int rc = store_job_claim(s, "bench-node", 1, 1700000000000LL, &c->claimed);
  if (!rc && c->claimed.n == 0) rc = -ENOENT;
  return rc;
}

static int bench_fn_finish(store_t *s, void *arg) {
  struct client *c = arg;
  return store_job_finish(s, c->claimed.v[0].id, JOB_FINISHED, 1700000001000LL, 0, 0,
                          NULL);
}

static int bench_fn_status(store_t *s, void *arg) {
  struct client *c = arg;
  job_state_t st;
  return store_job_status(s, c->job.project, c->job.jobid, &st);
}

static void bench_done(void *arg, int rc);

static void bench_submit(struct client *c, int kind, store_fn fn) {
  int rc = store_submit(c->b->pool, kind, fn, c, bench_done);
  if (rc) {
    fprintf(stderr, "store_submit: %s\n", spd_strerror(rc));
    exit(1);
  }
}

/* Starts the client's next round trip if the phase still wants one. */
static void bench_start_next(struct client *c) {
  struct bench *b = c->b;
  if (b->to_submit <= 0) return;
  b->to_submit--;
  b->next(c);
}

static void bench_next_noop(struct client *c) {
  bench_submit(c, STORE_WRITE, bench_fn_noop);
}
static void bench_next_insert(struct client *c) {
  snprintf(c->jobid, sizeof(c->jobid), "job-%lld", (long long)c->b->seq++);
  c->job.jobid = c->jobid;
  bench_submit(c, STORE_WRITE, bench_fn_insert);
}
static void bench_next_status(struct client *c) {
  /* a pseudo-random job among those inserted */
  int64_t k = (c->b->to_submit * 7919) % (c->b->seq ? c->b->seq : 1);
  snprintf(c->jobid, sizeof(c->jobid), "job-%lld", (long long)k);
  c->job.jobid = c->jobid;
  bench_submit(c, STORE_READ, bench_fn_status);
}
static void bench_next_cycle(struct client *c) {
  c->step = 0;
  bench_submit(c, STORE_WRITE, bench_fn_claim);
}

static void bench_done(void *arg, int rc) {
  struct client *c = arg;
  struct bench *b = c->b;
  if (rc) {
    if (!b->errors++) b->first_error = rc;
  } else if (b->next == bench_next_cycle && c->step == 0) {
    /* The claim is half of a cycle: finish what it claimed. */
    c->step = 1;
    bench_submit(c, STORE_WRITE, bench_fn_finish);
    return;
  }
  if (++b->finished == b->total) {
    uv_stop(&b->loop);
    return;
  }
  bench_start_next(c);
}

static void bench_phase(struct bench *b, const char *name, void (*next)(struct client *),
                        int64_t ops, int nclients, const char *unit) {
  struct client *cl = calloc((size_t)nclients, sizeof(*cl));
  if (!cl) exit(1);
  b->name = name;
  b->next = next;
  b->to_submit = b->total = ops;
  b->finished = b->errors = 0;
  uint64_t t0 = uv_hrtime();
  for (int i = 0; i < nclients; i++) {
    cl[i].b = b;
    cl[i].job = b->tmpl;
    bench_start_next(&cl[i]);
  }
  uv_run(&b->loop, UV_RUN_DEFAULT);
  double secs = (double)(uv_hrtime() - t0) / 1e9;
  printf("%-34s %3d client%s %8lld %-7s %7.3f s %10.0f %s/s", name, nclients,
         nclients == 1 ? " " : "s", (long long)ops, unit, secs, (double)ops / secs,
         unit);
  if (b->errors)
    printf("  (%lld errors, first: %s)", (long long)b->errors,
           spd_strerror(b->first_error));
  printf("\n");
  fflush(stdout);
  for (int i = 0; i < nclients; i++) job_list_release(&cl[i].claimed);
  free(cl);
}

static int bench_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  return remove(path);
}

int main(int argc, char **argv) {
  int64_t n = 20000;
  int clients = 64, opt;
  const char *url = NULL;
  char dir[256] = "", urlbuf[320], err[256];
  while ((opt = getopt(argc, argv, "n:c:u:")) != -1) {
    switch (opt) {
    case 'n': n = atoll(optarg); break;
    case 'c': clients = atoi(optarg); break;
    case 'u': url = optarg; break;
    default:
      fprintf(stderr, "usage: %s [-n OPS] [-c CLIENTS] [-u URL]\n", argv[0]);
      return 2;
    }
  }
  if (n < 1 || clients < 1) return 2;
  if (!url) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/spiderd-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return 1;
    snprintf(urlbuf, sizeof(urlbuf), "sqlite:%s/bench.db", dir);
    url = urlbuf;
  }
  log_set_level("warning");

  struct bench b = {0};
  uv_loop_init(&b.loop);
  if (store_pool_start(&b.loop, url, &b.pool, err, sizeof(err))) {
    fprintf(stderr, "store_pool_start: %s\n", err);
    return 1;
  }
  job_init(&b.tmpl);
  b.tmpl.jobid = strdup("6487ec79947edab326d6db28a2d86511e8247444");
  b.tmpl.project = strdup("bench");
  b.tmpl.spider = strdup("quotes");
  b.tmpl.args = json_pack("{s:s, s:s}", "start", "1", "category", "books");
  b.tmpl.settings = json_pack("{s:s}", "DOWNLOAD_DELAY", "0.5");

  printf("store %s, %lld ops per phase\n", url, (long long)n);
  bench_phase(&b, "write round trip, no SQL", bench_next_noop, n, 1, "ops");
  bench_phase(&b, "write round trip, no SQL", bench_next_noop, n, clients, "ops");
  bench_phase(&b, "job insert", bench_next_insert, n, 1, "inserts");
  bench_phase(&b, "job insert (group commit)", bench_next_insert, n, clients, "inserts");
  /* Both insert phases left 2n pending jobs: one per cycle below. */
  bench_phase(&b, "claim+finish (2 writes per cycle)", bench_next_cycle, n, 1, "cycles");
  bench_phase(&b, "claim+finish (2 writes per cycle)", bench_next_cycle, n, clients,
              "cycles");
  bench_phase(&b, "status lookup (reader)", bench_next_status, n, 1, "reads");
  bench_phase(&b, "status lookup (reader)", bench_next_status, n, clients, "reads");

  store_pool_stop(b.pool);
  uv_run(&b.loop, UV_RUN_DEFAULT);
  uv_loop_close(&b.loop);
  job_release(&b.tmpl);
  if (dir[0]) nftw(dir, bench_rm, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}
