/* Contract tests for store.h's nodes, cancel requests, eggs in the store
 * and notifications, and for claims and reaps from several connections at
 * once. Public API only, so every backend runs them (see store_fx.h for
 * SPIDERD_TEST_STORE_URL); eggs and notifications exist on shared stores
 * only, and on SQLite the tests check they answer -ENOTSUP. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>

#include "error.h"
#include "store_fx.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void beat(store_t *s, const char *name, int64_t now_ms, int *was_dead) {
  node_info_t n = {.name = (char *)name, .url = (char *)"http://h:6800", .slots = 4,
                   .running = 1, .started_ms = 100};
  assert_int_equal(store_node_beat(s, &n, now_ms, was_dead), 0);
}

/* A job inserted in a given state on a given node. */
static int64_t add_job(store_t *s, const char *jobid, job_state_t st, const char *node,
                       int64_t start_ms, int64_t end_ms) {
  return fx_job(s, jobid, "p", "s", st, node, start_ms, end_ms);
}

static job_t get(store_t *s, int64_t id) { return fx_get(s, id); }

static const node_info_t *find_node(const node_list_t *l, const char *name) {
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->v[i].name, name)) return &l->v[i];
  return NULL;
}

/* ---- beats and the node list ---- */

static void test_node_beat(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  node_list_t l = {0};
  int dead = -1;

  assert_int_equal(store_nodes_list(s, &l), 0);
  assert_int_equal(l.n, 0);

  node_info_t n = {.name = "n-a", .url = "http://a:6800", .slots = 8, .running = 3,
                   .started_ms = 111, .version = "1.2.3"};
  assert_int_equal(store_node_beat(s, &n, 1000, &dead), 0);
  assert_int_equal(dead, 0);
  assert_int_equal(store_nodes_list(s, &l), 0);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.v[0].name, "n-a");
  assert_string_equal(l.v[0].url, "http://a:6800");
  assert_string_equal(l.v[0].version, "1.2.3");
  assert_int_equal(l.v[0].slots, 8);
  assert_int_equal(l.v[0].running, 3);
  assert_int_equal(l.v[0].started_ms, 111);
  assert_int_equal(l.v[0].heartbeat_ms, 1000);
  assert_int_equal(l.v[0].dead, 0);
  assert_int_equal(l.v[0].draining, 0);
  node_list_release(&l);

  /* A draining node says so with its beat, and says so no more once it
   * takes jobs again. */
  n.draining = 1;
  assert_int_equal(store_node_beat(s, &n, 1200, &dead), 0);
  assert_int_equal(store_nodes_list(s, &l), 0);
  assert_int_equal(l.v[0].draining, 1);
  assert_int_equal(l.v[0].heartbeat_ms, 1200);
  node_list_release(&l);
  n.draining = 0;
  assert_int_equal(store_node_beat(s, &n, 1300, &dead), 0);
  assert_int_equal(store_nodes_list(s, &l), 0);
  assert_int_equal(l.v[0].draining, 0);
  node_list_release(&l);

  /* An upgraded node says its new version. */
  n.version = "1.3.0-rc1";
  assert_int_equal(store_node_beat(s, &n, 1500, &dead), 0);
  assert_int_equal(store_nodes_list(s, &l), 0);
  assert_string_equal(l.v[0].version, "1.3.0-rc1");
  node_list_release(&l);

  /* A beat updates every field; was_dead may be NULL; a NULL url or
   * version (a node that does not say) stays NULL. */
  n = (node_info_t){.name = "n-a", .url = NULL, .slots = 2, .running = 0, .started_ms = 222};
  assert_int_equal(store_node_beat(s, &n, 2000, NULL), 0);
  assert_int_equal(store_nodes_list(s, &l), 0);
  assert_int_equal(l.n, 1);
  assert_null(l.v[0].url);
  assert_null(l.v[0].version);
  assert_int_equal(l.v[0].slots, 2);
  assert_int_equal(l.v[0].running, 0);
  assert_int_equal(l.v[0].started_ms, 222);
  assert_int_equal(l.v[0].heartbeat_ms, 2000);
  node_list_release(&l);

  /* By name, in byte order, appended to what the list holds. */
  beat(s, "n-c", 3000, &dead);
  beat(s, "N-b", 3000, &dead);
  beat(s, "n-b", 3000, &dead);
  assert_int_equal(dead, 0);
  l.v = calloc(1, sizeof(node_info_t));
  l.v[0].name = strdup("sentinel");
  l.n = l.cap = 1;
  assert_int_equal(store_nodes_list(s, &l), 0);
  const char *order[] = {"sentinel", "N-b", "n-a", "n-b", "n-c"};
  assert_int_equal(l.n, N(order));
  for (size_t i = 0; i < N(order); i++) assert_string_equal(l.v[i].name, order[i]);
  node_list_release(&l);

  /* A node needs a name. */
  n = (node_info_t){.name = NULL};
  assert_int_equal(store_node_beat(s, &n, 1, &dead), -EINVAL);
  n.name = "";
  assert_int_equal(store_node_beat(s, &n, 1, &dead), -EINVAL);
  assert_int_equal(store_node_beat(s, NULL, 1, &dead), -EINVAL);
  assert_int_equal(store_nodes_list(s, NULL), -EINVAL);
}

/* ---- reaping ---- */

static void test_nodes_reap(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  job_list_t lost = {0};
  node_list_t nl = {0};
  int dead = -1;

  beat(s, "me", 0, NULL);          /* stale, but self is never reaped */
  beat(s, "old", 1000, NULL);      /* stale */
  beat(s, "fresh", 9000, NULL);    /* alive */
  beat(s, "edge", 5000, NULL);     /* exactly at the limit: alive */
  int64_t o1 = add_job(s, "o1", JOB_RUNNING, "old", 500, 0);
  int64_t o2 = add_job(s, "o2", JOB_RUNNING, "old", 600, 0);
  int64_t ofin = add_job(s, "ofin", JOB_FINISHED, "old", 100, 200);
  int64_t fr = add_job(s, "fr", JOB_RUNNING, "fresh", 700, 0);
  int64_t mine = add_job(s, "mine", JOB_RUNNING, "me", 700, 0);
  int64_t edge = add_job(s, "edge", JOB_RUNNING, "edge", 700, 0);
  int64_t unknown = add_job(s, "unk", JOB_RUNNING, "never-beat", 700, 0);
  int64_t pend = add_job(s, "pend", JOB_PENDING, NULL, 0, 0);

  assert_int_equal(store_nodes_reap(s, "me", 10000, 0, &lost), -EINVAL);
  assert_int_equal(store_nodes_reap(s, NULL, 10000, 5000, &lost), -EINVAL);

  job_t g;
  /* Inside a transaction that rolls back, nothing happened. */
  assert_int_equal(store_tx_begin(s), 0);
  assert_int_equal(store_nodes_reap(s, "me", 10000, 5000, &lost), 0);
  assert_int_equal(lost.n, 2);
  job_list_release(&lost);
  assert_int_equal(store_tx_rollback(s), 0);
  g = get(s, o1);
  assert_int_equal(g.state, JOB_RUNNING);
  job_release(&g);

  /* Appended to what the list holds: whole rows, as they were. */
  lost.v = calloc(1, sizeof(job_t));
  job_init(&lost.v[0]);
  lost.n = 1;
  assert_int_equal(store_nodes_reap(s, "me", 10000, 5000, &lost), 0);
  assert_int_equal(lost.n, 3);
  assert_int_equal(lost.v[0].id, 0);
  int64_t got[2] = {lost.v[1].id, lost.v[2].id};
  assert_true((got[0] == o1 && got[1] == o2) || (got[0] == o2 && got[1] == o1));
  for (size_t i = 1; i < 3; i++) {
    assert_int_equal(lost.v[i].state, JOB_RUNNING);
    assert_int_equal(lost.v[i].end_ms, 0);
    assert_string_equal(lost.v[i].node, "old");
    assert_string_equal(lost.v[i].project, "p");
    assert_string_equal(lost.v[i].spider, "s");
    assert_int_equal(lost.v[i].start_ms, lost.v[i].id == o1 ? 500 : 600);
  }
  job_list_release(&lost);

  /* In the store they are lost, ended now. */
  int64_t ended[] = {o1, o2};
  for (size_t i = 0; i < N(ended); i++) {
    g = get(s, ended[i]);
    assert_int_equal(g.state, JOB_LOST);
    assert_int_equal(g.end_ms, 10000);
    job_release(&g);
  }
  /* Everything else is untouched. */
  int64_t running[] = {fr, mine, edge, unknown};
  for (size_t i = 0; i < N(running); i++) {
    g = get(s, running[i]);
    assert_int_equal(g.state, JOB_RUNNING);
    assert_int_equal(g.end_ms, 0);
    job_release(&g);
  }
  g = get(s, ofin);
  assert_int_equal(g.state, JOB_FINISHED);
  assert_int_equal(g.end_ms, 200);
  job_release(&g);
  g = get(s, pend);
  assert_int_equal(g.state, JOB_PENDING);
  job_release(&g);

  assert_int_equal(store_nodes_list(s, &nl), 0);
  assert_int_equal(nl.n, 4);
  assert_int_equal(find_node(&nl, "old")->dead, 1);
  assert_int_equal(find_node(&nl, "me")->dead, 0);
  assert_int_equal(find_node(&nl, "fresh")->dead, 0);
  assert_int_equal(find_node(&nl, "edge")->dead, 0);
  assert_int_equal(find_node(&nl, "old")->heartbeat_ms, 1000);
  node_list_release(&nl);

  /* A second reap finds nothing: each job is reported once. */
  assert_int_equal(store_nodes_reap(s, "me", 10000, 5000, &lost), 0);
  assert_int_equal(lost.n, 0);

  /* A dead node that claims before it learns it is dead: its claim is
   * ended at the next reap. */
  assert_int_equal(store_job_claim(s, "old", 1, 10002, &lost), 0);
  assert_int_equal(lost.n, 1);
  assert_int_equal(lost.v[0].id, pend);
  job_list_release(&lost);
  assert_int_equal(store_nodes_reap(s, "me", 10000, 5000, &lost), 0);
  assert_int_equal(lost.n, 1);
  assert_int_equal(lost.v[0].id, pend);
  job_list_release(&lost);

  /* The dead node beats again: alive, and told it had been declared dead
   * (once). */
  beat(s, "old", 11000, &dead);
  assert_int_equal(dead, 1);
  assert_int_equal(store_nodes_list(s, &nl), 0);
  assert_int_equal(find_node(&nl, "old")->dead, 0);
  assert_int_equal(find_node(&nl, "old")->heartbeat_ms, 11000);
  node_list_release(&nl);
  beat(s, "old", 12000, &dead);
  assert_int_equal(dead, 0);
  /* Alive again: its new jobs are not touched. */
  int64_t o3 = add_job(s, "o3", JOB_RUNNING, "old", 12000, 0);
  assert_int_equal(store_nodes_reap(s, "me", 13000, 10000, &lost), 0);
  assert_int_equal(lost.n, 0);
  g = get(s, o3);
  assert_int_equal(g.state, JOB_RUNNING);
  job_release(&g);
}

/* ---- cancel requests ---- */

static void test_cancel_requests(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  job_list_t l = {0};

  int64_t pend = add_job(s, "pend", JOB_PENDING, NULL, 0, 0);
  int64_t r1 = add_job(s, "r1", JOB_RUNNING, "n1", 10, 0);
  int64_t r2 = add_job(s, "r2", JOB_RUNNING, "n1", 20, 0);
  int64_t r3 = add_job(s, "r3", JOB_RUNNING, "n2", 30, 0);
  int64_t fin = add_job(s, "fin", JOB_FINISHED, "n1", 5, 6);

  /* Only running jobs can be asked to stop. */
  assert_int_equal(store_job_cancel_request(s, pend, 100), -ENOENT);
  assert_int_equal(store_job_cancel_request(s, fin, 100), -ENOENT);
  assert_int_equal(store_job_cancel_request(s, r3 + 1000, 100), -ENOENT);

  assert_int_equal(store_jobs_cancel_requested(s, "n1", &l), 0);
  assert_int_equal(l.n, 0);
  assert_int_equal(store_job_cancel_request(s, r2, 100), 0);
  assert_int_equal(store_job_cancel_request(s, r1, 101), 0);
  assert_int_equal(store_job_cancel_request(s, r3, 102), 0);
  assert_int_equal(store_job_cancel_request(s, r3, 103), 0); /* again: fine */

  /* Each node sees its own, by id, whole rows, appended. */
  assert_int_equal(store_jobs_cancel_requested(s, "n1", &l), 0);
  assert_int_equal(l.n, 2);
  assert_int_equal(l.v[0].id, r1);
  assert_int_equal(l.v[1].id, r2);
  assert_int_equal(l.v[0].state, JOB_RUNNING);
  assert_string_equal(l.v[0].node, "n1");
  assert_string_equal(l.v[0].jobid, "r1");
  assert_int_equal(store_jobs_cancel_requested(s, "n2", &l), 0);
  assert_int_equal(l.n, 3);
  assert_int_equal(l.v[2].id, r3);
  job_list_release(&l);
  assert_int_equal(store_jobs_cancel_requested(s, "n3", &l), 0);
  assert_int_equal(l.n, 0);

  /* An ended job is no longer asked for. */
  assert_int_equal(store_job_finish(s, r1, JOB_CANCELLED, 200, -1, 15, NULL), 0);
  assert_int_equal(store_jobs_cancel_requested(s, "n1", &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.v[0].id, r2);
  job_list_release(&l);

  assert_int_equal(store_jobs_cancel_requested(s, NULL, &l), -EINVAL);
  assert_int_equal(store_jobs_cancel_requested(s, "n1", NULL), -EINVAL);
}

/* ---- eggs ---- */

static void egg_expect(store_t *s, const char *project, const char *version, const void *want,
                       size_t wantlen) {
  void *data = NULL;
  size_t len = 99;
  assert_int_equal(store_egg_get(s, project, version, &data, &len), 0);
  assert_int_equal(len, wantlen);
  assert_non_null(data);
  if (wantlen) assert_memory_equal(data, want, wantlen);
  free(data);
}

static void test_eggs(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  egg_list_t l = {0};
  void *data = (void *)1;
  size_t len = 1;
  int n = -1;

  if (!store_shared(s)) {
    /* On disk, not in the store. */
    assert_int_equal(store_egg_put(s, "p", "v", "x", 1, 1), -ENOTSUP);
    assert_int_equal(store_egg_get(s, "p", "v", &data, &len), -ENOTSUP);
    assert_null(data);
    assert_int_equal(store_eggs_list(s, &l), -ENOTSUP);
    assert_int_equal(store_egg_delete(s, "p", NULL, &n), -ENOTSUP);
    skip();
  }

  /* Binary data with NUL bytes and every byte value survives. */
  unsigned char bin[4096];
  for (size_t i = 0; i < sizeof(bin); i++) bin[i] = (unsigned char)(i * 7 + (i >> 8));
  bin[0] = 0;
  bin[100] = 0;
  bin[sizeof(bin) - 1] = 0;
  assert_int_equal(store_egg_put(s, "proj", "r1", bin, sizeof(bin), 1000), 0);
  egg_expect(s, "proj", "r1", bin, sizeof(bin));

  /* Replaced. */
  const char small[] = "PK\0\3\4 egg\0";
  assert_int_equal(store_egg_put(s, "proj", "r1", small, sizeof(small), 2000), 0);
  egg_expect(s, "proj", "r1", small, sizeof(small));
  /* An empty egg is an egg. */
  assert_int_equal(store_egg_put(s, "proj", "empty", NULL, 0, 2100), 0);
  egg_expect(s, "proj", "empty", NULL, 0);

  assert_int_equal(store_egg_get(s, "proj", "nosuch", &data, &len), -ENOENT);
  assert_null(data);
  assert_int_equal(len, 0);
  assert_int_equal(store_egg_get(s, "nosuch", "r1", &data, &len), -ENOENT);

  /* By project then version, in byte order. */
  assert_int_equal(store_egg_put(s, "proj", "r10", "a", 1, 3000), 0);
  assert_int_equal(store_egg_put(s, "proj", "r2", "bb", 2, 3001), 0);
  assert_int_equal(store_egg_put(s, "Other", "z", "ccc", 3, 3002), 0);
  assert_int_equal(store_egg_put(s, "alpha", "1", "dddd", 4, 3003), 0);
  assert_int_equal(store_eggs_list(s, &l), 0);
  struct {
    const char *project, *version;
    int64_t size, created;
  } want[] = {{"Other", "z", 3, 3002},
              {"alpha", "1", 4, 3003},
              {"proj", "empty", 0, 2100},
              {"proj", "r1", sizeof(small), 2000},
              {"proj", "r10", 1, 3000},
              {"proj", "r2", 2, 3001}};
  assert_int_equal(l.n, N(want));
  for (size_t i = 0; i < N(want); i++) {
    assert_string_equal(l.v[i].project, want[i].project);
    assert_string_equal(l.v[i].version, want[i].version);
    assert_int_equal(l.v[i].size, want[i].size);
    assert_int_equal(l.v[i].created_ms, want[i].created);
  }
  egg_list_release(&l);

  /* One version, then the whole project. */
  assert_int_equal(store_egg_delete(s, "proj", "r10", &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(store_egg_get(s, "proj", "r10", &data, &len), -ENOENT);
  egg_expect(s, "proj", "r2", "bb", 2);
  assert_int_equal(store_egg_delete(s, "proj", "r10", &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(store_egg_delete(s, "proj", NULL, &n), 0);
  assert_int_equal(n, 3);
  assert_int_equal(store_egg_delete(s, "proj", NULL, NULL), 0);
  assert_int_equal(store_eggs_list(s, &l), 0);
  assert_int_equal(l.n, 2);
  assert_string_equal(l.v[0].project, "Other");
  assert_string_equal(l.v[1].project, "alpha");
  egg_list_release(&l);
  egg_expect(s, "alpha", "1", "dddd", 4);
  assert_int_equal(store_egg_delete(s, "nosuch", NULL, &n), 0);
  assert_int_equal(n, 0);
}

/* ---- notifications ---- */

/* Waits (up to 5 s) for every bit of `want` to arrive on w. */
static void wait_notes(store_watch_t *w, unsigned want) {
  unsigned got = 0;
  for (int i = 0; i < 500 && (got & want) != want; i++) {
    struct pollfd pfd = {.fd = store_watch_fd(w), .events = POLLIN};
    if (pfd.fd >= 0) poll(&pfd, 1, 10);
    assert_int_equal(store_watch_read(w, &got), 0);
  }
  if ((got & want) != want) fail_msg("notices: got %#x, want %#x", got, want);
}

static void test_notifications(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  store_watch_t *w = NULL;
  job_list_t l = {0};
  char err[256];

  if (!store_shared(s)) {
    assert_int_equal(store_watch_open(f->url, &w, err, sizeof(err)), -ENOTSUP);
    assert_null(w);
    skip();
  }
  assert_int_equal(store_watch_open(f->url, &w, err, sizeof(err)), 0);
  add_job(s, "j", JOB_PENDING, NULL, 0, 0);
  wait_notes(w, STORE_NOTE_JOBS);
  assert_int_equal(store_job_claim(s, "n", 1, 10, &l), 0);
  assert_int_equal(l.n, 1);
  int64_t id = l.v[0].id;
  job_list_release(&l);
  assert_int_equal(store_job_cancel_request(s, id, 20), 0);
  wait_notes(w, STORE_NOTE_CANCEL);
  assert_int_equal(store_job_requeue(s, id), 0);
  wait_notes(w, STORE_NOTE_JOBS);
  assert_int_equal(store_egg_put(s, "p", "v", "x", 1, 30), 0);
  wait_notes(w, STORE_NOTE_EGGS);
  assert_int_equal(store_egg_delete(s, "p", NULL, NULL), 0);
  wait_notes(w, STORE_NOTE_EGGS);
  beat(s, "stale", 0, NULL);
  add_job(s, "r", JOB_RUNNING, "stale", 1, 0);
  /* Inside a transaction the notices wait for the commit. */
  assert_int_equal(store_tx_begin(s), 0);
  assert_int_equal(store_nodes_reap(s, "me", 100000, 1000, &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(store_job_finish(s, l.v[0].id, JOB_LOST, 100000, -1, 0, NULL), 0);
  job_list_release(&l);
  /* A job's end sends nothing of itself (it would serialize commits on
   * PostgreSQL); the daemon notifies when limits wait on it. */
  assert_int_equal(store_notify(s, STORE_NOTE_JOBS), 0);
  assert_int_equal(store_tx_commit(s), 0);
  wait_notes(w, STORE_NOTE_NODES | STORE_NOTE_JOBS);
  store_watch_close(w);
}

/* ---- several connections at once ---- */

struct worker {
  const char *url;
  pthread_barrier_t *bar;
  int64_t *ids;
  size_t n, cap;
  int rc;
};

static void *claimer_run(void *arg) {
  struct worker *w = arg;
  store_t *s = NULL;
  char err[256];
  unsigned seed = (unsigned)(uintptr_t)w ^ (unsigned)time(NULL);
  w->rc = store_open(w->url, &s, err, sizeof(err));
  pthread_barrier_wait(w->bar);
  if (w->rc) return NULL;
  for (;;) {
    job_list_t l = {0};
    w->rc = store_job_claim(s, "n", 1 + (size_t)(rand_r(&seed) % 5), 1, &l);
    if (w->rc || l.n == 0) {
      job_list_release(&l);
      break;
    }
    for (size_t i = 0; i < l.n && w->n < w->cap; i++) w->ids[w->n++] = l.v[i].id;
    job_list_release(&l);
  }
  store_close(s);
  return NULL;
}

static void *reaper_run(void *arg) {
  struct worker *w = arg;
  store_t *s = NULL;
  char err[256];
  w->rc = store_open(w->url, &s, err, sizeof(err));
  pthread_barrier_wait(w->bar);
  if (w->rc) return NULL;
  job_list_t l = {0};
  w->rc = store_nodes_reap(s, "me", 100000, 1000, &l);
  for (size_t i = 0; i < l.n && w->n < w->cap; i++) w->ids[w->n++] = l.v[i].id;
  job_list_release(&l);
  store_close(s);
  return NULL;
}

/* Runs fn on two connections at once; checks that between them they got
 * each of ids[0..n) exactly once. */
static void run_two(struct fx *f, void *(*fn)(void *), const int64_t *ids, size_t n) {
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 2);
  struct worker w[2];
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    w[i] = (struct worker){.url = f->url, .bar = &bar, .cap = n};
    w[i].ids = calloc(n, sizeof(int64_t));
    assert_int_equal(pthread_create(&t[i], NULL, fn, &w[i]), 0);
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&bar);
  unsigned char *seen = calloc(n, 1);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(w[i].rc, 0);
    for (size_t k = 0; k < w[i].n; k++) {
      size_t at = n;
      for (size_t j = 0; j < n; j++)
        if (ids[j] == w[i].ids[k]) at = j;
      assert_true(at < n);
      assert_int_equal(seen[at], 0);
      seen[at] = 1;
    }
  }
  assert_int_equal(w[0].n + w[1].n, n);
  free(seen);
  free(w[0].ids);
  free(w[1].ids);
}

static void test_claim_two_connections(void **state) {
  struct fx *f = *state;
  enum { NJOBS = 200 };
  int64_t ids[NJOBS];
  assert_int_equal(store_tx_begin(f->s), 0);
  for (int i = 0; i < NJOBS; i++) {
    char jobid[16];
    snprintf(jobid, sizeof(jobid), "j%d", i);
    ids[i] = add_job(f->s, jobid, JOB_PENDING, NULL, 0, 0);
  }
  assert_int_equal(store_tx_commit(f->s), 0);
  run_two(f, claimer_run, ids, NJOBS);
  int64_t c[JOB_NSTATES];
  assert_int_equal(store_job_counts(f->s, NULL, c), 0);
  assert_int_equal(c[JOB_PENDING], 0);
  assert_int_equal(c[JOB_RUNNING], NJOBS);
}

/* Two nodes reaping the same dead nodes at once report each job once. */
static void test_reap_two_connections(void **state) {
  struct fx *f = *state;
  enum { NJOBS = 100 };
  int64_t ids[NJOBS];
  beat(f->s, "me", 100000, NULL);
  beat(f->s, "d1", 10, NULL);
  beat(f->s, "d2", 20, NULL);
  assert_int_equal(store_tx_begin(f->s), 0);
  for (int i = 0; i < NJOBS; i++) {
    char jobid[16];
    snprintf(jobid, sizeof(jobid), "j%d", i);
    ids[i] = add_job(f->s, jobid, JOB_RUNNING, i % 2 ? "d1" : "d2", 5, 0);
  }
  assert_int_equal(store_tx_commit(f->s), 0);
  run_two(f, reaper_run, ids, NJOBS);
  int64_t c[JOB_NSTATES];
  assert_int_equal(store_job_counts(f->s, NULL, c), 0);
  assert_int_equal(c[JOB_RUNNING], 0);
  assert_int_equal(c[JOB_LOST], NJOBS);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_node_beat),       T(test_nodes_reap),
      T(test_cancel_requests),
      T(test_eggs),            T(test_notifications),
      T(test_claim_two_connections), T(test_reap_two_connections),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
