/* Store contract tests for what an overview of the jobs reads: the text
 * filter of store_jobs_list, store_job_counts_since and
 * store_job_throughput. Runs on every backend (tests/store_suite.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>

#include "error.h"
#include "store_fx.h"

/* A job of project/spider with args (a JSON object text, or NULL). */
static int64_t job_with(store_t *s, const char *jobid, const char *project, const char *spider,
                        const char *args) {
  job_t j;
  job_init(&j);
  j.jobid = strdup(jobid);
  j.project = strdup(project);
  j.spider = strdup(spider);
  j.args = args ? json_loads(args, 0, NULL) : json_object();
  j.settings = json_object();
  j.state = JOB_PENDING;
  assert_int_equal(store_job_insert(s, &j), 0);
  int64_t id = j.id;
  job_release(&j);
  return id;
}

/* The ids store_jobs_list gives for text (newest first), as "3,2,1". */
static void list_text(store_t *s, const char *text, unsigned states, char *out, size_t len) {
  job_list_t l = {0};
  job_filter_t f = {.text = text, .states = states, .newest_first = 1};
  assert_int_equal(store_jobs_list(s, &f, &l), 0);
  size_t w = 0;
  out[0] = '\0';
  for (size_t i = 0; i < l.n; i++)
    w += (size_t)snprintf(out + w, len - w, "%s%lld", i ? "," : "", (long long)l.v[i].id);
  job_list_release(&l);
}

static void test_text_filter(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  char got[256], want[256];
  int64_t a = job_with(s, "JobAlpha", "shop", "books", NULL);
  int64_t b = job_with(s, "j2", "Catalog", "prices", "{\"url\": \"https://Example.com/x\"}");
  int64_t c = job_with(s, "j3", "news", "FrontPage", "{\"k\": \"100%_off\"}");
  int64_t d = job_with(s, "j4", "news", "sport", "{\"example\": \"nothing here\"}");
  (void)d;

  /* The job id, any case. */
  list_text(s, "jobalpha", 0, got, sizeof(got));
  snprintf(want, sizeof(want), "%lld", (long long)a);
  assert_string_equal(got, want);
  /* The project, the spider. */
  list_text(s, "CATALOG", 0, got, sizeof(got));
  snprintf(want, sizeof(want), "%lld", (long long)b);
  assert_string_equal(got, want);
  list_text(s, "ntpa", 0, got, sizeof(got));
  snprintf(want, sizeof(want), "%lld", (long long)c);
  assert_string_equal(got, want);
  /* An arg's value, not its key ("example" is d's key, b's value). */
  list_text(s, "example.COM", 0, got, sizeof(got));
  snprintf(want, sizeof(want), "%lld", (long long)b);
  assert_string_equal(got, want);
  list_text(s, "example", 0, got, sizeof(got));
  snprintf(want, sizeof(want), "%lld", (long long)b);
  assert_string_equal(got, want);
  /* % and _ are plain characters, not patterns. */
  list_text(s, "0%_o", 0, got, sizeof(got));
  snprintf(want, sizeof(want), "%lld", (long long)c);
  assert_string_equal(got, want);
  list_text(s, "%", 0, got, sizeof(got));
  assert_string_equal(got, want);
  list_text(s, "j_", 0, got, sizeof(got));
  assert_string_equal(got, "");
  /* Several matches, newest first; with a state. */
  list_text(s, "news", 0, got, sizeof(got));
  snprintf(want, sizeof(want), "%lld,%lld", (long long)d, (long long)c);
  assert_string_equal(got, want);
  list_text(s, "news", 1u << JOB_FINISHED, got, sizeof(got));
  assert_string_equal(got, "");
  /* "" is no filter; over JOB_FILTER_TEXT_MAX bytes is refused. */
  list_text(s, "", 0, got, sizeof(got));
  snprintf(want, sizeof(want), "%lld,%lld,%lld,%lld", (long long)d, (long long)c,
           (long long)b, (long long)a);
  assert_string_equal(got, want);
  char big[JOB_FILTER_TEXT_MAX + 2];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  job_list_t l = {0};
  job_filter_t fl = {.text = big};
  assert_int_equal(store_jobs_list(s, &fl, &l), -EINVAL);
  big[JOB_FILTER_TEXT_MAX] = '\0';
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  assert_int_equal(l.n, 0);
  job_list_release(&l);
}

static void test_node_filter_newest_first(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  int64_t a = fx_job(s, NULL, "p", "s", JOB_RUNNING, "n1", 1000, 0);
  fx_job(s, NULL, "p", "s", JOB_RUNNING, "n2", 1000, 0);
  int64_t c = fx_job(s, NULL, "p", "s", JOB_FINISHED, "n1", 1000, 2000);
  fx_job(s, NULL, "p", "s", JOB_PENDING, NULL, 0, 0);
  job_list_t l = {0};
  job_filter_t fl = {.node = "n1", .newest_first = 1};
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  assert_int_equal(l.n, 2);
  assert_int_equal(l.v[0].id, c);
  assert_int_equal(l.v[1].id, a);
  job_list_release(&l);
  fl.before_id = c;
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.v[0].id, a);
  job_list_release(&l);
}

static void ended(store_t *s, const char *project, job_state_t st, int64_t end_ms,
                  const char *stats) {
  int64_t id = fx_job(s, NULL, project, "s", JOB_RUNNING, "n1", end_ms - 500, 0);
  json_t *js = stats ? json_loads(stats, 0, NULL) : NULL;
  assert_int_equal(store_job_finish(s, id, st, end_ms, st == JOB_FINISHED ? 0 : 1, 0, js), 0);
  json_decref(js);
}

static void test_counts_since(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  int64_t c[JOB_NSTATES];
  fx_job(s, NULL, "p", "s", JOB_PENDING, NULL, 0, 0);
  fx_job(s, NULL, "q", "s", JOB_PENDING, NULL, 0, 0);
  fx_job(s, NULL, "p", "s", JOB_RUNNING, "n1", 5000, 0);
  ended(s, "p", JOB_FINISHED, 10000, NULL);
  ended(s, "p", JOB_FINISHED, 20000, NULL);
  ended(s, "q", JOB_FAILED, 20000, NULL);
  ended(s, "p", JOB_LOST, 30000, NULL);
  ended(s, "p", JOB_CANCELLED, 9000, NULL);
  /* Cancelled while pending: counts in a window, not in the totals. */
  int64_t never = fx_job(s, NULL, "p", "s", JOB_PENDING, NULL, 0, 0);
  int n = 0;
  job_list_t l = {0};
  job_filter_t pf = {.project = "p", .states = 1u << JOB_PENDING};
  assert_int_equal(store_jobs_list(s, &pf, &l), 0);
  job_t *nj = NULL;
  for (size_t i = 0; i < l.n; i++)
    if (l.v[i].id == never) nj = &l.v[i];
  assert_non_null(nj);
  assert_int_equal(store_job_cancel_pending(s, "p", nj->jobid, 25000, &n), 0);
  assert_int_equal(n, 1);
  job_list_release(&l);

  assert_int_equal(store_job_counts_since(s, NULL, 0, c), 0);
  assert_int_equal(c[JOB_PENDING], 2);
  assert_int_equal(c[JOB_RUNNING], 1);
  assert_int_equal(c[JOB_FINISHED], 2);
  assert_int_equal(c[JOB_FAILED], 1);
  assert_int_equal(c[JOB_CANCELLED], 1);
  assert_int_equal(c[JOB_LOST], 1);

  assert_int_equal(store_job_counts_since(s, NULL, 20000, c), 0);
  assert_int_equal(c[JOB_PENDING], 2);
  assert_int_equal(c[JOB_RUNNING], 1);
  assert_int_equal(c[JOB_FINISHED], 1);
  assert_int_equal(c[JOB_FAILED], 1);
  assert_int_equal(c[JOB_CANCELLED], 1);
  assert_int_equal(c[JOB_LOST], 1);

  assert_int_equal(store_job_counts_since(s, "p", 10000, c), 0);
  assert_int_equal(c[JOB_PENDING], 1);
  assert_int_equal(c[JOB_RUNNING], 1);
  assert_int_equal(c[JOB_FINISHED], 2);
  assert_int_equal(c[JOB_FAILED], 0);
  assert_int_equal(c[JOB_CANCELLED], 1);
  assert_int_equal(c[JOB_LOST], 1);

  assert_int_equal(store_job_counts_since(s, "p", 30001, c), 0);
  assert_int_equal(c[JOB_PENDING], 1);
  assert_int_equal(c[JOB_FINISHED] + c[JOB_FAILED] + c[JOB_CANCELLED] + c[JOB_LOST], 0);
  assert_int_equal(store_job_counts_since(s, NULL, -1, c), -EINVAL);
}

static void test_throughput(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  const int64_t t0 = 1700000000000LL, step = 60000;
  job_bucket_t b[5];
  ended(s, "p", JOB_FINISHED, t0, "{\"item_scraped_count\": 10, \"x\": 1}");
  ended(s, "p", JOB_FINISHED, t0 + step - 1, "{\"item_scraped_count\": 5}");
  ended(s, "q", JOB_FAILED, t0 + step, "{\"item_scraped_count\": 2}");
  ended(s, "p", JOB_CANCELLED, t0 + 2 * step + 5, "{\"item_scraped_count\": 7}");
  ended(s, "p", JOB_FINISHED, t0 + 3 * step, NULL);              /* no stats */
  ended(s, "p", JOB_FINISHED, t0 + 3 * step + 1, "{\"other\": 3}"); /* no count */
  ended(s, "p", JOB_FINISHED, t0 - 1, "{\"item_scraped_count\": 100}");     /* before */
  ended(s, "p", JOB_FINISHED, t0 + 4 * step + 30000, "{\"item_scraped_count\": 100}"); /* after */
  fx_job(s, NULL, "p", "s", JOB_RUNNING, "n1", t0 + 10, 0);

  /* [t0, t0 + 4.5 steps): the last bucket is cut at to. */
  int64_t to = t0 + 4 * step + 30000;
  assert_int_equal(store_job_throughput(s, NULL, t0, to, step, b, 5), 0);
  for (int i = 0; i < 5; i++) assert_int_equal(b[i].t_ms, t0 + i * step);
  assert_int_equal(b[0].finished, 2);
  assert_int_equal(b[0].failed, 0);
  assert_int_equal(b[0].items, 15);
  assert_int_equal(b[1].finished, 0);
  assert_int_equal(b[1].failed, 1);
  assert_int_equal(b[1].items, 2);
  assert_int_equal(b[2].finished, 0); /* cancelled: items only */
  assert_int_equal(b[2].failed, 0);
  assert_int_equal(b[2].items, 7);
  assert_int_equal(b[3].finished, 2);
  assert_int_equal(b[3].items, 0);
  assert_int_equal(b[4].finished + b[4].failed + b[4].items, 0);

  assert_int_equal(store_job_throughput(s, "p", t0, to, step, b, 5), 0);
  assert_int_equal(b[0].finished, 2);
  assert_int_equal(b[1].failed, 0);
  assert_int_equal(b[1].items, 0);

  /* n must be the bucket count; a window that needs too many is refused. */
  assert_int_equal(store_job_throughput(s, NULL, t0, to, step, b, 4), -EINVAL);
  assert_int_equal(store_job_throughput(s, NULL, t0, t0, step, b, 0), -EINVAL);
  assert_int_equal(store_job_throughput(s, NULL, t0, t0 + (JOB_BUCKETS_MAX + 1) * 1000LL, 1000,
                                        b, JOB_BUCKETS_MAX + 1),
                   -EINVAL);
}

/* Many jobs ended in one millisecond and a few per millisecond around
 * it: windows are read in chunks on some backends (Redis), and a chunk must
 * neither lose nor count twice the jobs of the millisecond it stops at. */
static void test_long_windows(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  const int64_t t0 = 1700000000000LL;
  const int same = 2100, spread = 2100; /* over any chunk size below 2,000 */
  assert_int_equal(store_tx_begin(s), 0);
  for (int i = 0; i < same + spread; i++) {
    job_t j;
    job_init(&j);
    char id[32];
    snprintf(id, sizeof(id), "lw%d", i);
    j.jobid = strdup(id);
    j.project = strdup(i % 2 ? "p" : "q");
    j.spider = strdup("s");
    j.state = i % 3 ? JOB_FINISHED : JOB_FAILED;
    j.node = strdup("n1");
    j.start_ms = t0 - 1000;
    j.end_ms = i < same ? t0 + 5000 : t0 + (i - same) / 3;
    j.stats = json_pack("{s:i}", "item_scraped_count", 2);
    assert_int_equal(store_job_insert(s, &j), 0);
    job_release(&j);
  }
  assert_int_equal(store_tx_commit(s), 0);
  int64_t c[JOB_NSTATES];
  assert_int_equal(store_job_counts_since(s, NULL, t0, c), 0);
  assert_int_equal(c[JOB_FINISHED] + c[JOB_FAILED], same + spread);
  assert_int_equal(c[JOB_FAILED], (same + spread + 2) / 3);
  assert_int_equal(store_job_counts_since(s, "p", t0 + 1, c), 0);
  int64_t p_after = 0;
  for (int i = 0; i < same + spread; i++)
    if (i % 2 && (i < same || (i - same) / 3 >= 1)) p_after++;
  assert_int_equal(c[JOB_FINISHED] + c[JOB_FAILED], p_after);

  job_bucket_t b[2];
  assert_int_equal(store_job_throughput(s, NULL, t0, t0 + 10000, 5000, b, 2), 0);
  assert_int_equal(b[0].finished + b[0].failed, spread);
  assert_int_equal(b[0].items, 2 * spread);
  assert_int_equal(b[1].finished + b[1].failed, same);
  assert_int_equal(b[1].items, 2 * same);
  /* A window that cuts the spread jobs' milliseconds. */
  assert_int_equal(store_job_throughput(s, NULL, t0 + 100, t0 + 200, 100, b, 1), 0);
  assert_int_equal(b[0].finished + b[0].failed, 300);

  /* A text search down the whole history (read in several scripts on
   * Redis): lw41, lw410..lw419, lw4100..lw4199, newest first. */
  job_list_t l = {0};
  job_filter_t fl = {.text = "LW41", .newest_first = 1};
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  assert_int_equal(l.n, 111);
  assert_string_equal(l.v[0].jobid, "lw4199");
  assert_string_equal(l.v[110].jobid, "lw41");
  for (size_t i = 1; i < l.n; i++) assert_true(l.v[i].id < l.v[i - 1].id);
  int64_t cut = l.v[4].id;
  job_list_release(&l);
  fl.limit = 5;
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  assert_int_equal(l.n, 5);
  assert_int_equal(l.v[4].id, cut);
  job_list_release(&l);
  /* The rest, after the fifth. */
  fl.limit = 0;
  fl.before_id = cut;
  assert_int_equal(store_jobs_list(s, &fl, &l), 0);
  assert_int_equal(l.n, 106);
  job_list_release(&l);
}

/* ---- queue keys ---- */

static void put_keyed(store_t *s, const char *el, const char *key, int64_t now) {
  queue_put_t p = {.element = el, .len = strlen(el), .key = key, .due_ms = now};
  assert_int_equal(store_queue_put(s, "q", &p, 1, now), 0);
}

static const queue_key_info_t *find_key(const queue_key_list_t *l, const char *key) {
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->v[i].key, key)) return &l->v[i];
  return NULL;
}

static void test_queue_keys(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  const int64_t now = 1700000000000LL;
  queue_key_list_t l = {0};
  assert_int_equal(store_queue_keys(s, "q", NULL, 0, now, &l), -ENOENT);
  queue_conf_t c;
  memset(&c, 0, sizeof(c));
  queue_conf_defaults(&c);
  c.name = "q";
  c.key_inflight = 1;
  c.key_rate = 0.5; /* one take per 2 s per key, burst 2 */
  c.key_burst = 2;
  assert_int_equal(store_queue_set(s, &c), 0);
  assert_int_equal(store_queue_keys(s, "q", NULL, 0, now, &l), 0);
  assert_int_equal(l.n, 0);

  put_keyed(s, "a1", "a.example", now);
  put_keyed(s, "a2", "a.example", now);
  put_keyed(s, "b1", "b.example", now);
  put_keyed(s, "c1", "c", now);
  /* A take leases one element per key (key_inflight 1) and spends a token. */
  queue_item_list_t got = {0};
  assert_int_equal(store_queue_take(s, "q", 10, 60000, now, &got, NULL), 0);
  assert_int_equal(got.n, 3);
  /* b's lease is nacked with a Retry-After: b is blocked for 30 s. */
  queue_lease_t nk = {0};
  for (size_t i = 0; i < got.n; i++)
    if (!strcmp(got.v[i].key, "b.example")) nk = (queue_lease_t){.id = got.v[i].id,
                                                                   .token = got.v[i].token,
                                                                   .delay_ms = -1,
                                                                   .retry_after_ms = 30000};
  assert_true(nk.id > 0);
  assert_int_equal(store_queue_nack(s, "q", &nk, 1, now), 0);
  queue_item_list_release(&got);

  int64_t later = now + 1000;
  assert_int_equal(store_queue_keys(s, "q", NULL, 0, later, &l), 0);
  assert_int_equal(l.n, 3);
  /* Byte order of the key. */
  assert_string_equal(l.v[0].key, "a.example");
  assert_string_equal(l.v[1].key, "b.example");
  assert_string_equal(l.v[2].key, "c");
  const queue_key_info_t *a = find_key(&l, "a.example"), *b = find_key(&l, "b.example"),
                         *k = find_key(&l, "c");
  /* a: one ready, one in flight at its limit: closed until a lease ends. */
  assert_int_equal(a->ready, 1);
  assert_int_equal(a->inflight, 1);
  assert_false(a->open);
  assert_int_equal(a->wake_ms, 0);
  assert_int_equal(a->blocked_until_ms, 0);
  /* Tokens: burst 2, one spent at now, refilled 0.5 by now + 1 s. */
  assert_true(a->tokens > 1.49 && a->tokens < 1.51);
  /* b: its element back (due after the block), blocked until now + 30 s. */
  assert_int_equal(b->inflight, 0);
  assert_int_equal(b->blocked_until_ms, now + 30000);
  assert_false(b->open);
  /* c: its only element in flight. */
  assert_int_equal(k->ready, 0);
  assert_int_equal(k->inflight, 1);
  assert_false(k->open);
  queue_key_list_release(&l);

  /* Pages: after a key, at most limit. */
  assert_int_equal(store_queue_keys(s, "q", "a.example", 1, later, &l), 0);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.v[0].key, "b.example");
  queue_key_list_release(&l);
  assert_int_equal(store_queue_keys(s, "q", "c", 10, later, &l), 0);
  assert_int_equal(l.n, 0);
  queue_key_list_release(&l);

  /* Without a rate, tokens are -1; a key with a ready element and room is open. */
  c.key_rate = 0;
  c.key_inflight = 0;
  assert_int_equal(store_queue_set(s, &c), 0);
  assert_int_equal(store_queue_keys(s, "q", NULL, 0, later, &l), 0);
  a = find_key(&l, "a.example");
  assert_non_null(a);
  assert_true(a->tokens < 0);
  assert_int_equal(a->ready, 1);
  assert_true(a->open);
  queue_key_list_release(&l);
}

/* ---- store_job_stats ---- */

static void stat_job(store_t *s, const char *project, const char *spider, job_state_t st,
                     int64_t start_ms, int64_t end_ms, const char *stats) {
  int64_t id = fx_job(s, NULL, project, spider, JOB_RUNNING, "n1", start_ms, 0);
  json_t *js = stats ? json_loads(stats, 0, NULL) : NULL;
  assert_int_equal(store_job_finish(s, id, st, end_ms, st == JOB_FINISHED ? 0 : 1, 0, js), 0);
  json_decref(js);
}

static void test_stats(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  const int64_t t0 = 1700000000000LL;
  /* p/a: durations 1..10 s, items 1..10 (the runner's "items"), 8 finished */
  for (int i = 1; i <= 10; i++) {
    char js[64];
    snprintf(js, sizeof(js), "{\"items\": %d, \"item_scraped_count\": 999}", i);
    stat_job(s, "p", "a", i <= 8 ? JOB_FINISHED : JOB_FAILED, t0 + i * 1000 - i * 1000,
             t0 + i * 1000, js);
  }
  stat_job(s, "p", "b", JOB_CANCELLED, t0, t0 + 20000, "{\"item_scraped_count\": 4}");
  stat_job(s, "q", "a", JOB_LOST, t0, t0 + 500, NULL);
  stat_job(s, "p", "a", JOB_FINISHED, t0 - 5000, t0 - 1, "{\"items\": 100}"); /* before */
  stat_job(s, "p", "a", JOB_FINISHED, t0, t0 + 60000, "{\"items\": 100}");    /* at to */
  fx_job(s, NULL, "p", "a", JOB_RUNNING, "n1", t0 + 10, 0);                 /* not ended */

  job_stats_query_t q = {.from_ms = t0, .to_ms = t0 + 60000, .by = JOB_STATS_BY_SPIDER};
  job_stats_t st = {0};
  assert_int_equal(store_job_stats(s, &q, &st), 0);
  assert_int_equal(st.n, 3); /* p/a, p/b, q/a in key order */
  assert_int_equal(st.scanned, 12);
  const job_stats_group_t *g = &st.v[0];
  assert_string_equal(g->project, "p");
  assert_string_equal(g->spider, "a");
  assert_int_equal(g->ended, 10);
  assert_int_equal(g->runs[JOB_FINISHED], 8);
  assert_int_equal(g->runs[JOB_FAILED], 2);
  assert_int_equal(g->items, 55);
  assert_int_equal(g->dur_p50_ms, 5000); /* nearest rank: the 5th of 10 */
  assert_int_equal(g->dur_p95_ms, 10000);
  assert_int_equal(g->dur_max_ms, 10000);
  assert_int_equal(g->last_success_ms, t0 + 8000);
  assert_string_equal(st.v[1].spider, "b");
  assert_int_equal(st.v[1].runs[JOB_CANCELLED], 1);
  assert_int_equal(st.v[1].items, 4); /* item_scraped_count when no "items" */
  assert_int_equal(st.v[1].last_success_ms, 0);
  assert_string_equal(st.v[2].project, "q");
  assert_int_equal(st.v[2].runs[JOB_LOST], 1);
  assert_int_equal(st.v[2].items, 0);
  job_stats_release(&st);

  /* One project, by project; a window that holds nothing. */
  q.project = "p";
  q.by = JOB_STATS_BY_PROJECT;
  assert_int_equal(store_job_stats(s, &q, &st), 0);
  assert_int_equal(st.n, 1);
  assert_int_equal(st.v[0].ended, 11);
  job_stats_release(&st);
  q.from_ms = t0 + 60000;
  q.to_ms = t0 + 60001;
  assert_int_equal(store_job_stats(s, &q, &st), 0);
  assert_int_equal(st.n, 1);
  assert_int_equal(st.v[0].items, 100);
  job_stats_release(&st);
  q.from_ms = q.to_ms;
  assert_int_equal(store_job_stats(s, &q, &st), -EINVAL);
  q.from_ms = t0;
  q.account = "acme";
  assert_int_equal(store_job_stats(s, &q, &st), -EINVAL); /* no accounts given */
  job_stats_release(&st);

  /* By account: p is acme's, q of none; then acme's jobs only. */
  json_t *accounts = json_pack("{s:{s:[s]}}", "acme", "projects", "p");
  q = (job_stats_query_t){.from_ms = t0, .to_ms = t0 + 60000, .by = JOB_STATS_BY_ACCOUNT,
                          .accounts = accounts};
  assert_int_equal(store_job_stats(s, &q, &st), 0);
  assert_int_equal(st.n, 2); /* "" (none) sorts first */
  assert_string_equal(st.v[0].account, "");
  assert_int_equal(st.v[0].runs[JOB_LOST], 1);
  assert_string_equal(st.v[1].account, "acme");
  assert_int_equal(st.v[1].ended, 11);
  assert_int_equal(st.v[1].dur_max_ms, 20000);
  job_stats_release(&st);
  q.account = "acme";
  q.by = JOB_STATS_BY_SPIDER;
  assert_int_equal(store_job_stats(s, &q, &st), 0);
  assert_int_equal(st.n, 2); /* p/a, p/b: not q/a */
  assert_string_equal(st.v[0].project, "p");
  assert_string_equal(st.v[1].project, "p");
  job_stats_release(&st);
  json_decref(accounts);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_text_filter),
      T(test_node_filter_newest_first),
      T(test_counts_since),
      T(test_throughput),
      T(test_long_windows),
      T(test_queue_keys),
      T(test_stats),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
