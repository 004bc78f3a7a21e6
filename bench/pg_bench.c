/* pg_bench: claim + complete throughput on PostgreSQL, through spiderd's
 * store API (store/store.h) as a node's dispatcher makes the calls, and the
 * same loop as hand-made Scrapyd clusters write it (raw libpq, a table lock
 * per pop) for comparison.
 *
 * Build (after `cmake --build build`; bench/pg_bench.sh does this):
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Isrc $(pkg-config --cflags icu-i18n) \
 *     bench/pg_bench.c build/libspiderd_lib.a \
 *     $(pkg-config --libs libuv libmicrohttpd jansson sqlite3 inih libzip libpq hiredis) \
 *     -lpthread -lm -ldl -o /tmp/pg_bench
 *
 * Usage: pg_bench -u STORE_URL -m MODE [options]
 *   -u URL     postgresql://...[?schema=NAME] (raw libpq gets the same server
 *              and sets search_path to NAME)
 *   -m MODE    cycle:   every worker loops claim -> finish through the store
 *                       API, its own store_t (one connection) per thread;
 *              lock:    the hand-made pop on a plain table `q` (raw libpq):
 *                       BEGIN; LOCK TABLE q IN EXCLUSIVE MODE; SELECT ...
 *                       ORDER BY priority DESC, id LIMIT 1; UPDATE; COMMIT,
 *                       then the completion UPDATE in its own transaction;
 *              fill:    only inserts -p pending jobs (store API) and exits.
 *   -c N       workers (connections), default 8
 *   -b N       jobs per claim (store_job_claim max / LIMIT), default 1. With
 *              1, each claim is one transaction and each finish another;
 *              with N > 1 the N finishes share one transaction.
 *   -t auto|tx how a single-job claim and finish are made transactions:
 *              tx (default): store_tx_begin / call / store_tx_commit, as the
 *              daemon's store threads do; auto: the bare call (the store's
 *              autocommit path).
 *   -d S       measured seconds (default 60), -w S window (default 10)
 *   -p N       pending jobs to keep: filled before the start, and a producer
 *              thread (its own connection) tops the table up to N every
 *              100 ms in transactions of 500 inserts (default 50000; 0 = no
 *              producer and no fill)
 *   -k N       a janitor thread deletes ended jobs beyond the newest N every
 *              3 s (store_jobs_prune, as the daemon's finished_to_keep does;
 *              default 100; -1 = none: history grows)
 *   -J fixed   the janitor deletes with the prune query rewritten so its
 *              victims are computed once (raw libpq, see janitor_fixed): what
 *              store_jobs_prune would do after the fix proposed in
 *              bench/README.md; default: store_jobs_prune as shipped
 *   -V S       a thread runs `VACUUM jobs` every S seconds (raw libpq): what
 *              a node could do where autovacuum's naptime (server-wide, 1 min
 *              by default) is too slow for a hot queue (default 0 = none)
 *   -s MS      start at this wall-clock time (ms since the epoch): several
 *              processes (the "nodes") measure the same window
 *   -n NAME    node name written into claimed jobs (default bench-node)
 *
 * Output: one line per window (`window I A-Bs: RATE/s`), then a summary
 * line `result mode=... jobs=N seconds=S rate=R/s ...` that pg_bench.sh
 * parses. A rate counts jobs both claimed and finished.
 */
#include <errno.h>
#include <getopt.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "store/store.h"

static const char *g_url;
static char g_conninfo[1024];
static char g_schema[128];
static const char *g_mode = "cycle";
static const char *g_node = "bench-node";
static int g_conns = 8, g_batch = 1, g_autocommit = 0;
static double g_seconds = 60, g_window = 10;
static long g_pending = 50000;
static long g_keep = 100;
static int64_t g_start_at;
static double g_vacuum;
static int g_janitor_fixed;
static atomic_long g_vacuums;

static atomic_long g_done;      /* jobs claimed and finished */
static atomic_long g_empty;     /* claims that found nothing */
static atomic_long g_errors;
static atomic_long g_inserted;
static atomic_long g_pruned;
static atomic_int g_stop;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc) {
  fprintf(stderr, "pg_bench: %s: %s\n", what, spd_strerror(rc));
  exit(1);
}

static store_t *open_store(void) {
  store_t *s;
  char err[512];
  int rc = store_open(g_url, &s, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "pg_bench: store_open %s: %s\n", g_url, err);
    exit(1);
  }
  return s;
}

/* The URL without spiderd's ?schema=NAME, for libpq; the schema apart. */
static void split_url(void) {
  snprintf(g_conninfo, sizeof(g_conninfo), "%s", g_url);
  char *q = strstr(g_conninfo, "schema=");
  if (!q) return;
  char *v = q + strlen("schema=");
  size_t n = strcspn(v, "&");
  snprintf(g_schema, sizeof(g_schema), "%.*s", (int)n, v);
  /* drop "schema=NAME" and its separator */
  char *end = v + n;
  if (*end == '&') end++;
  memmove(q, end, strlen(end) + 1);
  size_t len = strlen(g_conninfo);
  if (len && (g_conninfo[len - 1] == '?' || g_conninfo[len - 1] == '&'))
    g_conninfo[len - 1] = 0;
}

static PGconn *raw_connect(void) {
  PGconn *c = PQconnectdb(g_conninfo);
  if (PQstatus(c) != CONNECTION_OK) {
    fprintf(stderr, "pg_bench: connect: %s", PQerrorMessage(c));
    exit(1);
  }
  if (g_schema[0]) {
    char sql[256];
    snprintf(sql, sizeof(sql), "SET search_path TO \"%s\"", g_schema);
    PGresult *r = PQexec(c, sql);
    PQclear(r);
  }
  return c;
}

static PGresult *raw_ok(PGconn *c, PGresult *r, const char *what) {
  ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    fprintf(stderr, "pg_bench: %s: %s", what, PQresultErrorMessage(r));
    exit(1);
  }
  return r;
}

static void raw_exec(PGconn *c, const char *sql) {
  PQclear(raw_ok(c, PQexec(c, sql), sql));
}

static long raw_count(PGconn *c, const char *sql) {
  PGresult *r = raw_ok(c, PQexec(c, sql), sql);
  long n = strtol(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  return n;
}

/* ---- the store API ---- */

static void job_template(job_t *j, char *jobid, size_t cap, long seq) {
  job_init(j);
  snprintf(jobid, cap, "b%ld-%ld", (long)getpid(), seq);
  j->jobid = jobid;
  j->project = "benchproj";
  j->spider = "quick";
  j->state = JOB_PENDING;
}

/* Inserts n pending jobs through the store API in transactions of 500. */
static void insert_jobs(store_t *s, long n) {
  static atomic_long seq;
  while (n > 0) {
    long k = n > 500 ? 500 : n;
    int rc = store_tx_begin(s);
    if (rc) die("tx begin (insert)", rc);
    for (long i = 0; i < k; i++) {
      job_t j;
      char jobid[48];
      job_template(&j, jobid, sizeof(jobid), atomic_fetch_add(&seq, 1));
      if ((rc = store_job_insert(s, &j))) die("insert", rc);
    }
    if ((rc = store_tx_commit(s))) die("tx commit (insert)", rc);
    atomic_fetch_add(&g_inserted, k);
    n -= k;
  }
}

static long pending_now(PGconn *c) {
  return raw_count(c, g_mode[0] == 'l' ? "SELECT count(*) FROM q WHERE state = 0"
                                         : "SELECT count(*) FROM jobs WHERE state = 0");
}

static void *producer_main(void *arg) {
  store_t *s = g_mode[0] == 'l' ? NULL : open_store();
  PGconn *c = raw_connect();
  while (!atomic_load(&g_stop)) {
    long have = pending_now(c);
    if (have < g_pending) {
      long want = g_pending - have;
      if (s) {
        insert_jobs(s, want);
      } else {
        char sql[256];
        snprintf(sql, sizeof(sql),
                 "INSERT INTO q (priority, state, payload) SELECT 0, 0, 'quick' "
                 "FROM generate_series(1, %ld)", want);
        raw_exec(c, sql);
        atomic_fetch_add(&g_inserted, want);
      }
    }
    usleep(100000);
  }
  if (s) store_close(s);
  PQfinish(c);
  return NULL;
}

/* store_jobs_prune's DELETE (src/store/pg/jobs.c) with one change: the
 * victims are an initplan (= ANY(ARRAY(...))), evaluated once, instead of an
 * IN (subquery) the planner may run again for every ended row when its
 * statistics say there are none (a Nested Loop Semi Join: quadratic). */
static long janitor_fixed(PGconn *c) {
  char keep[32];
  snprintf(keep, sizeof(keep), "%ld", g_keep);
  const char *pv[1] = {keep};
  PGresult *r = raw_ok(
      c,
      PQexecParams(c,
                   "DELETE FROM jobs WHERE state >= 2 AND id = ANY (ARRAY("
                   "SELECT id FROM (SELECT id, end_ms, count(*) FILTER (WHERE start_ms <> 0) "
                   "OVER (ORDER BY end_ms DESC, id DESC ROWS BETWEEN UNBOUNDED PRECEDING AND "
                   "1 PRECEDING) AS newer FROM jobs WHERE state >= 2 AND project = 'benchproj' "
                   "AND spider = 'quick') t WHERE newer >= $1::bigint AND NOT EXISTS (SELECT 1 "
                   "FROM jobs c WHERE c.parent_id = t.id AND c.parent_id <> 0 AND c.state < 2) "
                   "ORDER BY end_ms DESC, id DESC LIMIT 5000)) RETURNING id",
                   1, NULL, pv, NULL, NULL, 0),
      "fixed prune");
  long n = PQntuples(r);
  PQclear(r);
  return n;
}

/* The daemon's janitor: ended jobs beyond the newest g_keep go. */
static void *janitor_main(void *arg) {
  if (g_janitor_fixed) {
    PGconn *c = raw_connect();
    while (!atomic_load(&g_stop)) {
      for (int i = 0; i < 30 && !atomic_load(&g_stop); i++) usleep(100000);
      long n;
      do {
        n = janitor_fixed(c);
        atomic_fetch_add(&g_pruned, n);
      } while (n == 5000 && !atomic_load(&g_stop));
    }
    PQfinish(c);
    return NULL;
  }
  store_t *s = open_store();
  while (!atomic_load(&g_stop)) {
    for (int i = 0; i < 30 && !atomic_load(&g_stop); i++) usleep(100000);
    for (;;) {
      job_list_t del = {0};
      int rc = store_jobs_prune(s, NULL, 0, (int)g_keep, 0, 5000, &del);
      if (rc) die("prune", rc);
      size_t n = del.n;
      job_list_release(&del);
      atomic_fetch_add(&g_pruned, (long)n);
      if (n < 5000 || atomic_load(&g_stop)) break;
    }
  }
  store_close(s);
  return NULL;
}

static void *vacuum_main(void *arg) {
  PGconn *c = raw_connect();
  while (!atomic_load(&g_stop)) {
    for (double t = 0; t < g_vacuum && !atomic_load(&g_stop); t += 0.05) usleep(50000);
    if (atomic_load(&g_stop)) break;
    raw_exec(c, "VACUUM jobs");
    atomic_fetch_add(&g_vacuums, 1);
  }
  PQfinish(c);
  return NULL;
}

static void wait_start(void) {
  while (now_ms() < g_start_at) usleep(1000);
}

static void *cycle_main(void *arg) {
  store_t *s = arg;
  job_list_t l = {0};
  wait_start();
  while (!atomic_load(&g_stop)) {
    int rc;
    int64_t t = now_ms();
    job_list_release(&l);
    if (g_batch == 1 && !g_autocommit) {
      if ((rc = store_tx_begin(s))) die("tx begin", rc);
      rc = store_job_claim(s, g_node, 1, t, &l);
      if (rc) {
        store_tx_rollback(s);
      } else {
        rc = store_tx_commit(s);
      }
    } else {
      rc = store_job_claim(s, g_node, (size_t)g_batch, t, &l);
    }
    if (rc) {
      atomic_fetch_add(&g_errors, 1);
      continue;
    }
    if (l.n == 0) {
      atomic_fetch_add(&g_empty, 1);
      usleep(1000);
      continue;
    }
    int in_tx = g_batch > 1 || !g_autocommit;
    if (in_tx && (rc = store_tx_begin(s))) die("tx begin", rc);
    for (size_t i = 0; i < l.n && !rc; i++)
      rc = store_job_finish(s, l.v[i].id, JOB_FINISHED, now_ms(), 0, 0, NULL);
    if (in_tx) {
      if (rc) store_tx_rollback(s);
      else rc = store_tx_commit(s);
    }
    if (rc) {
      atomic_fetch_add(&g_errors, 1);
      continue;
    }
    if (!atomic_load(&g_stop)) atomic_fetch_add(&g_done, (long)l.n);
  }
  job_list_release(&l);
  return NULL;
}

/* ---- the hand-made pop: a table lock per claim ---- */

static void lock_schema(void) {
  PGconn *c = raw_connect();
  raw_exec(c, "DROP TABLE IF EXISTS q");
  raw_exec(c,
           "CREATE TABLE q (id BIGSERIAL PRIMARY KEY, priority DOUBLE PRECISION NOT NULL, "
           "state INTEGER NOT NULL, payload TEXT, node TEXT, start_ms BIGINT NOT NULL DEFAULT 0, "
           "end_ms BIGINT NOT NULL DEFAULT 0)");
  raw_exec(c, "CREATE INDEX q_pending ON q (priority DESC, id) WHERE state = 0");
  PQfinish(c);
}

static void *lock_main(void *arg) {
  PGconn *c = arg;
  PGresult *r;
  PQclear(raw_ok(c, PQprepare(c, "pick",
                              "SELECT id FROM q WHERE state = 0 "
                              "ORDER BY priority DESC, id LIMIT $1", 0, NULL), "prepare"));
  PQclear(raw_ok(c, PQprepare(c, "take",
                              "UPDATE q SET state = 1, node = $2, start_ms = $3 "
                              "WHERE id = ANY($1::bigint[])", 0, NULL), "prepare"));
  PQclear(raw_ok(c, PQprepare(c, "done",
                              "UPDATE q SET state = 2, end_ms = $2 "
                              "WHERE id = ANY($1::bigint[])", 0, NULL), "prepare"));
  char lim[16], ts[32], ids[4096];
  snprintf(lim, sizeof(lim), "%d", g_batch);
  wait_start();
  while (!atomic_load(&g_stop)) {
    raw_exec(c, "BEGIN");
    raw_exec(c, "LOCK TABLE q IN EXCLUSIVE MODE");
    const char *pv[3] = {lim};
    r = raw_ok(c, PQexecPrepared(c, "pick", 1, pv, NULL, NULL, 0), "pick");
    int n = PQntuples(r);
    size_t off = 0;
    ids[off++] = '{';
    for (int i = 0; i < n; i++)
      off += (size_t)snprintf(ids + off, sizeof(ids) - off, "%s%s", i ? "," : "",
                              PQgetvalue(r, i, 0));
    ids[off++] = '}';
    ids[off] = 0;
    PQclear(r);
    if (n == 0) {
      raw_exec(c, "COMMIT");
      atomic_fetch_add(&g_empty, 1);
      usleep(1000);
      continue;
    }
    snprintf(ts, sizeof(ts), "%lld", (long long)now_ms());
    const char *tv[3] = {ids, g_node, ts};
    PQclear(raw_ok(c, PQexecPrepared(c, "take", 3, tv, NULL, NULL, 0), "take"));
    raw_exec(c, "COMMIT");
    snprintf(ts, sizeof(ts), "%lld", (long long)now_ms());
    const char *dv[2] = {ids, ts};
    PQclear(raw_ok(c, PQexecPrepared(c, "done", 2, dv, NULL, NULL, 0), "done"));
    if (!atomic_load(&g_stop)) atomic_fetch_add(&g_done, n);
  }
  return NULL;
}

/* ---- main ---- */

int main(int argc, char **argv) {
  int opt;
  while ((opt = getopt(argc, argv, "u:m:c:b:t:d:w:p:k:s:n:V:J:")) != -1) {
    switch (opt) {
    case 'u': g_url = optarg; break;
    case 'm': g_mode = optarg; break;
    case 'c': g_conns = atoi(optarg); break;
    case 'b': g_batch = atoi(optarg); break;
    case 't': g_autocommit = !strcmp(optarg, "auto"); break;
    case 'd': g_seconds = atof(optarg); break;
    case 'w': g_window = atof(optarg); break;
    case 'p': g_pending = atol(optarg); break;
    case 'k': g_keep = atol(optarg); break;
    case 's': g_start_at = atoll(optarg); break;
    case 'n': g_node = optarg; break;
    case 'V': g_vacuum = atof(optarg); break;
    case 'J': g_janitor_fixed = !strcmp(optarg, "fixed"); break;
    default:
      fprintf(stderr, "usage: see the header of bench/pg_bench.c\n");
      return 2;
    }
  }
  if (!g_url || g_conns < 1 || g_batch < 1 || g_batch > 200) {
    fprintf(stderr, "usage: pg_bench -u URL -m cycle|lock|fill [options]\n");
    return 2;
  }
  log_set_level("warning");
  split_url();
  int lock = !strcmp(g_mode, "lock");

  if (!strcmp(g_mode, "fill")) {
    store_t *s = open_store();
    insert_jobs(s, g_pending);
    store_close(s);
    printf("filled %ld\n", g_pending);
    return 0;
  }

  /* Open every connection first (the first open applies the schema and
   * creates the ?schema= one). */
  store_t *first = open_store();
  if (lock) lock_schema(); /* a fresh plain table q */
  void **args = calloc((size_t)g_conns, sizeof(*args));
  for (int i = 0; i < g_conns; i++) args[i] = lock ? (void *)raw_connect() : (void *)open_store();
  if (g_pending > 0) {
    PGconn *c = raw_connect();
    long have = pending_now(c);
    if (have < g_pending) {
      if (lock) {
        char sql[256];
        snprintf(sql, sizeof(sql),
                 "INSERT INTO q (priority, state, payload) SELECT 0, 0, 'quick' "
                 "FROM generate_series(1, %ld)", g_pending - have);
        raw_exec(c, sql);
      } else {
        insert_jobs(first, g_pending - have);
      }
    }
    raw_exec(c, lock ? "VACUUM ANALYZE q" : "VACUUM ANALYZE jobs");
    PQfinish(c);
  }
  atomic_store(&g_inserted, 0);

  pthread_t *th = calloc((size_t)g_conns, sizeof(*th));
  pthread_t prod, jan, vac;
  int have_vac = !lock && g_vacuum > 0;
  if (have_vac) pthread_create(&vac, NULL, vacuum_main, NULL);
  int have_prod = g_pending > 0, have_jan = !lock && g_keep >= 0;
  if (have_prod) pthread_create(&prod, NULL, producer_main, NULL);
  if (have_jan) pthread_create(&jan, NULL, janitor_main, NULL);
  if (!g_start_at) g_start_at = now_ms() + 200;
  for (int i = 0; i < g_conns; i++)
    pthread_create(&th[i], NULL, lock ? lock_main : cycle_main, args[i]);

  wait_start();
  double t0 = mono();
  int nwin = (int)(g_seconds / g_window + 0.5);
  if (nwin < 1) nwin = 1;
  double *rates = calloc((size_t)nwin, sizeof(*rates));
  long prev = 0;
  for (int w = 0; w < nwin; w++) {
    double until = t0 + g_window * (w + 1);
    double left;
    while ((left = until - mono()) > 0) usleep(left > 0.05 ? 50000 : (useconds_t)(left * 1e6));
    long d = atomic_load(&g_done);
    rates[w] = (double)(d - prev) / g_window;
    prev = d;
    printf("window %d %.0f-%.0fs: %.0f/s\n", w + 1, g_window * w, g_window * (w + 1), rates[w]);
    fflush(stdout);
  }
  double elapsed = mono() - t0;
  long done = atomic_load(&g_done);
  atomic_store(&g_stop, 1);
  for (int i = 0; i < g_conns; i++) pthread_join(th[i], NULL);
  if (have_prod) pthread_join(prod, NULL);
  if (have_jan) pthread_join(jan, NULL);
  if (have_vac) pthread_join(vac, NULL);
  double decay = nwin > 1 && rates[0] > 0 ? 100.0 * (rates[0] - rates[nwin - 1]) / rates[0] : 0;
  printf("result mode=%s janitor=%s node=%s conns=%d batch=%d tx=%s jobs=%ld seconds=%.1f rate=%.0f/s "
         "first=%.0f last=%.0f decay=%.1f%% empty=%ld errors=%ld inserted=%ld pruned=%ld vacuums=%ld\n",
         g_mode, g_keep < 0 ? "none" : g_janitor_fixed ? "fixed" : "store", g_node, g_conns, g_batch, g_autocommit ? "auto" : "tx", done, elapsed,
         (double)done / elapsed, rates[0], rates[nwin - 1], decay, atomic_load(&g_empty),
         atomic_load(&g_errors), atomic_load(&g_inserted), atomic_load(&g_pruned),
         atomic_load(&g_vacuums));
  for (int i = 0; i < g_conns; i++) {
    if (lock) PQfinish(args[i]);
    else store_close(args[i]);
  }
  store_close(first);
  return atomic_load(&g_errors) ? 1 : 0;
}
