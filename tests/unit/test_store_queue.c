/* Contract tests for store.h's task queues (core/queue.h, docs/queues.md).
 * Public API only, so every backend runs them (see store_fx.h for
 * SPIDERD_TEST_STORE_URL). Every time is an explicit now_ms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>

#include "store_fx.h"

/* A realistic clock: a token bucket that starts from time 0 is full too. */
#define T0 INT64_C(1700000000000)

#define OW QPOLICY_OVERWRITE
#define KE QPOLICY_KEEP_EARLIEST
#define KX QPOLICY_KEEP_EXISTING

/* ---- helpers ---- */

static queue_put_t qp(const char *el, int64_t due, int pri, queue_policy_t pol) {
  queue_put_t p;
  memset(&p, 0, sizeof(p));
  p.element = el;
  p.len = strlen(el);
  p.due_ms = due;
  p.priority = pri;
  p.policy = pol;
  return p;
}

/* Puts one element; returns the put with its result and id. */
static queue_put_t put_k(store_t *s, const char *q, const char *el, const char *key,
                         int64_t due, int pri, queue_policy_t pol, int64_t now) {
  queue_put_t p = qp(el, due, pri, pol);
  p.key = key;
  int rc = store_queue_put(s, q, &p, 1, now);
  if (rc) fail_msg("put(%s, %s) = %d", q, el, rc);
  assert_true(p.id > 0);
  return p;
}

static queue_put_t put1(store_t *s, const char *q, const char *el, int64_t due, int pri,
                        queue_policy_t pol, int64_t now) {
  return put_k(s, q, el, NULL, due, pri, pol, now);
}

static size_t take(store_t *s, const char *q, size_t max, int64_t vis, int64_t now,
                   queue_item_list_t *out, int64_t *next) {
  queue_item_list_release(out);
  int rc = store_queue_take(s, q, max, vis, now, out, next);
  if (rc) fail_msg("take(%s) = %d", q, rc);
  return out->n;
}

static int el_is(const queue_item_t *it, const char *el) {
  return it->len == strlen(el) && memcmp(it->element, el, it->len) == 0;
}

static const queue_item_t *find_el(const queue_item_list_t *l, const char *el) {
  for (size_t i = 0; i < l->n; i++)
    if (el_is(&l->v[i], el)) return &l->v[i];
  return NULL;
}

static queue_lease_t mklease(int64_t id, int64_t token) {
  queue_lease_t l;
  memset(&l, 0, sizeof(l));
  l.id = id;
  l.token = token;
  return l;
}

/* One lease's ack; the call itself must succeed. Returns the lease result. */
static int ack1(store_t *s, const char *q, int64_t id, int64_t token, int64_t now) {
  queue_lease_t l = mklease(id, token);
  l.result = 12345;
  int rc = store_queue_ack(s, q, &l, 1, now);
  if (rc) fail_msg("ack(%s, %lld) = %d", q, (long long)id, rc);
  return l.result;
}

static int nack1(store_t *s, const char *q, int64_t id, int64_t token, int64_t delay,
                 int64_t retry_after, const char *error, int64_t now, int *dead) {
  queue_lease_t l = mklease(id, token);
  l.delay_ms = delay;
  l.retry_after_ms = retry_after;
  l.error = error;
  l.result = 12345;
  l.dead = -1;
  int rc = store_queue_nack(s, q, &l, 1, now);
  if (rc) fail_msg("nack(%s, %lld) = %d", q, (long long)id, rc);
  if (dead) *dead = l.dead;
  return l.result;
}

static int extend1(store_t *s, const char *q, int64_t id, int64_t token, int64_t vis,
                   int64_t now) {
  queue_lease_t l = mklease(id, token);
  l.result = 12345;
  int rc = store_queue_extend(s, q, &l, 1, vis, now);
  if (rc) fail_msg("extend(%s, %lld) = %d", q, (long long)id, rc);
  return l.result;
}

/* The element with this id, or -ENOENT. */
static int item_get(store_t *s, const char *q, int64_t id, queue_item_t *out) {
  queue_filter_t f;
  queue_item_list_t l = {0};
  memset(&f, 0, sizeof(f));
  f.ids = &id;
  f.nids = 1;
  int rc = store_queue_items(s, q, &f, &l);
  if (rc) return rc;
  if (l.n == 0) {
    queue_item_list_release(&l);
    return -ENOENT;
  }
  assert_int_equal(l.n, 1);
  *out = l.v[0];
  memset(&l.v[0], 0, sizeof(l.v[0]));
  queue_item_list_release(&l);
  return 0;
}

static queue_item_t must_item(store_t *s, const char *q, int64_t id) {
  queue_item_t it;
  int rc = item_get(s, q, id, &it);
  if (rc) fail_msg("item %lld of %s: %d", (long long)id, q, rc);
  return it;
}

static size_t items_count(store_t *s, const char *q, const queue_filter_t *f) {
  queue_item_list_t l = {0};
  int rc = store_queue_items(s, q, f, &l);
  if (rc) fail_msg("items(%s) = %d", q, rc);
  size_t n = l.n;
  queue_item_list_release(&l);
  return n;
}

/* Lists every element and checks the stats and the queue's counters agree
 * with what the listing shows (both are the contract's view of the queue). */
static queue_stats_t consistent(store_t *s, const char *q, int64_t now, int line) {
  queue_item_list_t l = {0};
  queue_stats_t st, want;
  queue_conf_t c;
  int rc;
  memset(&want, 0, sizeof(want));
  if ((rc = store_queue_items(s, q, NULL, &l)))
    fail_msg("line %d: items(%s) = %d", line, q, rc);
  if ((rc = store_queue_stats(s, q, now, &st)))
    fail_msg("line %d: stats(%s) = %d", line, q, rc);
  if ((rc = store_queue_get(s, q, &c))) fail_msg("line %d: get(%s) = %d", line, q, rc);
  const char **keys = calloc(l.n + 1, sizeof(*keys));
  assert_non_null(keys);
  for (size_t i = 0; i < l.n; i++) {
    const queue_item_t *it = &l.v[i];
    if (i > 0 && it->id <= l.v[i - 1].id)
      fail_msg("line %d: items not in id order (%lld after %lld)", line, (long long)it->id,
               (long long)l.v[i - 1].id);
    if (it->element[it->len] != '\0') fail_msg("line %d: element not NUL-terminated", line);
    assert_non_null(it->key);
    switch (it->state) {
    case QSTATE_WAITING:
      want.waiting++;
      if (it->due_ms <= now) want.past_due++;
      if (!want.oldest_due_ms || it->due_ms < want.oldest_due_ms) want.oldest_due_ms = it->due_ms;
      break;
    case QSTATE_INFLIGHT: want.inflight++; break;
    case QSTATE_DEAD: want.dead++; break;
    case QSTATE_DONE: want.done++; break;
    default: fail_msg("line %d: item %lld in state %d", line, (long long)it->id, it->state);
    }
    if (it->state == QSTATE_INFLIGHT) { /* such a key holds state (see queue.h) */
      size_t k = 0;
      while (k < (size_t)want.keys && strcmp(keys[k], it->key) != 0) k++;
      if (k == (size_t)want.keys) keys[want.keys++] = it->key;
    }
  }
  want.size = want.waiting + want.inflight;
#define CMP(field)                                                                        \
  if (st.field != want.field)                                                             \
    fail_msg("line %d: stats." #field " = %lld, the items say %lld", line,                \
             (long long)st.field, (long long)want.field);
  CMP(size) CMP(waiting) CMP(past_due) CMP(inflight) CMP(dead) CMP(done) CMP(oldest_due_ms)
#undef CMP
  if (st.keys < want.keys)
    fail_msg("line %d: stats.keys = %lld, but %lld keys have elements in flight", line,
             (long long)st.keys, (long long)want.keys);
#define CMPC(field, sf)                                                                   \
  if (c.field != want.sf)                                                                 \
    fail_msg("line %d: conf." #field " = %lld, the items say %lld", line,                 \
             (long long)c.field, (long long)want.sf);
  CMPC(n_waiting, waiting) CMPC(n_inflight, inflight) CMPC(n_dead, dead) CMPC(n_done, done)
#undef CMPC
  free(keys);
  queue_conf_release(&c);
  queue_item_list_release(&l);
  return st;
}
#define CONSISTENT(s, q, now) consistent(s, q, now, __LINE__)

/* stats.keys counts keys that hold politeness state, which depends on more
 * than the elements (queue.h); only test_stats_keys pins it (KSTATS). */
#define KEYS_ANY (-1)
/* Checks the stats (and, through consistent(), that the listing agrees). */
static void expect_stats(store_t *s, const char *q, int64_t now, int64_t waiting,
                         int64_t past_due, int64_t inflight, int64_t dead, int64_t done,
                         int64_t keys, int line) {
  queue_stats_t st = consistent(s, q, now, line);
  if (st.waiting != waiting || st.past_due != past_due || st.inflight != inflight ||
      st.dead != dead || st.done != done || (keys != KEYS_ANY && st.keys != keys) ||
      st.size != waiting + inflight)
    fail_msg("line %d: stats size/waiting/past_due/inflight/dead/done/keys = "
             "%lld/%lld/%lld/%lld/%lld/%lld/%lld, want %lld/%lld/%lld/%lld/%lld/%lld/%lld",
             line, (long long)st.size, (long long)st.waiting, (long long)st.past_due,
             (long long)st.inflight, (long long)st.dead, (long long)st.done,
             (long long)st.keys, (long long)(waiting + inflight), (long long)waiting,
             (long long)past_due, (long long)inflight, (long long)dead, (long long)done,
             (long long)keys);
}
#define STATS(s, q, now, w, pd, inf, dead, done, keys) \
  expect_stats(s, q, now, w, pd, inf, dead, done, KEYS_ANY, __LINE__)
#define KSTATS(s, q, now, w, pd, inf, dead, done, keys) \
  expect_stats(s, q, now, w, pd, inf, dead, done, keys, __LINE__)

static queue_conf_t conf_of(store_t *s, const char *q) {
  queue_conf_t c;
  int rc = store_queue_get(s, q, &c);
  if (rc) fail_msg("get(%s) = %d", q, rc);
  return c;
}

/* Creates queue q with the defaults changed by the caller through c. */
static void mkqueue(store_t *s, const char *q, queue_conf_t *c) {
  c->name = strdup(q);
  int rc = store_queue_set(s, c);
  if (rc) fail_msg("set(%s) = %d", q, rc);
  queue_conf_release(c);
}

static queue_conf_t defaults(void) {
  queue_conf_t c;
  memset(&c, 0, sizeof(c));
  queue_conf_defaults(&c);
  return c;
}

/* ---- put ---- */

static void test_put_creates_queue(void **state) {
  struct fx *f = *state;
  queue_conf_t c, d = defaults();
  assert_int_equal(store_queue_get(f->s, "fresh", &c), -ENOENT);
  queue_put_t p = put1(f->s, "fresh", "a", T0, 0, OW, T0);
  assert_int_equal(p.result, QPUT_ADDED);
  c = conf_of(f->s, "fresh");
  assert_true(c.id > 0);
  assert_string_equal(c.name, "fresh");
  assert_true(c.created_ms > 0);
  assert_int_equal(c.paused, d.paused);
  assert_int_equal(c.keep_done, d.keep_done);
  assert_int_equal(c.visibility_ms, d.visibility_ms);
  assert_int_equal(c.max_deliveries, d.max_deliveries);
  assert_int_equal(c.backoff_ms, d.backoff_ms);
  assert_int_equal(c.backoff_max_ms, d.backoff_max_ms);
  assert_int_equal(c.max_inflight, d.max_inflight);
  assert_int_equal(c.key_mode, d.key_mode);
  assert_int_equal(c.key_inflight, d.key_inflight);
  assert_true(c.key_rate == d.key_rate);
  assert_true(c.key_burst == d.key_burst);
  assert_int_equal(c.n_waiting, 1);
  assert_int_equal(c.n_put, 1);
  assert_int_equal(c.n_acked, 0);
  queue_conf_release(&c);
  STATS(f->s, "fresh", T0, 1, 1, 0, 0, 0, 1);
  queue_stats_t st = CONSISTENT(f->s, "fresh", T0);
  assert_int_equal(st.oldest_due_ms, T0);

  queue_item_t it = must_item(f->s, "fresh", p.id);
  assert_true(el_is(&it, "a"));
  assert_int_equal(it.state, QSTATE_WAITING);
  assert_int_equal(it.due_ms, T0);
  assert_int_equal(it.priority, 0);
  assert_int_equal(it.deliveries, 0);
  assert_string_equal(it.key, "");
  assert_null(it.error);
  queue_item_release(&it);

  /* Each of the results of a batch is set, in order. */
  queue_put_t b[3] = {qp("a", T0 + 5, 0, OW), qp("b", T0, 0, OW), qp("a", T0 + 5, 0, KX)};
  assert_int_equal(store_queue_put(f->s, "fresh", b, 3, T0), 0);
  assert_int_equal(b[0].result, QPUT_MOVED);
  assert_int_equal(b[0].id, p.id);
  assert_int_equal(b[1].result, QPUT_ADDED);
  assert_true(b[1].id > 0 && b[1].id != p.id);
  assert_int_equal(b[2].result, QPUT_KEPT);
  assert_int_equal(b[2].id, p.id);
  /* An empty put is nothing. */
  assert_int_equal(store_queue_put(f->s, "fresh", NULL, 0, T0), 0);
  STATS(f->s, "fresh", T0, 2, 1, 0, 0, 0, 1);
}

static void test_put_unique(void **state) {
  struct fx *f = *state;
  queue_put_t a = put1(f->s, "q", "http://x/1", T0, 3, OW, T0);
  assert_int_equal(a.result, QPUT_ADDED);
  for (int pol = 0; pol < QPOLICY_N; pol++) {
    queue_put_t b = put1(f->s, "q", "http://x/1", T0, 3, (queue_policy_t)pol, T0);
    assert_int_equal(b.result, QPUT_KEPT); /* nothing changed */
    assert_int_equal(b.id, a.id);
  }
  queue_conf_t c = conf_of(f->s, "q");
  assert_int_equal(c.n_put, 1);
  assert_int_equal(c.n_waiting, 1);
  queue_conf_release(&c);
  STATS(f->s, "q", T0, 1, 1, 0, 0, 0, 1);
  queue_item_list_t l = {0};
  assert_int_equal(take(f->s, "q", 10, 0, T0, &l, NULL), 1);
  queue_item_list_release(&l);
}

static void test_put_policies_waiting(void **state) {
  struct fx *f = *state;
  queue_put_t a = put1(f->s, "q", "a", T0 + 1000, 0, OW, T0);
  queue_item_t it;
  struct {
    int64_t due;
    int pri;
    queue_policy_t pol;
    queue_put_result_t result;
    int64_t want_due;
    int want_pri;
  } steps[] = {
      {T0 + 5000, 1, OW, QPUT_MOVED, T0 + 5000, 1},    /* later, higher */
      {T0 + 2000, -1, OW, QPUT_MOVED, T0 + 2000, -1},  /* earlier, lower */
      {T0 + 2000, 4, OW, QPUT_MOVED, T0 + 2000, 4},    /* priority only */
      {T0 + 9000, 4, OW, QPUT_MOVED, T0 + 9000, 4},    /* due only */
      {T0 + 2000, 4, OW, QPUT_MOVED, T0 + 2000, 4},
      {T0 + 3000, -5, KE, QPUT_KEPT, T0 + 2000, 4},    /* later and lower: kept */
      {T0 + 1500, -5, KE, QPUT_MOVED, T0 + 1500, 4},   /* earlier wins, higher stays */
      {T0 + 4000, 7, KE, QPUT_MOVED, T0 + 1500, 7},    /* earlier stays, higher wins */
      {T0 + 1000, 9, KE, QPUT_MOVED, T0 + 1000, 9},    /* both */
      {T0 + 1000, 9, KE, QPUT_KEPT, T0 + 1000, 9},
      {T0 + 10, 100, KX, QPUT_KEPT, T0 + 1000, 9},     /* keep-existing */
      {T0 + 99999, -100, KX, QPUT_KEPT, T0 + 1000, 9},
  };
  for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
    queue_put_t p = put1(f->s, "q", "a", steps[i].due, steps[i].pri, steps[i].pol, T0);
    if (p.result != steps[i].result)
      fail_msg("step %zu (%s due +%lld pri %d): result %d, want %d", i,
               queue_policy_name(steps[i].pol), (long long)(steps[i].due - T0), steps[i].pri,
               p.result, steps[i].result);
    assert_int_equal(p.id, a.id);
    it = must_item(f->s, "q", a.id);
    if (it.due_ms != steps[i].want_due || it.priority != steps[i].want_pri)
      fail_msg("step %zu: due +%lld pri %d, want +%lld pri %d", i, (long long)(it.due_ms - T0),
               it.priority, (long long)(steps[i].want_due - T0), steps[i].want_pri);
    assert_int_equal(it.state, QSTATE_WAITING);
    queue_item_release(&it);
    queue_stats_t st = CONSISTENT(f->s, "q", T0);
    assert_int_equal(st.waiting, 1);
    assert_int_equal(st.past_due, 0);
    assert_int_equal(st.oldest_due_ms, steps[i].want_due);
  }
  queue_conf_t c = conf_of(f->s, "q");
  assert_int_equal(c.n_put, 1);
  queue_conf_release(&c);
  /* A move is seen by take: a higher priority now goes first. */
  put1(f->s, "q", "b", T0, 8, OW, T0);
  queue_item_list_t l = {0};
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 1000, &l, NULL), 1);
  assert_true(el_is(&l.v[0], "a"));
  queue_item_list_release(&l);
}

/* Takes the single element el (which must be the only due one). */
static queue_item_t take_one(store_t *s, const char *q, const char *el, int64_t vis,
                             int64_t now) {
  queue_item_list_t l = {0};
  assert_int_equal(take(s, q, 1, vis, now, &l, NULL), 1);
  if (!el_is(&l.v[0], el)) fail_msg("took %.*s, want %s", (int)l.v[0].len, l.v[0].element, el);
  queue_item_t it = l.v[0];
  memset(&l.v[0], 0, sizeof(l.v[0]));
  queue_item_list_release(&l);
  return it;
}

static void test_put_inflight(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  int64_t next;
  const queue_policy_t pols[] = {OW, KE, KX};
  for (int i = 0; i < 3; i++) {
    char q[16];
    snprintf(q, sizeof(q), "q%d", i);
    put1(f->s, q, "e", T0, 1, OW, T0);
    queue_item_t it = take_one(f->s, q, "e", 10000, T0);
    STATS(f->s, q, T0, 0, 0, 1, 0, 0, 1);
    queue_put_t p = put1(f->s, q, "e", T0 + 50000, 3, pols[i], T0 + 10);
    assert_int_equal(p.id, it.id);
    assert_int_equal(p.result, pols[i] == KX ? QPUT_KEPT : QPUT_DEFERRED);
    /* The lease is left alone. */
    queue_item_t now_it = must_item(f->s, q, it.id);
    assert_int_equal(now_it.state, QSTATE_INFLIGHT);
    assert_int_equal(now_it.token, it.token);
    assert_int_equal(now_it.due_ms, T0 + 10000);
    queue_item_release(&now_it);
    STATS(f->s, q, T0 + 10, 0, 0, 1, 0, 0, 1);
    assert_int_equal(take(f->s, q, 10, 0, T0 + 20, &l, NULL), 0);
    queue_conf_t c = conf_of(f->s, q);
    assert_int_equal(c.n_put, 1);
    queue_conf_release(&c);

    assert_int_equal(ack1(f->s, q, it.id, it.token, T0 + 100), 0);
    c = conf_of(f->s, q);
    assert_int_equal(c.n_acked, 1);
    queue_conf_release(&c);
    if (pols[i] == KX) {
      STATS(f->s, q, T0 + 100, 0, 0, 0, 0, 0, 0);
      assert_int_equal(item_get(f->s, q, it.id, &now_it), -ENOENT);
    } else {
      /* Waiting again at the new due time. */
      now_it = must_item(f->s, q, it.id);
      assert_int_equal(now_it.state, QSTATE_WAITING);
      assert_int_equal(now_it.due_ms, T0 + 50000);
      assert_int_equal(now_it.priority, 3); /* keep-earliest too: the higher */
      queue_item_release(&now_it);
      STATS(f->s, q, T0 + 100, 1, 0, 0, 0, 0, 1);
      assert_int_equal(take(f->s, q, 10, 0, T0 + 100, &l, &next), 0);
      assert_int_equal(next, T0 + 50000);
      assert_int_equal(take(f->s, q, 10, 0, T0 + 49999, &l, NULL), 0);
      assert_int_equal(take(f->s, q, 10, 0, T0 + 50000, &l, NULL), 1);
      assert_true(el_is(&l.v[0], "e"));
      assert_int_equal(ack1(f->s, q, l.v[0].id, l.v[0].token, T0 + 50001), 0);
      STATS(f->s, q, T0 + 50001, 0, 0, 0, 0, 0, 0);
    }
    queue_item_release(&it);
  }
  queue_item_list_release(&l);

  /* A deferred put whose due time is already past: takeable right after the ack. */
  put1(f->s, "r", "e", T0, 0, OW, T0);
  queue_item_t it = take_one(f->s, "r", "e", 10000, T0);
  assert_int_equal(put1(f->s, "r", "e", T0 + 1, 0, OW, T0 + 1).result, QPUT_DEFERRED);
  assert_int_equal(ack1(f->s, "r", it.id, it.token, T0 + 5), 0);
  STATS(f->s, "r", T0 + 5, 1, 1, 0, 0, 0, 1);
  queue_item_release(&it);
  it = take_one(f->s, "r", "e", 10000, T0 + 5);
  queue_item_release(&it);
}

/* A queue where one nack kills, with done tombstones. */
static void mk_dead_done_queue(store_t *s, const char *q) {
  queue_conf_t c = defaults();
  c.max_deliveries = 1;
  c.keep_done = 1;
  mkqueue(s, q, &c);
}

static void test_put_dead_done(void **state) {
  struct fx *f = *state;
  const queue_policy_t pols[] = {OW, KE, KX};
  mk_dead_done_queue(f->s, "q");
  int64_t now = T0;
  for (int i = 0; i < 3; i++) {
    char dn[8], dd[8];
    snprintf(dn, sizeof(dn), "dead%d", i);
    snprintf(dd, sizeof(dd), "done%d", i);
    put1(f->s, "q", dn, now, 5, OW, now);
    put1(f->s, "q", dd, now, 5, OW, now);
  }
  queue_item_list_t l = {0};
  assert_int_equal(take(f->s, "q", 10, 0, now, &l, NULL), 6);
  for (size_t i = 0; i < l.n; i++) {
    int dead = 0;
    if (l.v[i].element[1] == 'e') {
      assert_int_equal(nack1(f->s, "q", l.v[i].id, l.v[i].token, 0, 0, "x", now, &dead), 0);
      assert_int_equal(dead, 1);
    } else {
      assert_int_equal(ack1(f->s, "q", l.v[i].id, l.v[i].token, now), 0);
    }
  }
  STATS(f->s, "q", now, 0, 0, 0, 3, 3, 0);
  queue_conf_t c = conf_of(f->s, "q");
  int64_t nput = c.n_put;
  queue_conf_release(&c);
  assert_int_equal(nput, 6);

  now += 1000;
  int back = 0, n_added = 0;
  for (int i = 0; i < 3; i++) {
    for (int k = 0; k < 2; k++) {
      char el[8];
      snprintf(el, sizeof(el), "%s%d", k ? "done" : "dead", i);
      queue_put_t p = put1(f->s, "q", el, now + 7000, 2, pols[i], now);
      if (pols[i] == KX) {
        assert_int_equal(p.result, QPUT_KEPT);
        queue_item_t it = must_item(f->s, "q", p.id);
        assert_int_equal(it.state, k ? QSTATE_DONE : QSTATE_DEAD);
        queue_item_release(&it);
        continue;
      }
      /* "Comes back as new": ADDED (a new element) is the natural reading;
       * MOVED would be accepted by the enum's wording too. */
      if (p.result != QPUT_ADDED && p.result != QPUT_MOVED)
        fail_msg("revived %s: result %d", el, p.result);
      if (p.result != QPUT_ADDED)
        print_message("note: a revived %s element reports %d, not QPUT_ADDED\n",
                      k ? "done" : "dead", p.result);
      back++;
      n_added += p.result == QPUT_ADDED;
      queue_item_t it = must_item(f->s, "q", p.id);
      assert_int_equal(it.state, QSTATE_WAITING);
      assert_int_equal(it.due_ms, now + 7000);
      assert_int_equal(it.priority, 2);
      assert_int_equal(it.deliveries, 0);
      queue_item_release(&it);
    }
    STATS(f->s, "q", now, back, 0, 0, 3 - (i + 1 < 3 ? i + 1 : 2), 3 - (i + 1 < 3 ? i + 1 : 2),
          back ? 1 : 0);
  }
  STATS(f->s, "q", now, 4, 0, 0, 1, 1, 1);
  /* n_put counts the puts that added an element: QPUT_ADDED results. */
  c = conf_of(f->s, "q");
  if (c.n_put != nput + n_added)
    fail_msg("n_put %lld after %d more QPUT_ADDED results, want %lld", (long long)c.n_put,
             n_added, (long long)(nput + n_added));
  queue_conf_release(&c);
  /* As new: a revived element has all its deliveries again. */
  assert_int_equal(take(f->s, "q", 10, 0, now + 7000, &l, NULL), 4);
  for (size_t i = 0; i < l.n; i++) assert_int_equal(l.v[i].deliveries, 1);
  queue_item_list_release(&l);
}

static void test_put_binary_and_sizes(void **state) {
  struct fx *f = *state;
  static const char b1[] = {'a', 0, 'b', 0, 'c'};
  static const char b2[] = {'a', 0, 'b', 0, 'd'};
  static const char b3[] = {'a', 0};
  static const char b4[] = {0};
  const struct {
    const char *p;
    size_t n;
  } els[] = {{b1, 5}, {b2, 5}, {b3, 2}, {"a", 1}, {b4, 1}};
  size_t nels = sizeof(els) / sizeof(els[0]);
  int64_t ids[8];
  for (size_t i = 0; i < nels; i++) {
    queue_put_t p = qp("", T0, 0, OW);
    p.element = els[i].p;
    p.len = els[i].n;
    assert_int_equal(store_queue_put(f->s, "q", &p, 1, T0), 0);
    assert_int_equal(p.result, QPUT_ADDED);
    ids[i] = p.id;
    for (size_t j = 0; j < i; j++) assert_true(ids[j] != ids[i]);
  }
  for (size_t i = 0; i < nels; i++) {
    queue_put_t p = qp("", T0, 0, KX);
    p.element = els[i].p;
    p.len = els[i].n;
    assert_int_equal(store_queue_put(f->s, "q", &p, 1, T0), 0);
    assert_int_equal(p.result, QPUT_KEPT);
    assert_int_equal(p.id, ids[i]);
    queue_item_t it = must_item(f->s, "q", ids[i]);
    assert_int_equal(it.len, els[i].n);
    assert_memory_equal(it.element, els[i].p, els[i].n);
    assert_int_equal(it.element[it.len], '\0');
    queue_item_release(&it);
  }
  STATS(f->s, "q", T0, (int64_t)nels, (int64_t)nels, 0, 0, 0, 1);

  /* Exactly QUEUE_ELEMENT_MAX bytes, twice differing in the last byte. */
  char *big = malloc(QUEUE_ELEMENT_MAX + 2);
  assert_non_null(big);
  for (size_t i = 0; i < QUEUE_ELEMENT_MAX + 1; i++) big[i] = (char)('a' + i % 26);
  big[QUEUE_ELEMENT_MAX + 1] = 0;
  queue_put_t p = qp("", T0, 0, OW);
  p.element = big;
  p.len = QUEUE_ELEMENT_MAX;
  assert_int_equal(store_queue_put(f->s, "big", &p, 1, T0), 0);
  assert_int_equal(p.result, QPUT_ADDED);
  int64_t big1 = p.id;
  big[QUEUE_ELEMENT_MAX - 1] ^= 1;
  p = qp("", T0, 0, OW);
  p.element = big;
  p.len = QUEUE_ELEMENT_MAX;
  assert_int_equal(store_queue_put(f->s, "big", &p, 1, T0), 0);
  assert_int_equal(p.result, QPUT_ADDED);
  assert_true(p.id != big1);
  p.result = QPUT_ADDED;
  assert_int_equal(store_queue_put(f->s, "big", &p, 1, T0), 0);
  assert_int_equal(p.result, QPUT_KEPT);
  queue_item_t it = must_item(f->s, "big", p.id);
  assert_int_equal(it.len, QUEUE_ELEMENT_MAX);
  assert_memory_equal(it.element, big, QUEUE_ELEMENT_MAX);
  queue_item_release(&it);
  queue_item_list_t l = {0};
  assert_int_equal(take(f->s, "big", 5, 0, T0, &l, NULL), 2);
  for (size_t i = 0; i < 2; i++) assert_int_equal(l.v[i].len, QUEUE_ELEMENT_MAX);
  queue_item_list_release(&l);

  /* One byte more: -EINVAL, and nothing of the batch is put. */
  queue_put_t bad[2] = {qp("fine", T0, 0, OW), qp("", T0, 0, OW)};
  bad[1].element = big;
  bad[1].len = QUEUE_ELEMENT_MAX + 1;
  assert_int_equal(store_queue_put(f->s, "q", bad, 2, T0), -EINVAL);
  assert_int_equal(store_queue_put(f->s, "new", bad, 2, T0), -EINVAL);
  queue_conf_t c;
  assert_int_equal(store_queue_get(f->s, "new", &c), -ENOENT);
  /* A key of QUEUE_KEY_MAX bytes is fine, one more is not. */
  char key[QUEUE_KEY_MAX + 2];
  memset(key, 'k', sizeof(key));
  key[QUEUE_KEY_MAX + 1] = 0;
  queue_put_t kb[2] = {qp("fine", T0, 0, OW), qp("fine2", T0, 0, OW)};
  kb[1].key = key;
  assert_int_equal(store_queue_put(f->s, "q", kb, 2, T0), -EINVAL);
  /* A NULL element is bad input too. */
  queue_put_t nul = qp("x", T0, 0, OW);
  nul.element = NULL;
  nul.len = 0;
  assert_int_equal(store_queue_put(f->s, "q", &nul, 1, T0), -EINVAL);
  STATS(f->s, "q", T0, (int64_t)nels, (int64_t)nels, 0, 0, 0, 1);
  key[QUEUE_KEY_MAX] = 0;
  assert_int_equal(store_queue_put(f->s, "q", kb, 2, T0), 0);
  it = must_item(f->s, "q", kb[1].id);
  assert_string_equal(it.key, key);
  queue_item_release(&it);
  STATS(f->s, "q", T0, (int64_t)nels + 2, (int64_t)nels + 2, 0, 0, 0, 2);
  free(big);
}

/* Elements differing only in their last byte stay distinct (the uniqueness
 * index is a hash; lengths on and off an 8-byte boundary). */
static void test_put_last_byte(void **state) {
  struct fx *f = *state;
  const size_t lens[] = {1, 8, 65, 200};
  for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
    size_t len = lens[li];
    char q[16];
    snprintf(q, sizeof(q), "len%zu", len);
    char *el = malloc(len);
    assert_non_null(el);
    memset(el, 'u', len);
    queue_put_t *p = calloc(256, sizeof(*p));
    int64_t ids[256];
    char *buf = malloc(256 * len);
    assert_non_null(p);
    assert_non_null(buf);
    for (int pass = 0; pass < 2; pass++) {
      for (int b = 0; b < 256; b++) {
        memcpy(buf + b * len, el, len);
        buf[b * len + len - 1] = (char)b;
        p[b] = qp("", T0, b % 5, pass ? KX : OW);
        p[b].element = buf + b * len;
        p[b].len = len;
      }
      assert_int_equal(store_queue_put(f->s, q, p, 256, T0), 0);
      for (int b = 0; b < 256; b++) {
        if (p[b].result != (pass ? QPUT_KEPT : QPUT_ADDED))
          fail_msg("len %zu last byte %d pass %d: result %d", len, b, pass, p[b].result);
        if (!pass) ids[b] = p[b].id;
        else if (p[b].id != ids[b])
          fail_msg("len %zu last byte %d: id %lld then %lld", len, b, (long long)ids[b],
                   (long long)p[b].id);
      }
    }
    STATS(f->s, q, T0, 256, 256, 0, 0, 0, 1);
    queue_item_list_t l = {0};
    assert_int_equal(take(f->s, q, 1000, 0, T0, &l, NULL), 256);
    int seen[256] = {0};
    for (size_t i = 0; i < l.n; i++) {
      assert_int_equal(l.v[i].len, len);
      if (len > 1) assert_memory_equal(l.v[i].element, el, len - 1);
      seen[(unsigned char)l.v[i].element[len - 1]]++;
    }
    for (int b = 0; b < 256; b++) assert_int_equal(seen[b], 1);
    queue_item_list_release(&l);
    free(buf);
    free(p);
    free(el);
  }
}

static void test_put_batch_1000(void **state) {
  struct fx *f = *state;
  enum { N = QUEUE_BATCH_MAX };
  static char els[N][32];
  static queue_put_t p[N];
  for (int i = 0; i < N; i++) {
    snprintf(els[i], sizeof(els[i]), "https://h%d.example/%d", i % 7, i);
    p[i] = qp(els[i], T0 + i, i % 3, OW);
  }
  assert_int_equal(store_queue_put(f->s, "q", p, N, T0), 0);
  for (int i = 0; i < N; i++) {
    assert_int_equal(p[i].result, QPUT_ADDED);
    if (i) assert_true(p[i - 1].id != p[i].id);
  }
  int64_t ids[N];
  for (int i = 0; i < N; i++) ids[i] = p[i].id;
  for (int i = 0; i < N; i++) p[i] = qp(els[i], T0 + i, i % 3, OW);
  assert_int_equal(store_queue_put(f->s, "q", p, N, T0), 0);
  for (int i = 0; i < N; i++) {
    assert_int_equal(p[i].result, QPUT_KEPT);
    assert_int_equal(p[i].id, ids[i]);
  }
  queue_conf_t c = conf_of(f->s, "q");
  assert_int_equal(c.n_put, N);
  queue_conf_release(&c);
  STATS(f->s, "q", T0 + N, N, N, 0, 0, 0, 1);
  queue_stats_t st = CONSISTENT(f->s, "q", T0 + 499);
  assert_int_equal(st.past_due, 500);
  assert_int_equal(st.oldest_due_ms, T0);
  queue_item_list_t l = {0};
  assert_int_equal(take(f->s, "q", N, 0, T0 + N, &l, NULL), N);
  /* Each once: ids distinct. */
  int64_t *got = malloc(N * sizeof(*got));
  assert_non_null(got);
  for (int i = 0; i < N; i++) got[i] = l.v[i].id;
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++)
      if (got[i] == got[j]) fail_msg("id %lld taken twice", (long long)got[i]);
  free(got);
  queue_lease_t *ls = calloc(N, sizeof(*ls));
  assert_non_null(ls);
  for (int i = 0; i < N; i++) ls[i] = mklease(l.v[i].id, l.v[i].token);
  assert_int_equal(store_queue_ack(f->s, "q", ls, N, T0 + N), 0);
  for (int i = 0; i < N; i++) assert_int_equal(ls[i].result, 0);
  free(ls);
  queue_item_list_release(&l);
  STATS(f->s, "q", T0 + N, 0, 0, 0, 0, 0, 0);
  c = conf_of(f->s, "q");
  assert_int_equal(c.n_acked, N);
  queue_conf_release(&c);
}

/* One element twice in a batch: the second sees the first. */
static void test_put_batch_repeats(void **state) {
  struct fx *f = *state;
  queue_put_t p[3] = {qp("a", T0 + 10, 0, OW), qp("a", T0 + 5, 1, OW), qp("a", T0 + 1, 9, KX)};
  assert_int_equal(store_queue_put(f->s, "q", p, 3, T0), 0);
  assert_int_equal(p[0].result, QPUT_ADDED);
  assert_int_equal(p[1].result, QPUT_MOVED);
  assert_int_equal(p[2].result, QPUT_KEPT);
  assert_int_equal(p[1].id, p[0].id);
  assert_int_equal(p[2].id, p[0].id);
  queue_item_t it = must_item(f->s, "q", p[0].id);
  assert_int_equal(it.due_ms, T0 + 5);
  assert_int_equal(it.priority, 1);
  queue_item_release(&it);
  queue_conf_t c = conf_of(f->s, "q");
  assert_int_equal(c.n_put, 1);
  queue_conf_release(&c);
  STATS(f->s, "q", T0, 1, 0, 0, 0, 0, 1);
}

/* ---- take ---- */

static void test_take_order(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  int64_t next = -1;
  assert_int_equal(take(f->s, "q", 5, 0, T0, &l, &next), 0); /* unknown queue */
  assert_int_equal(next, 0);
  put1(f->s, "q", "p0d3", T0 + 3, 0, OW, T0);
  put1(f->s, "q", "p5d5", T0 + 5, 5, OW, T0);
  put1(f->s, "q", "p5d1", T0 + 1, 5, OW, T0);
  put1(f->s, "q", "m1d0", T0, -1, OW, T0);
  put1(f->s, "q", "p0d2", T0 + 2, 0, OW, T0);
  put1(f->s, "q", "future", T0 + 1000, 100, OW, T0);
  STATS(f->s, "q", T0 + 10, 6, 5, 0, 0, 0, 1);
  queue_stats_t st = CONSISTENT(f->s, "q", T0 + 10);
  assert_int_equal(st.oldest_due_ms, T0);
  /* Only what is due: at T0+2 three are (a copy of the queue). */
  put1(f->s, "d", "p0d3", T0 + 3, 0, OW, T0);
  put1(f->s, "d", "p5d5", T0 + 5, 5, OW, T0);
  put1(f->s, "d", "p5d1", T0 + 1, 5, OW, T0);
  put1(f->s, "d", "m1d0", T0, -1, OW, T0);
  put1(f->s, "d", "p0d2", T0 + 2, 0, OW, T0);
  assert_int_equal(take(f->s, "d", 10, 0, T0 + 2, &l, NULL), 3);
  assert_non_null(find_el(&l, "p5d1"));
  assert_non_null(find_el(&l, "m1d0"));
  assert_non_null(find_el(&l, "p0d2"));
  STATS(f->s, "d", T0 + 2, 2, 0, 3, 0, 0, 1);
  const char *order[] = {"p5d1", "p5d5", "p0d2", "p0d3", "m1d0"};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(take(f->s, "q", 1, 0, T0 + 10, &l, &next), 1);
    if (!el_is(&l.v[0], order[i]))
      fail_msg("take %d: got %.*s, want %s", i, (int)l.v[0].len, l.v[0].element, order[i]);
  }
  /* Nothing due; the next due time is reported (leases end later). */
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 10, &l, &next), 0);
  assert_int_equal(next, T0 + 1000);
  st = CONSISTENT(f->s, "q", T0 + 10);
  assert_int_equal(st.oldest_due_ms, T0 + 1000);
  assert_int_equal(st.past_due, 0);
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 999, &l, &next), 0);
  assert_int_equal(next, T0 + 1000);
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 1000, &l, &next), 1);
  assert_true(el_is(&l.v[0], "future"));
  queue_item_list_release(&l);

  /* max: several at once, best first. */
  for (int i = 0; i < 10; i++) {
    char el[8];
    snprintf(el, sizeof(el), "m%d", i);
    put1(f->s, "m", el, T0 + 10 - i, i % 3, OW, T0);
  }
  assert_int_equal(take(f->s, "m", 4, 0, T0 + 10, &l, NULL), 4);
  /* The four best by (priority desc, due asc): m8 (2,T0+2), m5 (2,T0+5), m2
   * (2,T0+8), m7 (1,T0+3). */
  const char *best[] = {"m8", "m5", "m2", "m7"};
  for (int i = 0; i < 4; i++)
    if (!find_el(&l, best[i])) fail_msg("max 4: %s not taken", best[i]);
  assert_int_equal(take(f->s, "m", 100, 0, T0 + 10, &l, NULL), 6);
  assert_int_equal(take(f->s, "m", 100, 0, T0 + 10, &l, &next), 0);
  /* Only leases pending: the next lease end. */
  assert_int_equal(next, T0 + 10 + 30000);
  /* Appends: take keeps what out held. */
  put1(f->s, "m", "extra", T0, 0, OW, T0);
  queue_item_list_release(&l);
  queue_item_t *keep = queue_item_list_add(&l);
  assert_non_null(keep);
  keep->id = -7;
  assert_int_equal(store_queue_take(f->s, "m", 5, 0, T0 + 10, &l, NULL), 0);
  assert_int_equal(l.n, 2);
  assert_int_equal(l.v[0].id, -7);
  assert_true(el_is(&l.v[1], "extra"));
  queue_item_list_release(&l);
}

static void test_take_visibility_token(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  put1(f->s, "q", "a", T0, 2, OW, T0);
  put1(f->s, "q", "b", T0, 1, OW, T0);
  put_k(f->s, "q", "c", "kc", T0, 0, OW, T0);
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 5, &l, NULL), 1);
  queue_item_t a = l.v[0];
  assert_true(el_is(&a, "a"));
  memset(&l.v[0], 0, sizeof(l.v[0]));
  assert_int_equal(a.state, QSTATE_INFLIGHT);
  assert_int_equal(a.due_ms, T0 + 5 + 30000); /* the queue's default */
  assert_int_equal(a.deliveries, 1);
  assert_string_equal(a.key, "");
  assert_true(a.created_ms > 0);
  assert_int_equal(take(f->s, "q", 1, 5000, T0 + 5, &l, NULL), 1);
  queue_item_t b = l.v[0];
  memset(&l.v[0], 0, sizeof(l.v[0]));
  assert_true(el_is(&b, "b"));
  assert_int_equal(b.due_ms, T0 + 5 + 5000);
  STATS(f->s, "q", T0 + 5, 1, 1, 2, 0, 0, 2);
  /* The listing shows the lease. */
  queue_item_t it = must_item(f->s, "q", a.id);
  assert_int_equal(it.state, QSTATE_INFLIGHT);
  assert_int_equal(it.token, a.token);
  assert_int_equal(it.due_ms, a.due_ms);
  assert_int_equal(it.deliveries, 1);
  queue_item_release(&it);
  /* A changed default visibility applies to the next take. */
  queue_conf_t c = conf_of(f->s, "q");
  c.visibility_ms = 7000;
  assert_int_equal(store_queue_set(f->s, &c), 0);
  queue_conf_release(&c);
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 6, &l, NULL), 1);
  assert_int_equal(l.v[0].due_ms, T0 + 6 + 7000);
  assert_string_equal(l.v[0].key, "kc");
  /* Another delivery: deliveries counts, the token is new. */
  int64_t tok1 = a.token;
  assert_int_equal(nack1(f->s, "q", a.id, a.token, 0, 0, NULL, T0 + 10, NULL), 0);
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 10, &l, NULL), 1);
  assert_int_equal(l.v[0].id, a.id);
  assert_int_equal(l.v[0].deliveries, 2);
  assert_true(l.v[0].token != tok1);
  assert_int_equal(ack1(f->s, "q", a.id, tok1, T0 + 11), -ENOENT);
  assert_int_equal(ack1(f->s, "q", a.id, l.v[0].token, T0 + 11), 0);
  /* A negative visibility is bad input. */
  assert_int_equal(store_queue_take(f->s, "q", 1, -1, T0, &l, NULL), -EINVAL);
  queue_item_list_release(&l);
  queue_item_release(&a);
  queue_item_release(&b);
}

static void test_take_paused_unknown(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  queue_conf_t c;
  int64_t next = -1;
  assert_int_equal(store_queue_take(f->s, "nope", 10, 0, T0, &l, &next), 0);
  assert_int_equal(l.n, 0);
  assert_int_equal(next, 0);
  assert_int_equal(store_queue_get(f->s, "nope", &c), -ENOENT); /* not created */

  c = defaults();
  c.paused = 1;
  mkqueue(f->s, "q", &c);
  assert_int_equal(put1(f->s, "q", "a", T0, 0, OW, T0).result, QPUT_ADDED); /* puts land */
  STATS(f->s, "q", T0, 1, 1, 0, 0, 0, 1);
  assert_int_equal(take(f->s, "q", 10, 0, T0, &l, NULL), 0);
  c = conf_of(f->s, "q");
  assert_int_equal(c.paused, 1);
  c.paused = 0;
  assert_int_equal(store_queue_set(f->s, &c), 0);
  queue_conf_release(&c);
  assert_int_equal(take(f->s, "q", 10, 0, T0, &l, NULL), 1);
  queue_item_list_release(&l);
}

static void test_take_expired_leases(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  queue_conf_t c = defaults();
  c.max_deliveries = 2;
  c.visibility_ms = 1000;
  mkqueue(f->s, "q", &c);
  put1(f->s, "q", "a", T0, 0, OW, T0);
  queue_item_t a1 = take_one(f->s, "q", "a", 0, T0);
  assert_int_equal(a1.due_ms, T0 + 1000);
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 500, &l, NULL), 0);
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 999, &l, NULL), 0); /* lease until T0+1000 */
  /* Expired: delivered again, with a new token. (Exactly at T0+1000 is left
   * open: "ended before now" against "in flight until lease_until_ms".) */
  queue_item_t a2 = take_one(f->s, "q", "a", 0, T0 + 1001);
  assert_int_equal(a2.id, a1.id);
  assert_int_equal(a2.deliveries, 2);
  assert_true(a2.token != a1.token);
  STATS(f->s, "q", T0 + 1001, 0, 0, 1, 0, 0, 1);
  assert_int_equal(ack1(f->s, "q", a1.id, a1.token, T0 + 1002), -ENOENT);
  assert_int_equal(nack1(f->s, "q", a1.id, a1.token, 0, 0, NULL, T0 + 1002, NULL), -ENOENT);
  assert_int_equal(extend1(f->s, "q", a1.id, a1.token, 0, T0 + 1002), -ENOENT);
  STATS(f->s, "q", T0 + 1002, 0, 0, 1, 0, 0, 1);
  /* Its second lease runs out too: max_deliveries reached, it goes dead. */
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 2002, &l, NULL), 0);
  STATS(f->s, "q", T0 + 2002, 0, 0, 0, 1, 0, 0);
  queue_item_t it = must_item(f->s, "q", a1.id);
  assert_int_equal(it.state, QSTATE_DEAD);
  assert_int_equal(it.deliveries, 2);
  queue_item_release(&it);
  assert_int_equal(ack1(f->s, "q", a2.id, a2.token, T0 + 2003), -ENOENT);
  STATS(f->s, "q", T0 + 2003, 0, 0, 0, 1, 0, 0);

  /* Expired leases come back as due elements that compete by priority. */
  put1(f->s, "q", "lo", T0 + 3000, 0, OW, T0 + 3000);
  put1(f->s, "q", "hi", T0 + 3000, 9, OW, T0 + 3000);
  queue_item_t lo = take_one(f->s, "q", "hi", 0, T0 + 3000);
  queue_item_release(&lo);
  lo = take_one(f->s, "q", "lo", 0, T0 + 3000);
  put1(f->s, "q", "mid", T0 + 3000, 5, OW, T0 + 3000);
  /* Both leases end at T0+4000: three due at T0+4001, hi first. */
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 4001, &l, NULL), 1);
  assert_true(el_is(&l.v[0], "hi"));
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 4001, &l, NULL), 1);
  assert_true(el_is(&l.v[0], "mid"));
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 4001, &l, NULL), 1);
  assert_true(el_is(&l.v[0], "lo"));
  queue_item_list_release(&l);
  queue_item_release(&lo);
  queue_item_release(&a1);
  queue_item_release(&a2);
}

/* ---- ack ---- */

static void test_ack(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  put1(f->s, "q", "a", T0, 2, OW, T0);
  put1(f->s, "q", "b", T0, 1, OW, T0);
  put1(f->s, "q", "c", T0, 0, OW, T0);
  assert_int_equal(take(f->s, "q", 3, 0, T0, &l, NULL), 3);
  const queue_item_t *a = find_el(&l, "a"), *b = find_el(&l, "b"), *c = find_el(&l, "c");
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(c);
  assert_int_equal(ack1(f->s, "q", a->id, a->token, T0 + 1), 0);
  STATS(f->s, "q", T0 + 1, 0, 0, 2, 0, 0, 1);
  queue_conf_t conf = conf_of(f->s, "q");
  assert_int_equal(conf.n_acked, 1);
  queue_conf_release(&conf);
  queue_item_t it;
  assert_int_equal(item_get(f->s, "q", a->id, &it), -ENOENT);
  /* Already acked, wrong token, unknown id: refused per lease, the call is 0. */
  queue_lease_t ls[4] = {mklease(a->id, a->token), mklease(b->id, b->token + 1),
                         mklease(b->id, b->token), mklease(INT64_C(999999999), 1)};
  for (int i = 0; i < 4; i++) ls[i].result = 777;
  assert_int_equal(store_queue_ack(f->s, "q", ls, 4, T0 + 2), 0);
  assert_int_equal(ls[0].result, -ENOENT);
  assert_int_equal(ls[1].result, -ENOENT);
  assert_int_equal(ls[2].result, 0);
  assert_int_equal(ls[3].result, -ENOENT);
  STATS(f->s, "q", T0 + 2, 0, 0, 1, 0, 0, 1);
  conf = conf_of(f->s, "q");
  assert_int_equal(conf.n_acked, 2);
  assert_int_equal(conf.n_put, 3);
  queue_conf_release(&conf);
  /* A token of one element does not ack another. */
  if (b->token != c->token) assert_int_equal(ack1(f->s, "q", c->id, b->token, T0 + 3), -ENOENT);
  assert_int_equal(ack1(f->s, "q", c->id, c->token, T0 + 3), 0);
  STATS(f->s, "q", T0 + 3, 0, 0, 0, 0, 0, 0);
  /* A lease of another queue is not held here. */
  put1(f->s, "other", "a", T0, 0, OW, T0);
  queue_item_t o = take_one(f->s, "other", "a", 0, T0 + 3);
  assert_int_equal(ack1(f->s, "q", o.id, o.token, T0 + 3), -ENOENT);
  assert_int_equal(nack1(f->s, "q", o.id, o.token, 0, 0, NULL, T0 + 3, NULL), -ENOENT);
  assert_int_equal(extend1(f->s, "q", o.id, o.token, 0, T0 + 3), -ENOENT);
  STATS(f->s, "other", T0 + 3, 0, 0, 1, 0, 0, 1);
  assert_int_equal(ack1(f->s, "other", o.id, o.token, T0 + 3), 0);
  queue_item_release(&o);
  /* Acked elements come back as new. */
  assert_int_equal(put1(f->s, "q", "a", T0, 0, KX, T0 + 3).result, QPUT_ADDED);
  queue_item_list_release(&l);

  /* keep_done: a tombstone that keep-existing does not revive. */
  queue_conf_t kd = defaults();
  kd.keep_done = 1;
  mkqueue(f->s, "kd", &kd);
  put1(f->s, "kd", "x", T0, 0, OW, T0);
  queue_item_t x = take_one(f->s, "kd", "x", 0, T0);
  assert_int_equal(ack1(f->s, "kd", x.id, x.token, T0 + 50), 0);
  STATS(f->s, "kd", T0 + 50, 0, 0, 0, 0, 1, 0);
  it = must_item(f->s, "kd", x.id);
  assert_int_equal(it.state, QSTATE_DONE);
  assert_true(el_is(&it, "x"));
  assert_int_equal(it.due_ms, T0 + 50); /* when it got there */
  queue_item_release(&it);
  conf = conf_of(f->s, "kd");
  assert_int_equal(conf.n_done, 1);
  assert_int_equal(conf.n_acked, 1);
  queue_conf_release(&conf);
  queue_put_t p = put1(f->s, "kd", "x", T0, 0, KX, T0 + 60);
  assert_int_equal(p.result, QPUT_KEPT);
  assert_int_equal(p.id, x.id);
  assert_int_equal(take(f->s, "kd", 10, 0, T0 + 60, &l, NULL), 0);
  assert_int_equal(ack1(f->s, "kd", x.id, x.token, T0 + 61), -ENOENT);
  STATS(f->s, "kd", T0 + 61, 0, 0, 0, 0, 1, 0);
  queue_item_release(&x);
  queue_item_list_release(&l);
}

/* ---- nack ---- */

static void test_nack_delay(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  int64_t next;
  int dead = -1;
  put1(f->s, "q", "a", T0, 0, OW, T0);
  queue_item_t a = take_one(f->s, "q", "a", 0, T0);
  assert_int_equal(nack1(f->s, "q", a.id, a.token, 5000, 0, NULL, T0 + 100, &dead), 0);
  assert_int_equal(dead, 0);
  queue_item_t it = must_item(f->s, "q", a.id);
  assert_int_equal(it.state, QSTATE_WAITING);
  assert_int_equal(it.due_ms, T0 + 5100);
  assert_int_equal(it.deliveries, 1);
  assert_null(it.error);
  queue_item_release(&it);
  STATS(f->s, "q", T0 + 100, 1, 0, 0, 0, 0, 1);
  /* The old lease is gone. */
  assert_int_equal(ack1(f->s, "q", a.id, a.token, T0 + 101), -ENOENT);
  assert_int_equal(nack1(f->s, "q", a.id, a.token, 0, 0, NULL, T0 + 101, &dead), -ENOENT);
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 5099, &l, &next), 0);
  assert_int_equal(next, T0 + 5100);
  queue_item_release(&a);
  a = take_one(f->s, "q", "a", 0, T0 + 5100);
  assert_int_equal(a.deliveries, 2);
  /* Delay 0: due at once. */
  assert_int_equal(nack1(f->s, "q", a.id, a.token, 0, 0, NULL, T0 + 5200, &dead), 0);
  STATS(f->s, "q", T0 + 5200, 1, 1, 0, 0, 0, 1);
  queue_item_release(&a);
  a = take_one(f->s, "q", "a", 0, T0 + 5200);
  queue_item_release(&a);
  queue_item_list_release(&l);
}

static void test_nack_backoff(void **state) {
  struct fx *f = *state;
  queue_conf_t c = defaults();
  c.backoff_ms = 1000;
  c.backoff_max_ms = 5000;
  c.max_deliveries = 0;
  mkqueue(f->s, "q", &c);
  put1(f->s, "q", "a", T0, 0, OW, T0);
  int64_t now = T0;
  for (int d = 1; d <= 7; d++) {
    queue_item_t a = take_one(f->s, "q", "a", 0, now);
    assert_int_equal(a.deliveries, d);
    int dead = -1;
    assert_int_equal(nack1(f->s, "q", a.id, a.token, -1, 0, NULL, now, &dead), 0);
    assert_int_equal(dead, 0);
    queue_item_t it = must_item(f->s, "q", a.id);
    int64_t base = 1000LL << (d - 1);
    if (base > 5000) base = 5000;
    int64_t delay = it.due_ms - now;
    if (delay < base * 3 / 4 - 1 || delay > base * 5 / 4 + 1)
      fail_msg("delivery %d: backoff %lld ms, want %lld +-25%%", d, (long long)delay,
               (long long)base);
    assert_int_equal(it.state, QSTATE_WAITING);
    queue_item_release(&it);
    queue_item_release(&a);
    now += delay;
  }
  /* Jitter: forty elements nacked alike do not all get one delay. */
  queue_item_list_t l = {0};
  for (int i = 0; i < 40; i++) {
    char el[8];
    snprintf(el, sizeof(el), "j%d", i);
    put1(f->s, "j", el, T0, 0, OW, T0);
  }
  assert_int_equal(take(f->s, "j", 40, 0, T0, &l, NULL), 40);
  int64_t first = -1;
  int differ = 0;
  for (size_t i = 0; i < l.n; i++) {
    assert_int_equal(nack1(f->s, "j", l.v[i].id, l.v[i].token, -1, 0, NULL, T0, NULL), 0);
    queue_item_t it = must_item(f->s, "j", l.v[i].id);
    int64_t delay = it.due_ms - T0;
    assert_true(delay >= 750 - 1 && delay <= 1250 + 1);
    if (first < 0) first = delay;
    else if (delay != first) differ = 1;
    queue_item_release(&it);
  }
  assert_true(differ);
  queue_item_list_release(&l);
}

static void test_nack_retry_after(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  int64_t next;
  put_k(f->s, "q", "a1", "A", T0, 10, OW, T0);
  put_k(f->s, "q", "a2", "A", T0, 9, OW, T0);
  put_k(f->s, "q", "b1", "B", T0, 0, OW, T0);
  put_k(f->s, "q", "b2", "B", T0 + 2000, 0, OW, T0);
  queue_item_t a1 = take_one(f->s, "q", "a1", 0, T0);
  int dead = -1;
  assert_int_equal(nack1(f->s, "q", a1.id, a1.token, 0, 10000, "429", T0, &dead), 0);
  assert_int_equal(dead, 0);
  queue_item_t it = must_item(f->s, "q", a1.id);
  assert_int_equal(it.state, QSTATE_WAITING);
  if (it.due_ms < T0 + 10000)
    fail_msg("retry_after 10 s: due at +%lld ms", (long long)(it.due_ms - T0));
  assert_string_equal(it.error, "429");
  queue_item_release(&it);
  STATS(f->s, "q", T0 + 1, 4, 2, 0, 0, 0, 2);
  /* Key A takes nothing; key B does. */
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 1, &l, NULL), 1);
  assert_true(el_is(&l.v[0], "b1"));
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 2000, &l, NULL), 1);
  assert_true(el_is(&l.v[0], "b2"));
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 9999, &l, &next), 0);
  if (next <= T0 + 9999 || next > T0 + 10000)
    fail_msg("blocked key: next_ms +%lld, want +10000 (the key's wake-up)",
             (long long)(next - T0));
  /* After the block both of A come, a1 first. */
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 10001, &l, NULL), 1);
  assert_true(el_is(&l.v[0], "a1"));
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 10001, &l, NULL), 1);
  assert_true(el_is(&l.v[0], "a2"));
  queue_item_release(&a1);

  /* A delay beyond retry_after wins for the element; the key opens at
   * retry_after. */
  put_k(f->s, "r", "x1", "X", T0, 5, OW, T0);
  put_k(f->s, "r", "x2", "X", T0, 0, OW, T0);
  queue_item_t x1 = take_one(f->s, "r", "x1", 0, T0);
  assert_int_equal(nack1(f->s, "r", x1.id, x1.token, 20000, 5000, NULL, T0, NULL), 0);
  it = must_item(f->s, "r", x1.id);
  assert_int_equal(it.due_ms, T0 + 20000);
  queue_item_release(&it);
  assert_int_equal(take(f->s, "r", 10, 0, T0 + 4999, &l, NULL), 0);
  assert_int_equal(take(f->s, "r", 10, 0, T0 + 5001, &l, NULL), 1);
  assert_true(el_is(&l.v[0], "x2"));
  queue_item_release(&x1);

  /* Backoff and retry_after: due no sooner than retry_after. */
  put_k(f->s, "s", "y", "Y", T0, 0, OW, T0);
  queue_item_t y = take_one(f->s, "s", "y", 0, T0);
  assert_int_equal(nack1(f->s, "s", y.id, y.token, -1, 60000, NULL, T0, NULL), 0);
  it = must_item(f->s, "s", y.id);
  assert_true(it.due_ms >= T0 + 60000);
  queue_item_release(&it);
  queue_item_release(&y);
  queue_item_list_release(&l);
}

/* A released delivery does not count: never dead, due at once. */
static void test_nack_release(void **state) {
  struct fx *f = *state;
  queue_conf_t c = defaults();
  c.max_deliveries = 1;
  mkqueue(f->s, "q", &c);
  put1(f->s, "q", "a", T0, 0, OW, T0);
  for (int round = 0; round < 3; round++) {
    queue_item_t a = take_one(f->s, "q", "a", 0, T0 + round);
    assert_int_equal(a.deliveries, 1);
    queue_lease_t l = {.id = a.id, .token = a.token, .delay_ms = -1, .release = 1};
    assert_int_equal(store_queue_nack(f->s, "q", &l, 1, T0 + round), 0);
    assert_int_equal(l.result, 0);
    assert_int_equal(l.dead, 0);
    queue_item_t it = must_item(f->s, "q", a.id);
    assert_int_equal(it.state, QSTATE_WAITING);
    assert_int_equal(it.deliveries, 0);
    assert_int_equal(it.due_ms, T0 + round);
    queue_item_release(&it);
    queue_item_release(&a);
  }
  /* The counted delivery after them is the last. */
  queue_item_t a = take_one(f->s, "q", "a", 0, T0 + 10);
  int dead = -1;
  assert_int_equal(nack1(f->s, "q", a.id, a.token, 0, 0, "x", T0 + 10, &dead), 0);
  assert_int_equal(dead, 1);
  STATS(f->s, "q", T0 + 10, 0, 0, 0, 1, 0, 0);
  queue_item_release(&a);
}

static void test_nack_dead(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  queue_conf_t c = defaults();
  c.max_deliveries = 3;
  mkqueue(f->s, "q", &c);
  put1(f->s, "q", "a", T0, 0, OW, T0);
  put1(f->s, "q", "other", T0 + 100000, 0, OW, T0);
  const char *errs[] = {"e1", NULL, "boom"};
  int64_t now = T0;
  for (int d = 1; d <= 3; d++) {
    queue_item_t a = take_one(f->s, "q", "a", 0, now);
    assert_int_equal(a.deliveries, d);
    /* A stale nack does nothing. */
    int dead = -1;
    assert_int_equal(nack1(f->s, "q", a.id, a.token + 1, 0, 0, "stale", now, &dead), -ENOENT);
    assert_int_equal(nack1(f->s, "q", a.id, a.token, 0, 0, errs[d - 1], now, &dead), 0);
    queue_item_t it = must_item(f->s, "q", a.id);
    if (d < 3) {
      assert_int_equal(dead, 0);
      assert_int_equal(it.state, QSTATE_WAITING);
      STATS(f->s, "q", now, 2, 1, 0, 0, 0, 1);
    } else {
      assert_int_equal(dead, 1);
      assert_int_equal(it.state, QSTATE_DEAD);
      assert_int_equal(it.deliveries, 3);
      assert_int_equal(it.due_ms, now); /* when it got there */
      STATS(f->s, "q", now, 1, 0, 0, 1, 0, 1);
    }
    if (d == 1) assert_string_equal(it.error, "e1");
    if (d == 3) assert_string_equal(it.error, "boom");
    queue_item_release(&it);
    queue_item_release(&a);
    now += 10;
  }
  /* Listed among the dead with its error; take gives nothing. */
  queue_filter_t fl;
  memset(&fl, 0, sizeof(fl));
  fl.states = 1u << QSTATE_DEAD;
  assert_int_equal(store_queue_items(f->s, "q", &fl, &l), 0);
  assert_int_equal(l.n, 1);
  assert_true(el_is(&l.v[0], "a"));
  assert_string_equal(l.v[0].error, "boom");
  queue_item_list_release(&l);
  assert_int_equal(take(f->s, "q", 10, 0, now, &l, NULL), 0);
  queue_conf_t got = conf_of(f->s, "q");
  assert_int_equal(got.n_dead, 1);
  queue_conf_release(&got);

  /* max_deliveries 0: never dead. */
  c = defaults();
  c.max_deliveries = 0;
  mkqueue(f->s, "never", &c);
  put1(f->s, "never", "z", T0, 0, OW, T0);
  for (int d = 1; d <= 12; d++) {
    queue_item_t z = take_one(f->s, "never", "z", 0, T0 + d);
    int dead = -1;
    assert_int_equal(nack1(f->s, "never", z.id, z.token, 0, 0, NULL, T0 + d, &dead), 0);
    assert_int_equal(dead, 0);
    queue_item_release(&z);
  }
  STATS(f->s, "never", T0 + 20, 1, 1, 0, 0, 0, 1);
  queue_item_list_release(&l);
}

/* ---- extend ---- */

static void test_extend(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  queue_conf_t c = defaults();
  c.visibility_ms = 1000;
  mkqueue(f->s, "q", &c);
  put1(f->s, "q", "a", T0, 0, OW, T0);
  queue_item_t a = take_one(f->s, "q", "a", 0, T0);
  assert_int_equal(extend1(f->s, "q", a.id, a.token, 5000, T0 + 900), 0);
  queue_item_t it = must_item(f->s, "q", a.id);
  assert_int_equal(it.state, QSTATE_INFLIGHT);
  assert_int_equal(it.due_ms, T0 + 5900);
  assert_int_equal(it.token, a.token);
  assert_int_equal(it.deliveries, 1);
  queue_item_release(&it);
  /* Not delivered again at the old expiry. */
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 1500, &l, NULL), 0);
  STATS(f->s, "q", T0 + 1500, 0, 0, 1, 0, 0, 1);
  /* 0 = the queue's default. */
  assert_int_equal(extend1(f->s, "q", a.id, a.token, 0, T0 + 5000), 0);
  it = must_item(f->s, "q", a.id);
  assert_int_equal(it.due_ms, T0 + 6000);
  queue_item_release(&it);
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 5950, &l, NULL), 0);
  assert_int_equal(extend1(f->s, "q", a.id, a.token + 1, 0, T0 + 5950), -ENOENT);
  assert_int_equal(ack1(f->s, "q", a.id, a.token, T0 + 5990), 0);
  assert_int_equal(extend1(f->s, "q", a.id, a.token, 0, T0 + 5991), -ENOENT);
  assert_int_equal(extend1(f->s, "q", 987654321, 1, 0, T0 + 5991), -ENOENT);
  queue_item_release(&a);

  /* Expired and taken again: the first holder cannot extend. */
  put1(f->s, "q", "b", T0 + 10000, 0, OW, T0 + 10000);
  queue_item_t b1 = take_one(f->s, "q", "b", 0, T0 + 10000);
  queue_item_t b2 = take_one(f->s, "q", "b", 0, T0 + 11001);
  assert_int_equal(extend1(f->s, "q", b1.id, b1.token, 0, T0 + 11002), -ENOENT);
  assert_int_equal(extend1(f->s, "q", b2.id, b2.token, 0, T0 + 11002), 0);
  /* A batch: results per lease. */
  queue_lease_t ls[2] = {mklease(b1.id, b1.token), mklease(b2.id, b2.token)};
  ls[0].result = ls[1].result = 99;
  assert_int_equal(store_queue_extend(f->s, "q", ls, 2, 3000, T0 + 11100), 0);
  assert_int_equal(ls[0].result, -ENOENT);
  assert_int_equal(ls[1].result, 0);
  it = must_item(f->s, "q", b2.id);
  assert_int_equal(it.due_ms, T0 + 14100);
  queue_item_release(&it);
  assert_int_equal(store_queue_extend(f->s, "q", ls, 2, -5, T0 + 11100), -EINVAL);
  STATS(f->s, "q", T0 + 11100, 0, 0, 1, 0, 0, 1);
  queue_item_release(&b1);
  queue_item_release(&b2);
  queue_item_list_release(&l);
}

/* ---- settings, get, list, delete ---- */

static void test_settings(void **state) {
  struct fx *f = *state;
  queue_conf_t c = defaults(), got;
  c.name = strdup("s1");
  c.paused = 1;
  c.keep_done = 1;
  c.visibility_ms = 12345;
  c.max_deliveries = 7;
  c.backoff_ms = 250;
  c.backoff_max_ms = 60000;
  c.max_inflight = 40;
  c.key_mode = QKEY_HOST;
  c.key_inflight = 3;
  c.key_rate = 0.5;
  c.key_burst = 2.5;
  c.n_put = 99; /* ignored */
  c.n_waiting = 99;
  c.id = 4242;
  assert_int_equal(store_queue_set(f->s, &c), 0);
  assert_true(c.id > 0);
  assert_true(c.created_ms > 0);
  assert_int_equal(c.n_put, 0);
  assert_int_equal(c.n_waiting, 0);
  got = conf_of(f->s, "s1");
  assert_int_equal(got.id, c.id);
  assert_int_equal(got.created_ms, c.created_ms);
  assert_string_equal(got.name, "s1");
  assert_int_equal(got.paused, 1);
  assert_int_equal(got.keep_done, 1);
  assert_int_equal(got.visibility_ms, 12345);
  assert_int_equal(got.max_deliveries, 7);
  assert_int_equal(got.backoff_ms, 250);
  assert_int_equal(got.backoff_max_ms, 60000);
  assert_int_equal(got.max_inflight, 40);
  assert_int_equal(got.key_mode, QKEY_HOST);
  assert_int_equal(got.key_inflight, 3);
  assert_true(got.key_rate == 0.5);
  assert_true(got.key_burst == 2.5);
  assert_int_equal(got.n_put, 0);
  assert_int_equal(got.n_waiting, 0);
  queue_conf_release(&got);
  STATS(f->s, "s1", T0, 0, 0, 0, 0, 0, 0);

  /* An update keeps id and created_ms and fills the counters. */
  put1(f->s, "s1", "http://a/", T0, 0, OW, T0);
  int64_t id = c.id, created = c.created_ms;
  c.id = 0;
  c.created_ms = 0;
  c.paused = 0;
  c.key_mode = QKEY_NONE;
  c.max_deliveries = 0;
  c.key_rate = 0;
  assert_int_equal(store_queue_set(f->s, &c), 0);
  assert_int_equal(c.id, id);
  assert_int_equal(c.created_ms, created);
  assert_int_equal(c.n_waiting, 1);
  assert_int_equal(c.n_put, 1);
  got = conf_of(f->s, "s1");
  assert_int_equal(got.paused, 0);
  assert_int_equal(got.key_mode, QKEY_NONE);
  assert_int_equal(got.max_deliveries, 0);
  assert_true(got.key_rate == 0);
  assert_int_equal(got.n_waiting, 1);
  queue_conf_release(&got);

  /* Invalid settings: -EINVAL, nothing created or changed. */
  for (int i = 0; i < 10; i++) {
    queue_conf_t b = defaults();
    b.name = strdup(i % 2 ? "s1" : "s2");
    switch (i) {
    case 0: b.visibility_ms = 0; break;
    case 1: b.visibility_ms = -1; break;
    case 2: b.max_deliveries = -1; break;
    case 3: b.backoff_ms = -1; break;
    case 4: b.backoff_max_ms = -1; break;
    case 5: b.max_inflight = -1; break;
    case 6: b.key_inflight = -1; break;
    case 7: b.key_rate = -0.5; break;
    case 8: b.key_rate = NAN; break;
    case 9: b.key_mode = QKEY_N; break;
    }
    if (store_queue_set(f->s, &b) != -EINVAL) fail_msg("bad setting %d accepted", i);
    queue_conf_release(&b);
  }
  queue_conf_t b = defaults();
  b.name = strdup("s2");
  b.key_burst = -1;
  assert_int_equal(store_queue_set(f->s, &b), -EINVAL);
  b.key_burst = NAN;
  assert_int_equal(store_queue_set(f->s, &b), -EINVAL);
  queue_conf_release(&b);
  assert_int_equal(store_queue_get(f->s, "s2", &got), -ENOENT);
  got = conf_of(f->s, "s1");
  assert_int_equal(got.visibility_ms, 12345);
  assert_int_equal(got.max_inflight, 40);
  queue_conf_release(&got);
  queue_conf_release(&c);

  /* Unknown queue: -ENOENT for everything but put and take. */
  queue_stats_t st;
  queue_item_list_t l = {0};
  int64_t n = 5;
  assert_int_equal(store_queue_get(f->s, "nope", &got), -ENOENT);
  assert_int_equal(store_queue_delete(f->s, "nope"), -ENOENT);
  assert_int_equal(store_queue_stats(f->s, "nope", T0, &st), -ENOENT);
  assert_int_equal(store_queue_items(f->s, "nope", NULL, &l), -ENOENT);
  assert_int_equal(store_queue_requeue(f->s, "nope", NULL, T0, T0, &n), -ENOENT);
  assert_int_equal(store_queue_purge(f->s, "nope", NULL, T0, &n), -ENOENT);
  /* ack/nack/extend: the queue is unknown (-ENOENT), or the call is 0 and each
   * lease is refused; either way nothing is created. */
  queue_lease_t ls = mklease(1, 1);
  ls.result = 5;
  int rc = store_queue_ack(f->s, "nope", &ls, 1, T0);
  assert_true(rc == -ENOENT || (rc == 0 && ls.result == -ENOENT));
  ls.result = 5;
  rc = store_queue_nack(f->s, "nope", &ls, 1, T0);
  assert_true(rc == -ENOENT || (rc == 0 && ls.result == -ENOENT));
  ls.result = 5;
  rc = store_queue_extend(f->s, "nope", &ls, 1, 0, T0);
  assert_true(rc == -ENOENT || (rc == 0 && ls.result == -ENOENT));
  assert_int_equal(store_queue_get(f->s, "nope", &got), -ENOENT);
  queue_item_list_release(&l);
}

static void test_list_delete(void **state) {
  struct fx *f = *state;
  queue_conf_list_t l = {0};
  assert_int_equal(store_queues_list(f->s, NULL, 0, &l), 0);
  assert_int_equal(l.n, 0);
  queue_conf_list_release(&l);
  const char *names[] = {"b", "a", "cd", "a1", "ab"};
  for (int i = 0; i < 5; i++) {
    if (i % 2) {
      queue_conf_t c = defaults();
      c.max_inflight = i;
      mkqueue(f->s, names[i], &c);
    } else {
      put1(f->s, names[i], "e", T0, 0, OW, T0);
    }
  }
  const char *sorted[] = {"a", "a1", "ab", "b", "cd"};
  assert_int_equal(store_queues_list(f->s, NULL, 0, &l), 0);
  assert_int_equal(l.n, 5);
  for (int i = 0; i < 5; i++) assert_string_equal(l.v[i].name, sorted[i]);
  assert_int_equal(l.v[3].n_waiting, 1); /* "b": counters too */
  assert_int_equal(l.v[0].max_inflight, 1);
  queue_conf_list_release(&l);
  assert_int_equal(store_queues_list(f->s, "a", 2, &l), 0);
  assert_int_equal(l.n, 2);
  assert_string_equal(l.v[0].name, "a1");
  assert_string_equal(l.v[1].name, "ab");
  queue_conf_list_release(&l);
  assert_int_equal(store_queues_list(f->s, "b", 0, &l), 0);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.v[0].name, "cd");
  queue_conf_list_release(&l);
  assert_int_equal(store_queues_list(f->s, "cd", 0, &l), 0);
  assert_int_equal(l.n, 0);
  queue_conf_list_release(&l);
  /* after need not be a queue */
  assert_int_equal(store_queues_list(f->s, "a0", 1, &l), 0);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.v[0].name, "a1");
  queue_conf_list_release(&l);

  /* Delete takes the elements along; a new put starts fresh. */
  queue_item_list_t il = {0};
  put1(f->s, "b", "f", T0, 0, OW, T0);
  assert_int_equal(take(f->s, "b", 1, 0, T0, &il, NULL), 1);
  queue_item_t held = il.v[0];
  memset(&il.v[0], 0, sizeof(il.v[0]));
  assert_int_equal(store_queue_delete(f->s, "b"), 0);
  queue_conf_t c;
  assert_int_equal(store_queue_get(f->s, "b", &c), -ENOENT);
  assert_int_equal(store_queue_delete(f->s, "b"), -ENOENT);
  assert_int_equal(store_queues_list(f->s, NULL, 0, &l), 0);
  assert_int_equal(l.n, 4);
  queue_conf_list_release(&l);
  assert_int_equal(put1(f->s, "b", "e", T0, 0, KX, T0).result, QPUT_ADDED);
  assert_int_equal(put1(f->s, "b", "f", T0, 0, KX, T0).result, QPUT_ADDED);
  c = conf_of(f->s, "b");
  assert_int_equal(c.n_put, 2);
  assert_int_equal(c.n_acked, 0);
  assert_int_equal(c.max_inflight, 0);
  queue_conf_release(&c);
  STATS(f->s, "b", T0, 2, 2, 0, 0, 0, 1);
  queue_lease_t ls = mklease(held.id, held.token);
  ls.result = 5;
  assert_int_equal(store_queue_ack(f->s, "b", &ls, 1, T0), 0);
  assert_int_equal(ls.result, -ENOENT);
  STATS(f->s, "b", T0, 2, 2, 0, 0, 0, 1);
  queue_item_release(&held);
  queue_item_list_release(&il);
  /* Other queues are untouched, and elements of one queue are not another's. */
  STATS(f->s, "a", T0, 0, 0, 0, 0, 0, 0);
  STATS(f->s, "cd", T0, 1, 1, 0, 0, 0, 1);
  assert_int_equal(put1(f->s, "a", "e", T0, 0, KX, T0).result, QPUT_ADDED);
}

static void test_invalid_names(void **state) {
  struct fx *f = *state;
  char longname[202];
  memset(longname, 'n', 201);
  longname[201] = 0;
  const char *bad[] = {NULL, "", ".", "..", "a/b", "a\\b", "a\nb", "\xff", longname};
  queue_put_t p = qp("x", T0, 0, OW);
  queue_item_list_t l = {0};
  queue_lease_t ls = mklease(1, 1);
  queue_conf_t c;
  queue_stats_t st;
  int64_t n;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const char *q = bad[i];
    assert_int_equal(store_queue_put(f->s, q, &p, 1, T0), -EINVAL);
    assert_int_equal(store_queue_take(f->s, q, 1, 0, T0, &l, NULL), -EINVAL);
    assert_int_equal(store_queue_ack(f->s, q, &ls, 1, T0), -EINVAL);
    assert_int_equal(store_queue_nack(f->s, q, &ls, 1, T0), -EINVAL);
    assert_int_equal(store_queue_extend(f->s, q, &ls, 1, 0, T0), -EINVAL);
    assert_int_equal(store_queue_get(f->s, q, &c), -EINVAL);
    assert_int_equal(store_queue_delete(f->s, q), -EINVAL);
    assert_int_equal(store_queue_stats(f->s, q, T0, &st), -EINVAL);
    assert_int_equal(store_queue_items(f->s, q, NULL, &l), -EINVAL);
    assert_int_equal(store_queue_requeue(f->s, q, NULL, T0, T0, &n), -EINVAL);
    assert_int_equal(store_queue_purge(f->s, q, NULL, T0, &n), -EINVAL);
    c = defaults();
    c.name = q ? strdup(q) : NULL;
    assert_int_equal(store_queue_set(f->s, &c), -EINVAL);
    queue_conf_release(&c);
  }
  /* 200 bytes is fine. */
  longname[200] = 0;
  assert_int_equal(store_queue_put(f->s, longname, &p, 1, T0), 0);
  queue_conf_list_t cl = {0};
  assert_int_equal(store_queues_list(f->s, NULL, 0, &cl), 0);
  assert_int_equal(cl.n, 1);
  assert_string_equal(cl.v[0].name, longname);
  queue_conf_list_release(&cl);
  /* A bad filter is bad input too. */
  queue_filter_t fl;
  memset(&fl, 0, sizeof(fl));
  fl.states = 1u << QSTATE_N;
  assert_int_equal(store_queue_items(f->s, longname, &fl, &l), -EINVAL);
  memset(&fl, 0, sizeof(fl));
  fl.nids = 2;
  assert_int_equal(store_queue_items(f->s, longname, &fl, &l), -EINVAL);
  assert_int_equal(store_queue_purge(f->s, longname, &fl, T0, &n), -EINVAL);
  assert_int_equal(store_queue_requeue(f->s, longname, &fl, T0, T0, &n), -EINVAL);
  /* A bad policy. */
  p.policy = QPOLICY_N;
  assert_int_equal(store_queue_put(f->s, longname, &p, 1, T0), -EINVAL);
  STATS(f->s, longname, T0, 1, 1, 0, 0, 0, 1);
}

/* ---- keys and politeness ---- */

static void derive(queue_key_mode_t m, const char *el, const char *want) {
  char out[300];
  memset(out, 'Z', sizeof(out));
  queue_key_derive(m, el, strlen(el), out, sizeof(out));
  if (strcmp(out, want) != 0) fail_msg("key of '%s' = '%s', want '%s'", el, out, want);
}

static void test_key_derive(void **state) {
  derive(QKEY_HOST, "https://example.com/x", "example.com");
  derive(QKEY_HOST, "http://example.com", "example.com");
  derive(QKEY_HOST, "http://example.com?q=1", "example.com");
  derive(QKEY_HOST, "http://example.com#frag", "example.com");
  derive(QKEY_HOST, "HTTP://User:Pw@WWW.Example.COM:8080/Path?Q", "www.example.com");
  derive(QKEY_HOST, "http://a@b@host.org/", "host.org");
  derive(QKEY_HOST, "http://host.org/p@q", "host.org");
  derive(QKEY_HOST, "http://[2001:DB8::1]:8080/x", "[2001:db8::1]");
  derive(QKEY_HOST, "http://[::1]/", "[::1]");
  derive(QKEY_HOST, "http://user@[fe80::1]/", "[fe80::1]");
  derive(QKEY_HOST, "svn+ssh.x-y://Host/", "host");
  derive(QKEY_HOST, "http://127.0.0.1:80/", "127.0.0.1");
  derive(QKEY_HOST, "example.com/path", "");
  derive(QKEY_HOST, "mailto:someone@example.com", "");
  derive(QKEY_HOST, "1http://host/", "");
  derive(QKEY_HOST, "://host/", "");
  derive(QKEY_HOST, "http:/host/", "");
  derive(QKEY_HOST, "", "");
  derive(QKEY_HOST, "just some words", "");
  derive(QKEY_HOST, "http:///path", "");
  derive(QKEY_NONE, "http://example.com/", "");
  /* len bounds the element; cap bounds out. */
  char out[8];
  queue_key_derive(QKEY_HOST, "http://host.example/", 11, out, sizeof(out));
  assert_string_equal(out, "host");
  queue_key_derive(QKEY_HOST, "http://abcdefghijk/", 19, out, 4);
  assert_string_equal(out, "abc");
  static const char bin[] = {'h', 't', 't', 'p', ':', '/', '/', 'H', 0, 'x', '/'};
  char out2[16];
  queue_key_derive(QKEY_HOST, bin, sizeof(bin), out2, sizeof(out2));
  assert_int_equal(out2[0], 'h');
  out[0] = 'Z';
  queue_key_derive(QKEY_HOST, "http://h/", 9, out, 1);
  assert_int_equal(out[0], '\0');
}

static void test_key_mode_host(void **state) {
  struct fx *f = *state;
  put1(f->s, "q", "http://early.com/1", T0, 0, OW, T0); /* key_mode none: "" */
  queue_conf_t c = conf_of(f->s, "q");
  c.key_mode = QKEY_HOST;
  assert_int_equal(store_queue_set(f->s, &c), 0);
  queue_conf_release(&c);
  struct {
    const char *el, *key, *want;
  } cases[] = {
      {"https://User@Example.COM:8443/x", NULL, "example.com"},
      {"http://example.com/y", NULL, "example.com"},
      {"http://[2001:db8::1]:81/", NULL, "[2001:db8::1]"},
      {"not a url", NULL, ""},
      {"http://other.org/", "explicit", "explicit"},
      {"http://third.net/", "", ""},
  };
  int64_t ids[6];
  for (int i = 0; i < 6; i++) {
    queue_put_t p = put_k(f->s, "q", cases[i].el, cases[i].key, T0, 0, OW, T0);
    ids[i] = p.id;
  }
  for (int i = 0; i < 6; i++) {
    queue_item_t it = must_item(f->s, "q", ids[i]);
    if (strcmp(it.key, cases[i].want) != 0)
      fail_msg("key of %s = '%s', want '%s'", cases[i].el, it.key, cases[i].want);
    queue_item_release(&it);
  }
  queue_filter_t fl;
  memset(&fl, 0, sizeof(fl));
  fl.prefix = "http://early.com/";
  queue_item_list_t l = {0};
  assert_int_equal(store_queue_items(f->s, "q", &fl, &l), 0);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.v[0].key, ""); /* a changed key_mode applies to later puts */
  queue_item_list_release(&l);
  /* Keys: example.com, [2001:db8::1], "", explicit. */
  STATS(f->s, "q", T0, 7, 7, 0, 0, 0, 4);
}

static void test_max_inflight(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  queue_conf_t c = defaults();
  c.max_inflight = 2;
  mkqueue(f->s, "q", &c);
  for (int i = 0; i < 5; i++) {
    char el[8];
    snprintf(el, sizeof(el), "e%d", i);
    put_k(f->s, "q", el, i % 2 ? "A" : "B", T0, 5 - i, OW, T0);
  }
  assert_int_equal(take(f->s, "q", 10, 0, T0, &l, NULL), 2);
  assert_non_null(find_el(&l, "e0"));
  assert_non_null(find_el(&l, "e1"));
  queue_item_list_t l2 = {0};
  assert_int_equal(take(f->s, "q", 10, 0, T0, &l2, NULL), 0);
  STATS(f->s, "q", T0, 3, 3, 2, 0, 0, 2);
  assert_int_equal(ack1(f->s, "q", l.v[0].id, l.v[0].token, T0), 0);
  assert_int_equal(take(f->s, "q", 10, 0, T0, &l2, NULL), 1);
  assert_true(el_is(&l2.v[0], "e2"));
  assert_int_equal(take(f->s, "q", 10, 0, T0, &l2, NULL), 0);
  /* A nack frees a place as well. */
  assert_int_equal(nack1(f->s, "q", l.v[1].id, l.v[1].token, 100000, 0, NULL, T0, NULL), 0);
  assert_int_equal(take(f->s, "q", 10, 0, T0, &l2, NULL), 1);
  assert_true(el_is(&l2.v[0], "e3"));
  queue_item_list_release(&l);
  queue_item_list_release(&l2);
}

static void test_key_inflight(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  queue_conf_t c = defaults();
  c.key_inflight = 1;
  c.key_mode = QKEY_HOST;
  mkqueue(f->s, "q", &c);
  const char *els[] = {"http://a.com/1", "http://a.com/2", "http://a.com/3",
                       "http://b.com/1", "http://b.com/2", "http://c.com/1"};
  int pris[] = {9, 8, 7, 1, 2, 0};
  for (int i = 0; i < 6; i++) put1(f->s, "q", els[i], T0, pris[i], OW, T0);
  STATS(f->s, "q", T0, 6, 6, 0, 0, 0, 3);
  assert_int_equal(take(f->s, "q", 10, 0, T0, &l, NULL), 3);
  assert_non_null(find_el(&l, "http://a.com/1"));
  assert_non_null(find_el(&l, "http://b.com/2"));
  assert_non_null(find_el(&l, "http://c.com/1"));
  STATS(f->s, "q", T0, 3, 3, 3, 0, 0, 3);
  queue_item_list_t l2 = {0};
  assert_int_equal(take(f->s, "q", 10, 0, T0, &l2, NULL), 0);
  /* An ack opens its key again; the others stay full. */
  const queue_item_t *a = find_el(&l, "http://a.com/1");
  assert_int_equal(ack1(f->s, "q", a->id, a->token, T0 + 1), 0);
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 1, &l2, NULL), 1);
  assert_true(el_is(&l2.v[0], "http://a.com/2"));
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 1, &l2, NULL), 0);
  /* So does a nack, and an expired lease. */
  const queue_item_t *b = find_el(&l, "http://b.com/2");
  assert_int_equal(nack1(f->s, "q", b->id, b->token, 0, 0, NULL, T0 + 2, NULL), 0);
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 2, &l2, NULL), 1);
  assert_true(el_is(&l2.v[0], "http://b.com/2")); /* priority 2 over 1 */
  /* c's lease (T0+30000) runs out: its key is open again. a.com/2 and
   * b.com/2 (taken at T0+1/T0+2) have run out too by T0+30003. */
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 30003, &l2, NULL), 3);
  assert_non_null(find_el(&l2, "http://a.com/2"));
  assert_non_null(find_el(&l2, "http://b.com/2"));
  assert_non_null(find_el(&l2, "http://c.com/1"));
  STATS(f->s, "q", T0 + 30003, 2, 2, 3, 0, 0, 3);
  queue_item_list_release(&l);
  queue_item_list_release(&l2);
}

static void test_key_rate(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  int64_t next;
  queue_conf_t c = defaults();
  c.key_rate = 4; /* one per 250 ms */
  c.key_burst = 3;
  c.max_deliveries = 0;
  c.visibility_ms = 3600000;
  mkqueue(f->s, "q", &c);
  for (int i = 0; i < 20; i++) {
    char el[8];
    snprintf(el, sizeof(el), "%c%d", i % 2 ? 'A' : 'B', i / 2);
    put_k(f->s, "q", el, i % 2 ? "A" : "B", T0, 0, OW, T0);
  }
  int na, nb;
#define COUNT()                                                 \
  do {                                                          \
    na = nb = 0;                                                \
    for (size_t i_ = 0; i_ < l.n; i_++)                         \
      if (strcmp(l.v[i_].key, "A") == 0) na++;                  \
      else if (strcmp(l.v[i_].key, "B") == 0) nb++;             \
  } while (0)
  /* The burst at once, per key. */
  assert_int_equal(take(f->s, "q", 100, 0, T0, &l, NULL), 6);
  COUNT();
  assert_int_equal(na, 3);
  assert_int_equal(nb, 3);
  assert_int_equal(take(f->s, "q", 100, 0, T0 + 100, &l, &next), 0);
  if (next <= T0 + 100 || next > T0 + 251)
    fail_msg("empty buckets: next_ms +%lld, want about +250", (long long)(next - T0));
  assert_int_equal(take(f->s, "q", 100, 0, T0 + 248, &l, NULL), 0);
  /* Then one per 1/rate. */
  assert_int_equal(take(f->s, "q", 100, 0, T0 + 251, &l, NULL), 2);
  COUNT();
  assert_int_equal(na, 1);
  assert_int_equal(nb, 1);
  assert_int_equal(take(f->s, "q", 100, 0, T0 + 400, &l, NULL), 0);
  assert_int_equal(take(f->s, "q", 100, 0, T0 + 502, &l, NULL), 2);
  COUNT();
  assert_int_equal(na, 1);
  assert_int_equal(nb, 1);
  /* A long pause fills each bucket up to the burst, no more (5 left each). */
  assert_int_equal(take(f->s, "q", 100, 0, T0 + 100000, &l, NULL), 6);
  COUNT();
  assert_int_equal(na, 3);
  assert_int_equal(nb, 3);
  STATS(f->s, "q", T0 + 100000, 4, 4, 16, 0, 0, 2);
  queue_item_list_release(&l);
#undef COUNT
}

/* The burst arithmetic above is easy to get wrong; a cleaner case per key. */
static void test_key_rate_burst(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  queue_conf_t c = defaults();
  c.key_rate = 10; /* one per 100 ms */
  c.key_burst = 5;
  c.visibility_ms = 3600000;
  mkqueue(f->s, "q", &c);
  for (int i = 0; i < 40; i++) {
    char el[8];
    snprintf(el, sizeof(el), "a%d", i);
    put_k(f->s, "q", el, "A", T0, 0, OW, T0);
  }
  assert_int_equal(take(f->s, "q", 100, 0, T0, &l, NULL), 5);
  assert_int_equal(take(f->s, "q", 100, 0, T0 + 50, &l, NULL), 0);
  assert_int_equal(take(f->s, "q", 100, 0, T0 + 101, &l, NULL), 1);
  assert_int_equal(take(f->s, "q", 100, 0, T0 + 350, &l, NULL), 2); /* 2.49 tokens */
  /* A long pause: the bucket holds at most the burst. */
  assert_int_equal(take(f->s, "q", 100, 0, T0 + 60000, &l, NULL), 5);
  /* Another key starts with a full bucket of its own. */
  for (int i = 0; i < 10; i++) {
    char el[8];
    snprintf(el, sizeof(el), "b%d", i);
    put_k(f->s, "q", el, "B", T0, 0, OW, T0 + 60000);
  }
  assert_int_equal(take(f->s, "q", 100, 0, T0 + 60000, &l, NULL), 5);
  for (size_t i = 0; i < l.n; i++) assert_string_equal(l.v[i].key, "B");
  queue_item_list_release(&l);

  /* key_burst below 1 counts as 1. */
  c = defaults();
  c.key_rate = 1;
  c.key_burst = 0.25;
  c.visibility_ms = 3600000;
  mkqueue(f->s, "r", &c);
  for (int i = 0; i < 5; i++) {
    char el[8];
    snprintf(el, sizeof(el), "r%d", i);
    put1(f->s, "r", el, T0, 0, OW, T0);
  }
  assert_int_equal(take(f->s, "r", 100, 0, T0, &l, NULL), 1);
  assert_int_equal(take(f->s, "r", 100, 0, T0 + 500, &l, NULL), 0);
  assert_int_equal(take(f->s, "r", 100, 0, T0 + 1001, &l, NULL), 1);
  assert_int_equal(take(f->s, "r", 100, 0, T0 + 9000, &l, NULL), 1);
  queue_item_list_release(&l);
}

static void test_key_order(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  queue_conf_t c = defaults();
  c.key_inflight = 1;
  mkqueue(f->s, "q", &c);
  put_k(f->s, "q", "a1", "A", T0 + 5, 1, OW, T0);
  put_k(f->s, "q", "a2", "A", T0 + 1, 0, OW, T0);
  put_k(f->s, "q", "b1", "B", T0 + 2, 1, OW, T0);
  put_k(f->s, "q", "c1", "C", T0 + 9, 2, OW, T0);
  put_k(f->s, "q", "d1", "D", T0, 0, OW, T0);
  put_k(f->s, "q", "e1", "E", T0 + 50, 9, OW, T0); /* not due */
  const char *order[] = {"c1", "b1", "a1", "d1"};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(take(f->s, "q", 1, 0, T0 + 10, &l, NULL), 1);
    if (!el_is(&l.v[0], order[i]))
      fail_msg("take %d: got %.*s, want %s", i, (int)l.v[0].len, l.v[0].element, order[i]);
  }
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 10, &l, NULL), 0); /* a2: key A full */
  assert_int_equal(take(f->s, "q", 5, 0, T0 + 50, &l, NULL), 1);
  assert_true(el_is(&l.v[0], "e1"));
  STATS(f->s, "q", T0 + 50, 1, 1, 5, 0, 0, 5);

  /* Without key limits: one order across keys. */
  put_k(f->s, "r", "x1", "X", T0 + 3, 0, OW, T0);
  put_k(f->s, "r", "x2", "X", T0 + 1, 0, OW, T0);
  put_k(f->s, "r", "y1", "Y", T0 + 2, 0, OW, T0);
  put_k(f->s, "r", "y2", "Y", T0 + 4, 3, OW, T0);
  put_k(f->s, "r", "z1", "", T0 + 0, -1, OW, T0);
  const char *order2[] = {"y2", "x2", "y1", "x1", "z1"};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(take(f->s, "r", 1, 0, T0 + 10, &l, NULL), 1);
    if (!el_is(&l.v[0], order2[i]))
      fail_msg("r take %d: got %.*s, want %s", i, (int)l.v[0].len, l.v[0].element, order2[i]);
  }
  queue_item_list_release(&l);
}

/* ---- items, requeue, purge ---- */

static void test_items_requeue_purge(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0}, t = {0};
  queue_filter_t fl;
  int64_t n;
  queue_conf_t c = defaults();
  c.max_deliveries = 1;
  c.keep_done = 1;
  mkqueue(f->s, "q", &c);
  /* 4 keys x 5 elements; prefixes "k<key>/" and one with SQL wildcards. */
  const char *keys[] = {"w", "i", "x", "d"};
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 5; i++) {
      char el[16];
      snprintf(el, sizeof(el), "k%s/%d", keys[k], i);
      put_k(f->s, "q", el, keys[k], T0 + 100 * i, k, OW, T0);
    }
  put_k(f->s, "q", "a_%b", "w", T0 + 1000, 0, OW, T0);
  put_k(f->s, "q", "aX%b", "w", T0 + 1000, 0, OW, T0);
  put_k(f->s, "q", "a_Xb", "w", T0 + 1000, 0, OW, T0);
  STATS(f->s, "q", T0, 23, 4, 0, 0, 0, 4);
  /* State per key: w waiting, i in flight, x dead, d done. Priorities make
   * take pick d (3), then x (2), then i (1). */
  int64_t now = T0 + 500;
  assert_int_equal(take(f->s, "q", 15, 0, now, &t, NULL), 15);
  for (size_t j = 0; j < t.n; j++) {
    if (t.v[j].key[0] == 'd') assert_int_equal(ack1(f->s, "q", t.v[j].id, t.v[j].token, now), 0);
    if (t.v[j].key[0] == 'x')
      assert_int_equal(nack1(f->s, "q", t.v[j].id, t.v[j].token, 0, 0, "bad", now, NULL), 0);
    assert_int_equal(t.v[j].key[0] == 'w', 0);
  }
  STATS(f->s, "q", now, 8, 5, 5, 5, 5, 2);

  memset(&fl, 0, sizeof(fl));
  assert_int_equal(items_count(f->s, "q", &fl), 23);
  fl.states = 1u << QSTATE_INFLIGHT;
  assert_int_equal(items_count(f->s, "q", &fl), 5);
  fl.states = 1u << QSTATE_DEAD | 1u << QSTATE_DONE;
  assert_int_equal(items_count(f->s, "q", &fl), 10);
  fl.states = 1u << QSTATE_WAITING;
  fl.key = "w";
  assert_int_equal(items_count(f->s, "q", &fl), 8);
  fl.key = "i";
  assert_int_equal(items_count(f->s, "q", &fl), 0);
  memset(&fl, 0, sizeof(fl));
  fl.key = "";
  assert_int_equal(items_count(f->s, "q", &fl), 0);
  fl.key = NULL;
  fl.prefix = "kx/";
  assert_int_equal(store_queue_items(f->s, "q", &fl, &l), 0);
  assert_int_equal(l.n, 5);
  for (size_t j = 0; j < l.n; j++) {
    assert_int_equal(l.v[j].state, QSTATE_DEAD);
    assert_string_equal(l.v[j].error, "bad");
  }
  queue_item_list_release(&l);
  fl.prefix = "a_";   /* '_' is a byte, not a wildcard */
  assert_int_equal(items_count(f->s, "q", &fl), 2);
  fl.prefix = "a_%";  /* nor is '%' */
  assert_int_equal(items_count(f->s, "q", &fl), 1);
  fl.prefix = "k";
  assert_int_equal(items_count(f->s, "q", &fl), 20);
  fl.prefix = "";
  assert_int_equal(items_count(f->s, "q", &fl), 23);
  fl.prefix = "kw/0x";
  assert_int_equal(items_count(f->s, "q", &fl), 0);
  /* ids, combined with other conditions. */
  memset(&fl, 0, sizeof(fl));
  int64_t ids[4] = {0, 0, 0, 123456789};
  for (size_t j = 0; j < t.n; j++) /* one each of keys d, x, i */
    ids[t.v[j].key[0] == 'd' ? 0 : t.v[j].key[0] == 'x' ? 1 : 2] = t.v[j].id;
  fl.ids = ids;
  fl.nids = 4;
  assert_int_equal(items_count(f->s, "q", &fl), 3);
  fl.states = 1u << QSTATE_INFLIGHT;
  assert_int_equal(items_count(f->s, "q", &fl), 1);

  /* Paging: after_id + limit walk all in id order. */
  memset(&fl, 0, sizeof(fl));
  fl.limit = 4;
  size_t total = 0;
  int64_t last = 0;
  for (int pages = 0; pages < 20; pages++) {
    fl.after_id = last;
    assert_int_equal(store_queue_items(f->s, "q", &fl, &l), 0);
    assert_true(l.n <= 4);
    for (size_t j = 0; j < l.n; j++) {
      assert_true(l.v[j].id > last);
      last = l.v[j].id;
    }
    total += l.n;
    size_t got = l.n;
    queue_item_list_release(&l);
    if (got < 4) break;
  }
  assert_int_equal(total, 23);
  fl.after_id = last;
  assert_int_equal(items_count(f->s, "q", &fl), 0);
  /* limit with a filter: the first two dead. */
  memset(&fl, 0, sizeof(fl));
  fl.states = 1u << QSTATE_DEAD;
  fl.limit = 2;
  assert_int_equal(items_count(f->s, "q", &fl), 2);

  /* Requeue the dead, due later, with no deliveries. */
  now += 10;
  memset(&fl, 0, sizeof(fl));
  fl.states = 1u << QSTATE_DEAD;
  fl.limit = 1; /* ignored */
  assert_int_equal(store_queue_requeue(f->s, "q", &fl, now + 5000, now, &n), 0);
  assert_int_equal(n, 5);
  fl.prefix = "kx/";
  fl.states = 0;
  fl.limit = 0;
  assert_int_equal(store_queue_items(f->s, "q", &fl, &l), 0);
  assert_int_equal(l.n, 5);
  for (size_t j = 0; j < l.n; j++) {
    assert_int_equal(l.v[j].state, QSTATE_WAITING);
    assert_int_equal(l.v[j].due_ms, now + 5000);
    assert_int_equal(l.v[j].deliveries, 0);
  }
  queue_item_list_release(&l);
  STATS(f->s, "q", now, 13, 5, 5, 0, 5, 3);
  queue_stats_t st = CONSISTENT(f->s, "q", now + 5000);
  assert_int_equal(st.past_due, 13);

  /* Requeue in-flight by id: the lease goes. */
  const queue_item_t *held = NULL, *held2 = NULL;
  for (size_t j = 0; j < t.n; j++)
    if (t.v[j].key[0] == 'i') {
      if (!held) held = &t.v[j];
      else if (!held2) held2 = &t.v[j];
    }
  assert_non_null(held2);
  memset(&fl, 0, sizeof(fl));
  fl.ids = &held->id;
  fl.nids = 1;
  assert_int_equal(store_queue_requeue(f->s, "q", &fl, now, now, &n), 0);
  assert_int_equal(n, 1);
  queue_item_t it = must_item(f->s, "q", held->id);
  assert_int_equal(it.state, QSTATE_WAITING);
  assert_int_equal(it.due_ms, now);
  assert_int_equal(it.deliveries, 0);
  queue_item_release(&it);
  assert_int_equal(ack1(f->s, "q", held->id, held->token, now), -ENOENT);
  assert_int_equal(extend1(f->s, "q", held->id, held->token, 0, now), -ENOENT);
  STATS(f->s, "q", now, 14, 6, 4, 0, 5, 3);
  /* The other leases are untouched. */
  assert_int_equal(extend1(f->s, "q", held2->id, held2->token, 0, now), 0);

  /* Requeue by key and prefix: only matching; none matching is 0. */
  memset(&fl, 0, sizeof(fl));
  fl.key = "nokey";
  assert_int_equal(store_queue_requeue(f->s, "q", &fl, now, now, &n), 0);
  assert_int_equal(n, 0);
  fl.key = "w";
  fl.prefix = "a";
  assert_int_equal(store_queue_requeue(f->s, "q", &fl, now + 1, now, &n), 0);
  assert_int_equal(n, 3);
  st = CONSISTENT(f->s, "q", now);
  assert_int_equal(st.past_due, 6);

  /* Purge: counts, by state, key, prefix, ids. */
  memset(&fl, 0, sizeof(fl));
  fl.states = 1u << QSTATE_DONE;
  assert_int_equal(store_queue_purge(f->s, "q", &fl, now, &n), 0);
  assert_int_equal(n, 5);
  STATS(f->s, "q", now, 14, 6, 4, 0, 0, 3);
  memset(&fl, 0, sizeof(fl));
  fl.prefix = "a_";
  assert_int_equal(store_queue_purge(f->s, "q", &fl, now, &n), 0);
  assert_int_equal(n, 2);
  memset(&fl, 0, sizeof(fl));
  fl.ids = &held2->id;
  fl.nids = 1;
  assert_int_equal(store_queue_purge(f->s, "q", &fl, now, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(ack1(f->s, "q", held2->id, held2->token, now), -ENOENT);
  STATS(f->s, "q", now, 12, 6, 3, 0, 0, 3);
  memset(&fl, 0, sizeof(fl));
  fl.key = "x";
  fl.states = 1u << QSTATE_WAITING;
  assert_int_equal(store_queue_purge(f->s, "q", &fl, now, &n), 0);
  assert_int_equal(n, 5);
  STATS(f->s, "q", now, 7, 6, 3, 0, 0, 2);
  /* In flight purged by state: their leases go. */
  memset(&fl, 0, sizeof(fl));
  fl.states = 1u << QSTATE_INFLIGHT;
  assert_int_equal(store_queue_purge(f->s, "q", &fl, now, &n), 0);
  assert_int_equal(n, 3);
  STATS(f->s, "q", now, 7, 6, 0, 0, 0, 2); /* keys w and i (the requeued one) */
  /* All. */
  assert_int_equal(store_queue_purge(f->s, "q", NULL, now, &n), 0);
  assert_int_equal(n, 7);
  STATS(f->s, "q", now, 0, 0, 0, 0, 0, 0);
  st = CONSISTENT(f->s, "q", now);
  assert_int_equal(st.oldest_due_ms, 0);
  /* Purged elements come back as new. */
  assert_int_equal(put1(f->s, "q", "kw/0", now, 0, KX, now).result, QPUT_ADDED);
  /* A NULL count is allowed. */
  assert_int_equal(store_queue_purge(f->s, "q", NULL, now, NULL), 0);
  assert_int_equal(store_queue_requeue(f->s, "q", NULL, now, now, NULL), 0);
  STATS(f->s, "q", now, 0, 0, 0, 0, 0, 0);
  queue_item_list_release(&t);
}

/* Requeue with no filter: everything, done and waiting included. */
static void test_requeue_all(void **state) {
  struct fx *f = *state;
  queue_item_list_t t = {0};
  queue_conf_t c = defaults();
  c.keep_done = 1;
  c.max_deliveries = 1;
  mkqueue(f->s, "q", &c);
  for (int i = 0; i < 4; i++) {
    char el[8];
    snprintf(el, sizeof(el), "e%d", i);
    put1(f->s, "q", el, T0, 0, OW, T0);
  }
  assert_int_equal(take(f->s, "q", 3, 0, T0, &t, NULL), 3);
  assert_int_equal(ack1(f->s, "q", t.v[0].id, t.v[0].token, T0), 0);
  assert_int_equal(nack1(f->s, "q", t.v[1].id, t.v[1].token, 0, 0, NULL, T0, NULL), 0);
  STATS(f->s, "q", T0, 1, 1, 1, 1, 1, 1);
  int64_t n;
  assert_int_equal(store_queue_requeue(f->s, "q", NULL, T0 + 100, T0 + 1, &n), 0);
  assert_int_equal(n, 4);
  STATS(f->s, "q", T0 + 1, 4, 0, 0, 0, 0, 1);
  queue_stats_t st = CONSISTENT(f->s, "q", T0 + 1);
  assert_int_equal(st.oldest_due_ms, T0 + 100);
  assert_int_equal(take(f->s, "q", 10, 0, T0 + 100, &t, NULL), 4);
  for (size_t i = 0; i < t.n; i++) assert_int_equal(t.v[i].deliveries, 1);
  queue_item_list_release(&t);
}

/* stats.keys: "politeness keys holding state: due or in-flight elements, a
 * partly spent token bucket or a Retry-After block". A key whose elements
 * are all gone, with nothing else in effect, is not counted. */
static void test_stats_keys(void **state) {
  struct fx *f = *state;
  int64_t n;
  queue_conf_t c = defaults();
  c.max_deliveries = 1;
  mkqueue(f->s, "q", &c);
  put_k(f->s, "q", "a", "A", T0 + 1000, 0, OW, T0); /* waiting, not yet due */
  put_k(f->s, "q", "b", "B", T0, 0, OW, T0);        /* waiting and due */
  queue_item_t b = take_one(f->s, "q", "b", 0, T0); /* in flight */
  STATS(f->s, "q", T0, 1, 0, 1, 0, 0, -1);
  queue_stats_t st;
  assert_int_equal(store_queue_stats(f->s, "q", T0, &st), 0);
  assert_true(st.keys >= 1);
  assert_int_equal(ack1(f->s, "q", b.id, b.token, T0 + 1), 0);
  KSTATS(f->s, "q", T0 + 1, 1, 0, 0, 0, 0, 0); /* B holds nothing; A is not due */
  put_k(f->s, "q", "c", "C", T0, 0, OW, T0 + 1);
  queue_item_t cc = take_one(f->s, "q", "c", 0, T0 + 1);
  assert_int_equal(nack1(f->s, "q", cc.id, cc.token, 0, 60000, "slow", T0 + 2, NULL), 0);
  KSTATS(f->s, "q", T0 + 2, 1, 0, 0, 1, 0, 1); /* dead, and C is blocked for a minute */
  assert_int_equal(store_queue_purge(f->s, "q", NULL, T0 + 3, &n), 0);
  assert_int_equal(n, 2);
  KSTATS(f->s, "q", T0 + 30000, 0, 0, 0, 0, 0, 1); /* C's block is still in effect */
  queue_item_list_t none = {0};
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 60003, &none, NULL), 0);
  queue_item_list_release(&none);
  KSTATS(f->s, "q", T0 + 60003, 0, 0, 0, 0, 0, 0); /* a take after it forgot C */
  queue_item_release(&b);
  queue_item_release(&cc);
}

/* ---- transactions ---- */

static void test_transactions(void **state) {
  struct fx *f = *state;
  queue_item_list_t l = {0};
  assert_int_equal(store_tx_begin(f->s), 0);
  for (int i = 0; i < 3; i++) {
    char el[8];
    snprintf(el, sizeof(el), "e%d", i);
    put1(f->s, "q", el, T0, i, OW, T0);
  }
  assert_int_equal(take(f->s, "q", 1, 0, T0, &l, NULL), 1);
  queue_item_t e2 = l.v[0];
  memset(&l.v[0], 0, sizeof(l.v[0]));
  assert_true(el_is(&e2, "e2"));
  assert_int_equal(store_sp_begin(f->s), 0);
  put1(f->s, "q", "sp1", T0, 0, OW, T0);
  put1(f->s, "q", "e0", T0 + 50, 9, OW, T0);
  assert_int_equal(ack1(f->s, "q", e2.id, e2.token, T0), 0);
  assert_int_equal(take(f->s, "q", 1, 0, T0 + 100, &l, NULL), 1);
  queue_item_t tk = l.v[0];
  memset(&l.v[0], 0, sizeof(l.v[0]));
  assert_true(el_is(&tk, "e0"));
  STATS(f->s, "q", T0 + 100, 2, 2, 1, 0, 0, 1);
  assert_int_equal(store_sp_rollback(f->s), 0);
  /* Back to: e0, e1 waiting, e2 in flight. */
  STATS(f->s, "q", T0, 2, 2, 1, 0, 0, 1);
  put1(f->s, "q", "after", T0, 0, OW, T0);
  assert_int_equal(store_tx_commit(f->s), 0);
  STATS(f->s, "q", T0, 3, 3, 1, 0, 0, 1);
  queue_conf_t c = conf_of(f->s, "q");
  assert_int_equal(c.n_put, 4);
  assert_int_equal(c.n_acked, 0);
  queue_conf_release(&c);
  queue_item_t it = must_item(f->s, "q", e2.id);
  assert_int_equal(it.state, QSTATE_INFLIGHT);
  assert_int_equal(it.token, e2.token);
  queue_item_release(&it);
  /* The lease rolled back with the savepoint is not held; the first still is. */
  if (tk.id != e2.id) assert_int_equal(ack1(f->s, "q", tk.id, tk.token, T0 + 1), -ENOENT);
  it = must_item(f->s, "q", e2.id);
  queue_item_release(&it);
  assert_int_equal(ack1(f->s, "q", e2.id, e2.token, T0 + 1), 0);
  STATS(f->s, "q", T0 + 1, 3, 3, 0, 0, 0, 1);

  /* A whole transaction rolled back: the queue it created is not there. */
  assert_int_equal(store_tx_begin(f->s), 0);
  put1(f->s, "tmp", "x", T0, 0, OW, T0);
  put1(f->s, "q", "y", T0, 0, OW, T0);
  assert_int_equal(store_tx_rollback(f->s), 0);
  assert_int_equal(store_queue_get(f->s, "tmp", &c), -ENOENT);
  STATS(f->s, "q", T0 + 1, 3, 3, 0, 0, 0, 1);
  c = conf_of(f->s, "q");
  assert_int_equal(c.n_put, 4);
  assert_int_equal(c.n_acked, 1);
  queue_conf_release(&c);
  /* A rolled-back savepoint that created a queue. */
  assert_int_equal(store_tx_begin(f->s), 0);
  assert_int_equal(store_sp_begin(f->s), 0);
  put1(f->s, "tmp2", "x", T0, 0, OW, T0);
  assert_int_equal(store_sp_rollback(f->s), 0);
  assert_int_equal(store_sp_begin(f->s), 0);
  put1(f->s, "q", "z", T0, 0, OW, T0);
  assert_int_equal(store_sp_release(f->s), 0);
  assert_int_equal(store_tx_commit(f->s), 0);
  assert_int_equal(store_queue_get(f->s, "tmp2", &c), -ENOENT);
  STATS(f->s, "q", T0 + 1, 4, 4, 0, 0, 0, 1);
  queue_item_release(&e2);
  queue_item_release(&tk);
  queue_item_list_release(&l);
}

/* ---- a randomized model of the contract ---- */

#define MN 40          /* distinct elements */
#define M_MAXDEL 3
#define M_VIS 3000
#define M_BACKOFF 200
#define M_BACKOFF_MAX 1000

enum { U_NO = 0, U_ANY = 1 }; /* element state known, or to be read back */

struct mel {
  int present;
  queue_state_t st;
  int64_t id;
  int pri;
  int64_t due;          /* waiting: due; inflight: lease end */
  int due_known;        /* waiting only: 0 after an expiry (read back later) */
  int deliveries;
  int64_t token;
  int def;              /* a put deferred while in flight */
  int def_exact;        /* ... and its due/priority are known */
  int64_t def_due;
  int def_pri;
  int err_known;
  char err[96];         /* "" = NULL */
  int unsure;           /* U_ANY: adopt what the store says (checked loosely) */
};

struct model {
  struct fx *f;
  const char *q;
  int keep_done;
  int64_t now;
  struct mel e[MN];
  int64_t n_put, n_acked;
  /* stale leases to try */
  int64_t stale_id[32], stale_tok[32];
  int nstale;
  uint64_t rng;
  int step;
};

static uint64_t rnd(struct model *m) {
  m->rng ^= m->rng << 13;
  m->rng ^= m->rng >> 7;
  m->rng ^= m->rng << 17;
  return m->rng;
}
static int64_t rint_(struct model *m, int64_t lo, int64_t hi) {
  return lo + (int64_t)(rnd(m) % (uint64_t)(hi - lo + 1));
}

static void m_elname(int i, char *out, size_t len) { snprintf(out, len, "e%d", i); }
static const char *m_key(int i) { return i % 3 == 0 ? NULL : i % 3 == 1 ? "k1" : "k2"; }
static const char *m_keyname(int i) { return m_key(i) ? m_key(i) : ""; }

static int m_index(struct model *m, int64_t id) {
  for (int i = 0; i < MN; i++)
    if (m->e[i].present && m->e[i].id == id) return i;
  return -1;
}

static void m_stale(struct model *m, int i) {
  int k = m->nstale < 32 ? m->nstale++ : (int)(rnd(m) % 32);
  m->stale_id[k] = m->e[i].id;
  m->stale_tok[k] = m->e[i].token;
}

/* The lease of element i is held and not about to be ambiguous. */
static int m_held(struct model *m, int i) {
  return m->e[i].present && m->e[i].st == QSTATE_INFLIGHT && m->e[i].due > m->now;
}

#define MFAIL(m, ...)                                                            \
  do {                                                                           \
    print_error("model step %d (now +%lld, seed %llu): ", (m)->step,             \
                (long long)((m)->now - T0), (unsigned long long)m_seed);         \
    fail_msg(__VA_ARGS__);                                                       \
  } while (0)

static unsigned long long m_seed;

/* Reads element i back and adopts it (after an operation whose outcome the
 * contract leaves open); checks what the contract does fix. */
static void m_adopt(struct model *m, int i) {
  struct mel *e = &m->e[i];
  queue_item_t it;
  int rc = item_get(m->f->s, m->q, e->id, &it);
  if (rc) MFAIL(m, "e%d (id %lld) vanished: %d", i, (long long)e->id, rc);
  if (it.state != QSTATE_WAITING && it.state != QSTATE_DEAD)
    MFAIL(m, "e%d: state %s after a release", i, queue_state_name(it.state));
  e->st = it.state;
  e->pri = it.priority;
  e->due = it.due_ms;
  e->due_known = 1;
  e->deliveries = it.deliveries;
  e->unsure = U_NO;
  e->err_known = 1;
  snprintf(e->err, sizeof(e->err), "%s", it.error ? it.error : "");
  queue_item_release(&it);
}

static void m_check(struct model *m) {
  queue_stats_t st;
  queue_conf_t c;
  queue_item_list_t l = {0};
  int64_t w = 0, pd = 0, inf = 0, dead = 0, done = 0, oldest = 0;
  int keyseen[3] = {0};
  int present = 0;
  for (int i = 0; i < MN; i++) {
    struct mel *e = &m->e[i];
    if (!e->present) continue;
    present++;
    switch (e->st) {
    case QSTATE_WAITING:
      w++;
      if (!e->due_known) MFAIL(m, "e%d: unknown due at a check", i);
      if (e->due <= m->now) pd++;
      if (!oldest || e->due < oldest) oldest = e->due;
      break;
    case QSTATE_INFLIGHT: inf++; keyseen[i % 3] = 1; break;
    case QSTATE_DEAD: dead++; break;
    case QSTATE_DONE: done++; break;
    default: break;
    }
  }
  if (store_queue_stats(m->f->s, m->q, m->now, &st)) MFAIL(m, "stats failed");
  if (st.size != w + inf || st.waiting != w || st.past_due != pd || st.inflight != inf ||
      st.dead != dead || st.done != done || st.oldest_due_ms != oldest ||
      st.keys < keyseen[0] + keyseen[1] + keyseen[2])
    MFAIL(m,
          "stats w/pd/inf/dead/done/oldest/keys = %lld/%lld/%lld/%lld/%lld/+%lld/%lld, model "
          "%lld/%lld/%lld/%lld/%lld/+%lld/%d",
          (long long)st.waiting, (long long)st.past_due, (long long)st.inflight,
          (long long)st.dead, (long long)st.done,
          (long long)(st.oldest_due_ms ? st.oldest_due_ms - T0 : -1), (long long)st.keys,
          (long long)w, (long long)pd, (long long)inf, (long long)dead, (long long)done,
          (long long)(oldest ? oldest - T0 : -1), keyseen[0] + keyseen[1] + keyseen[2]);
  if (store_queue_get(m->f->s, m->q, &c)) MFAIL(m, "get failed");
  if (c.n_waiting != w || c.n_inflight != inf || c.n_dead != dead || c.n_done != done ||
      c.n_put != m->n_put || c.n_acked != m->n_acked)
    MFAIL(m, "counters w/inf/dead/done/put/acked = %lld/%lld/%lld/%lld/%lld/%lld, model "
             "%lld/%lld/%lld/%lld/%lld/%lld",
          (long long)c.n_waiting, (long long)c.n_inflight, (long long)c.n_dead,
          (long long)c.n_done, (long long)c.n_put, (long long)c.n_acked, (long long)w,
          (long long)inf, (long long)dead, (long long)done, (long long)m->n_put,
          (long long)m->n_acked);
  queue_conf_release(&c);
  if (store_queue_items(m->f->s, m->q, NULL, &l)) MFAIL(m, "items failed");
  if ((int)l.n != present) MFAIL(m, "%zu items, model %d", l.n, present);
  for (size_t j = 0; j < l.n; j++) {
    const queue_item_t *it = &l.v[j];
    int i = m_index(m, it->id);
    if (i < 0) MFAIL(m, "item %lld not in the model", (long long)it->id);
    struct mel *e = &m->e[i];
    char name[8];
    m_elname(i, name, sizeof(name));
    if (!el_is(it, name)) MFAIL(m, "item %lld is not %s", (long long)it->id, name);
    if (strcmp(it->key, m_keyname(i)) != 0) MFAIL(m, "%s: key '%s'", name, it->key);
    if (it->state != e->st)
      MFAIL(m, "%s: state %s, model %s", name, queue_state_name(it->state),
            queue_state_name(e->st));
    if (e->st == QSTATE_WAITING || e->st == QSTATE_INFLIGHT) {
      if (it->due_ms != e->due)
        MFAIL(m, "%s (%s): due +%lld, model +%lld", name, queue_state_name(e->st),
              (long long)(it->due_ms - T0), (long long)(e->due - T0));
      if (it->priority != e->pri) MFAIL(m, "%s: priority %d, model %d", name, it->priority, e->pri);
    }
    if (e->st != QSTATE_DONE && it->deliveries != e->deliveries)
      MFAIL(m, "%s: deliveries %d, model %d", name, it->deliveries, e->deliveries);
    if (e->st == QSTATE_INFLIGHT && it->token != e->token)
      MFAIL(m, "%s: token %lld, model %lld", name, (long long)it->token, (long long)e->token);
    if (e->err_known && e->st != QSTATE_DONE &&
        strcmp(it->error ? it->error : "", e->err) != 0)
      MFAIL(m, "%s: error '%s', model '%s'", name, it->error ? it->error : "(null)", e->err);
  }
  queue_item_list_release(&l);
}

static void m_put(struct model *m) {
  queue_put_t p[4];
  int idx[4], n = (int)rint_(m, 1, 4);
  char names[4][8];
  for (int j = 0; j < n; j++) {
    int i;
    do {
      i = (int)rint_(m, 0, MN - 1);
      int dup = 0;
      for (int k = 0; k < j; k++) dup |= idx[k] == i;
      if (!dup) break;
    } while (1);
    idx[j] = i;
    m_elname(i, names[j], sizeof(names[j]));
    p[j] = qp(names[j], m->now + rint_(m, 0, 3) * rint_(m, 0, 3000), (int)rint_(m, -2, 2),
              (queue_policy_t)rint_(m, 0, 2));
    p[j].key = m_key(i);
  }
  if (store_queue_put(m->f->s, m->q, p, (size_t)n, m->now)) MFAIL(m, "put failed");
  for (int j = 0; j < n; j++) {
    struct mel *e = &m->e[idx[j]];
    queue_put_result_t want;
    int revived = 0;
    if (!e->present) {
      want = QPUT_ADDED;
      memset(e, 0, sizeof(*e));
      e->present = 1;
      e->st = QSTATE_WAITING;
      e->pri = p[j].priority;
      e->due = p[j].due_ms;
      e->due_known = 1;
      e->err_known = 1;
      e->id = p[j].id;
    } else if (e->st == QSTATE_WAITING) {
      int64_t nd = e->due;
      int np = e->pri;
      if (p[j].policy == OW) {
        nd = p[j].due_ms;
        np = p[j].priority;
      } else if (p[j].policy == KE) {
        if (p[j].due_ms < nd) nd = p[j].due_ms;
        if (p[j].priority > np) np = p[j].priority;
      }
      want = nd != e->due || np != e->pri ? QPUT_MOVED : QPUT_KEPT;
      e->due = nd;
      e->pri = np;
    } else if (e->st == QSTATE_INFLIGHT) {
      if (p[j].policy == KX) {
        want = QPUT_KEPT;
      } else {
        want = QPUT_DEFERRED;
        if (p[j].policy == OW) {
          e->def_exact = 1;
          e->def_due = p[j].due_ms;
          e->def_pri = p[j].priority;
        } else {
          e->def_exact = 0;
        }
        e->def = 1;
      }
    } else { /* dead or done */
      if (p[j].policy == KX) {
        want = QPUT_KEPT;
      } else {
        want = QPUT_ADDED;
        revived = 1;
        e->st = QSTATE_WAITING;
        e->pri = p[j].priority;
        e->due = p[j].due_ms;
        e->due_known = 1;
        e->deliveries = 0;
        e->err_known = 0;
        e->def = 0;
        e->id = p[j].id; /* as new: the id may be new too */
      }
    }
    if (revived && p[j].result == QPUT_MOVED) want = QPUT_MOVED; /* either reading */
    if (p[j].result != want)
      MFAIL(m, "put %s (%s, +%lld, pri %d) over %s: result %d, model %d", names[j],
            queue_policy_name(p[j].policy), (long long)(p[j].due_ms - m->now), p[j].priority,
            queue_state_name(e->st), p[j].result, want);
    if (p[j].id != e->id) MFAIL(m, "put %s: id %lld, model %lld", names[j], (long long)p[j].id, (long long)e->id);
    if (p[j].result == QPUT_ADDED) m->n_put++;
  }
}

static int m_better(const struct mel *x, const struct mel *y) {
  if (x->pri != y->pri) return x->pri > y->pri;
  return x->due_known && y->due_known && x->due < y->due;
}

static void m_take(struct model *m) {
  size_t max = (size_t)rint_(m, 1, 4);
  int64_t vis = rnd(m) % 2 ? 0 : rint_(m, 500, 6000);
  int64_t veff = vis ? vis : M_VIS;
  int reclaimed[MN] = {0};
  /* Leases that ended before now come back (or die). */
  for (int i = 0; i < MN; i++) {
    struct mel *e = &m->e[i];
    if (!e->present || e->st != QSTATE_INFLIGHT || e->due >= m->now) continue;
    reclaimed[i] = 1;
    m_stale(m, i);
    /* A deferred due time waits for the next ack, through expiries. */
    if (e->deliveries >= M_MAXDEL) {
      e->st = QSTATE_DEAD;
    } else {
      e->st = QSTATE_WAITING;
      e->due_known = 0; /* due again; its exact due time is read back */
    }
  }
  queue_item_list_t l = {0};
  int64_t next = -1;
  if (store_queue_take(m->f->s, m->q, max, vis, m->now, &l, &next)) MFAIL(m, "take failed");
  int taken[MN] = {0};
  size_t sure = 0, maybe = 0;
  for (int i = 0; i < MN; i++) {
    struct mel *e = &m->e[i];
    if (!e->present || e->st != QSTATE_WAITING) continue;
    if (e->unsure) maybe++;
    else if (!e->due_known || e->due <= m->now) sure++;
  }
  size_t lo = sure < max ? sure : max, hi = sure + maybe < max ? sure + maybe : max;
  if (l.n < lo || l.n > hi)
    MFAIL(m, "take %zu: got %zu, model %zu..%zu eligible", max, l.n, sure, sure + maybe);
  for (size_t j = 0; j < l.n; j++) {
    const queue_item_t *it = &l.v[j];
    int i = m_index(m, it->id);
    if (i < 0) MFAIL(m, "took unknown id %lld", (long long)it->id);
    struct mel *e = &m->e[i];
    if (taken[i]) MFAIL(m, "took e%d twice", i);
    taken[i] = 1;
    if (e->st != QSTATE_WAITING || (!e->unsure && e->due_known && e->due > m->now))
      MFAIL(m, "took e%d (%s, due +%lld) which is not due", i, queue_state_name(e->st),
            (long long)(e->due - T0));
    if (!e->unsure && it->priority != e->pri)
      MFAIL(m, "took e%d with priority %d, model %d", i, it->priority, e->pri);
    if (!e->unsure && it->deliveries != e->deliveries + 1)
      MFAIL(m, "took e%d with deliveries %d, model %d+1", i, it->deliveries, e->deliveries);
    if (it->state != QSTATE_INFLIGHT || it->due_ms != m->now + veff)
      MFAIL(m, "took e%d: state %d, lease end +%lld", i, it->state, (long long)(it->due_ms - T0));
    if (strcmp(it->key, m_keyname(i)) != 0) MFAIL(m, "took e%d with key %s", i, it->key);
  }
  /* Nothing left behind is better than anything taken. */
  for (int x = 0; x < MN; x++) {
    struct mel *ex = &m->e[x];
    if (taken[x] || !ex->present || ex->st != QSTATE_WAITING || ex->unsure) continue;
    if (ex->due_known && ex->due > m->now) continue;
    for (size_t j = 0; j < l.n; j++) {
      int y = m_index(m, l.v[j].id);
      if (m->e[y].unsure) continue;
      if (m_better(ex, &m->e[y]))
        MFAIL(m, "took e%d (pri %d, due +%lld) over e%d (pri %d, due +%lld)", y, m->e[y].pri,
              (long long)(m->e[y].due - T0), x, ex->pri, (long long)(ex->due - T0));
    }
  }
  for (size_t j = 0; j < l.n; j++) {
    int i = m_index(m, l.v[j].id);
    struct mel *e = &m->e[i];
    if (e->st == QSTATE_INFLIGHT) m_stale(m, i);
    e->st = QSTATE_INFLIGHT;
    e->pri = l.v[j].priority;
    e->due = l.v[j].due_ms;
    e->deliveries = l.v[j].deliveries;
    e->token = l.v[j].token;
    e->unsure = U_NO;
    e->due_known = 1;
  }
  /* Released elements that were not taken: read back. */
  for (int i = 0; i < MN; i++) {
    if (!reclaimed[i] || taken[i] || !m->e[i].present) continue;
    int was_def = m->e[i].unsure;
    int pri = m->e[i].pri, d = m->e[i].deliveries;
    queue_state_t want = m->e[i].st;
    m_adopt(m, i);
    if (!was_def) {
      if (m->e[i].st != want)
        MFAIL(m, "expired e%d (%d deliveries): %s, model %s", i, d,
              queue_state_name(m->e[i].st), queue_state_name(want));
      if (m->e[i].deliveries != d)
        MFAIL(m, "expired e%d: deliveries %d, was %d", i, m->e[i].deliveries, d);
      if (m->e[i].pri != pri) MFAIL(m, "expired e%d: priority %d, was %d", i, m->e[i].pri, pri);
      if (m->e[i].st == QSTATE_WAITING && m->e[i].due > m->now)
        MFAIL(m, "expired e%d: due +%lld, after now", i, (long long)(m->e[i].due - T0));
    }
  }
  /* next_ms when nothing came: 0 with nothing pending, else no later than the
   * earliest due time or lease end. */
  if (l.n == 0) {
    int64_t soonest = 0;
    for (int i = 0; i < MN; i++) {
      struct mel *e = &m->e[i];
      if (!e->present || (e->st != QSTATE_WAITING && e->st != QSTATE_INFLIGHT)) continue;
      if (!soonest || e->due < soonest) soonest = e->due;
    }
    if (!soonest && next != 0) MFAIL(m, "next_ms %lld with nothing pending", (long long)next);
    if (soonest && (next < m->now || next > soonest))
      MFAIL(m, "next_ms +%lld, soonest +%lld", (long long)(next - T0), (long long)(soonest - T0));
  }
  queue_item_list_release(&l);
}

/* Picks up to max held leases. */
static int m_pick_held(struct model *m, int *out, int max) {
  int n = 0, start = (int)rint_(m, 0, MN - 1);
  for (int k = 0; k < MN && n < max; k++) {
    int i = (start + k) % MN;
    if (m_held(m, i) && rnd(m) % 2) out[n++] = i;
  }
  return n;
}

static void m_ack(struct model *m) {
  int idx[3], n = m_pick_held(m, idx, 3);
  queue_lease_t ls[4];
  for (int j = 0; j < n; j++) ls[j] = mklease(m->e[idx[j]].id, m->e[idx[j]].token);
  int stale = m->nstale && rnd(m) % 4 == 0;
  if (stale) {
    int k = (int)(rnd(m) % (uint64_t)m->nstale);
    ls[n] = mklease(m->stale_id[k], m->stale_tok[k]);
    int i = m_index(m, ls[n].id);
    if (i >= 0 && m->e[i].st == QSTATE_INFLIGHT && m->e[i].token == ls[n].token) stale = 0;
  }
  if (n + stale == 0) return;
  if (store_queue_ack(m->f->s, m->q, ls, (size_t)(n + stale), m->now)) MFAIL(m, "ack failed");
  if (stale && ls[n].result != -ENOENT)
    MFAIL(m, "stale ack (id %lld token %lld): %d", (long long)ls[n].id, (long long)ls[n].token,
          ls[n].result);
  for (int j = 0; j < n; j++) {
    struct mel *e = &m->e[idx[j]];
    if (ls[j].result != 0) MFAIL(m, "ack e%d: %d", idx[j], ls[j].result);
    m->n_acked++;
    m_stale(m, idx[j]);
    if (e->def) {
      int prev = e->deliveries;
      if (e->def_exact) {
        int64_t dd = e->def_due;
        int dp = e->def_pri;
        m_adopt(m, idx[j]);
        if (e->st != QSTATE_WAITING || e->due != dd || e->pri != dp)
          MFAIL(m, "deferred e%d after ack: %s +%lld pri %d, want waiting +%lld pri %d", idx[j],
                queue_state_name(e->st), (long long)(e->due - T0), e->pri, (long long)(dd - T0),
                dp);
      } else {
        m_adopt(m, idx[j]);
        if (e->st != QSTATE_WAITING) MFAIL(m, "deferred e%d after ack: not waiting", idx[j]);
      }
      e->def = 0;
      if (e->deliveries != 0 && e->deliveries != prev)
        MFAIL(m, "deferred e%d after ack: deliveries %d", idx[j], e->deliveries);
    } else if (m->keep_done) {
      e->st = QSTATE_DONE;
    } else {
      e->present = 0;
    }
  }
}

static void m_nack(struct model *m) {
  int idx[2], n = m_pick_held(m, idx, 2);
  queue_lease_t ls[2];
  char errs[2][16];
  for (int j = 0; j < n; j++) {
    ls[j] = mklease(m->e[idx[j]].id, m->e[idx[j]].token);
    ls[j].delay_ms = rnd(m) % 3 ? rint_(m, 0, 4000) : -1;
    snprintf(errs[j], sizeof(errs[j]), "err%d", m->step);
    ls[j].error = rnd(m) % 3 ? errs[j] : NULL;
  }
  if (!n) return;
  if (store_queue_nack(m->f->s, m->q, ls, (size_t)n, m->now)) MFAIL(m, "nack failed");
  for (int j = 0; j < n; j++) {
    int i = idx[j];
    struct mel *e = &m->e[i];
    if (ls[j].result != 0) MFAIL(m, "nack e%d: %d", i, ls[j].result);
    m_stale(m, i);
    int was_def = e->def, d = e->deliveries;
    int pri = e->pri;
    m_adopt(m, i);
    if (ls[j].dead != (e->st == QSTATE_DEAD))
      MFAIL(m, "nack e%d: dead flag %d, state %s", i, ls[j].dead, queue_state_name(e->st));
    if (strcmp(e->err, ls[j].error ? ls[j].error : "") != 0 && ls[j].error)
      MFAIL(m, "nack e%d: error '%s', want '%s'", i, e->err, ls[j].error);
    if (!ls[j].error) e->err_known = 0; /* NULL: cleared or kept, either reading */
    (void)was_def; /* a deferred due time waits for the next ack */
    if (e->pri != pri) MFAIL(m, "nack e%d: priority changed", i);
    if (e->deliveries != d) MFAIL(m, "nack e%d: deliveries %d, was %d", i, e->deliveries, d);
    if (d >= M_MAXDEL) {
      if (e->st != QSTATE_DEAD) MFAIL(m, "nack e%d at delivery %d: not dead", i, d);
      continue;
    }
    if (e->st != QSTATE_WAITING) MFAIL(m, "nack e%d at delivery %d: dead", i, d);
    if (ls[j].delay_ms >= 0) {
      if (e->due != m->now + ls[j].delay_ms)
        MFAIL(m, "nack e%d delay %lld: due +%lld", i, (long long)ls[j].delay_ms,
              (long long)(e->due - m->now));
    } else {
      int64_t b = (int64_t)M_BACKOFF << (d - 1);
      if (b > M_BACKOFF_MAX) b = M_BACKOFF_MAX;
      int64_t got = e->due - m->now;
      if (got < b * 3 / 4 - 1 || got > b * 5 / 4 + 1)
        MFAIL(m, "nack e%d backoff at delivery %d: %lld ms, want %lld +-25%%", i, d,
              (long long)got, (long long)b);
    }
  }
}

static void m_extend(struct model *m) {
  int idx[2], n = m_pick_held(m, idx, 2);
  queue_lease_t ls[2];
  int64_t vis = rnd(m) % 2 ? 0 : rint_(m, 100, 6000);
  for (int j = 0; j < n; j++) ls[j] = mklease(m->e[idx[j]].id, m->e[idx[j]].token);
  if (!n) return;
  if (store_queue_extend(m->f->s, m->q, ls, (size_t)n, vis, m->now)) MFAIL(m, "extend failed");
  for (int j = 0; j < n; j++) {
    if (ls[j].result != 0) MFAIL(m, "extend e%d: %d", idx[j], ls[j].result);
    m->e[idx[j]].due = m->now + (vis ? vis : M_VIS);
  }
}

static void m_filter(struct model *m, queue_filter_t *fl, int64_t *ids, int *match) {
  static const char *pfx[] = {"e1", "e", "e3", "x"};
  static const char *keys[] = {"", "k1", "k2", "k9"};
  memset(fl, 0, sizeof(*fl));
  if (rnd(m) % 2) fl->states = (unsigned)rint_(m, 1, (1 << QSTATE_N) - 1);
  if (rnd(m) % 3 == 0) fl->key = keys[rnd(m) % 4];
  if (rnd(m) % 3 == 0) fl->prefix = pfx[rnd(m) % 4];
  if (rnd(m) % 3 == 0) {
    fl->nids = (size_t)rint_(m, 1, 3);
    for (size_t k = 0; k < fl->nids; k++) {
      int i = (int)rint_(m, 0, MN - 1);
      ids[k] = m->e[i].present ? m->e[i].id : INT64_C(987654321);
    }
    fl->ids = ids;
  }
  for (int i = 0; i < MN; i++) {
    struct mel *e = &m->e[i];
    char name[8];
    m_elname(i, name, sizeof(name));
    match[i] = e->present;
    if (fl->states && !(fl->states & (1u << e->st))) match[i] = 0;
    if (fl->key && strcmp(fl->key, m_keyname(i)) != 0) match[i] = 0;
    if (fl->prefix && strncmp(name, fl->prefix, strlen(fl->prefix)) != 0) match[i] = 0;
    if (fl->ids) {
      int in = 0;
      for (size_t k = 0; k < fl->nids; k++) in |= ids[k] == e->id;
      if (!in) match[i] = 0;
    }
  }
}

static void m_requeue_purge(struct model *m, int purge) {
  queue_filter_t fl;
  int64_t ids[3], count = -1;
  int match[MN], want = 0;
  m_filter(m, &fl, ids, match);
  int64_t due = m->now + rint_(m, 0, 1) * rint_(m, 0, 3000);
  int rc = purge ? store_queue_purge(m->f->s, m->q, &fl, m->now, &count)
                 : store_queue_requeue(m->f->s, m->q, &fl, due, m->now, &count);
  if (rc) MFAIL(m, "%s failed: %d", purge ? "purge" : "requeue", rc);
  for (int i = 0; i < MN; i++) {
    if (!match[i]) continue;
    struct mel *e = &m->e[i];
    want++;
    if (e->st == QSTATE_INFLIGHT) m_stale(m, i);
    if (purge) {
      e->present = 0;
      continue;
    }
    int had_def = e->def, pri = e->pri, dp = e->def_pri;
    e->st = QSTATE_WAITING;
    e->due = due;
    e->due_known = 1;
    e->deliveries = 0;
    e->def = 0;
    e->err_known = 0;
    if (had_def) { /* which priority a dropped deferral leaves: read back */
      queue_item_t it = must_item(m->f->s, m->q, e->id);
      if (it.priority != pri && !(e->def_exact && it.priority == dp))
        MFAIL(m, "requeued e%d: priority %d", i, it.priority);
      e->pri = it.priority;
      queue_item_release(&it);
    }
  }
  if (count != want)
    MFAIL(m, "%s (states %u key %s prefix %s nids %zu): count %lld, model %d",
          purge ? "purge" : "requeue", fl.states, fl.key ? fl.key : "-",
          fl.prefix ? fl.prefix : "-", fl.nids, (long long)count, want);
}

static void m_stale_ops(struct model *m) {
  if (!m->nstale) return;
  int k = (int)(rnd(m) % (uint64_t)m->nstale);
  int64_t id = m->stale_id[k], tok = m->stale_tok[k];
  int i = m_index(m, id);
  if (i >= 0 && m->e[i].st == QSTATE_INFLIGHT && m->e[i].token == tok) return;
  int r;
  switch (rnd(m) % 3) {
  case 0: r = ack1(m->f->s, m->q, id, tok, m->now); break;
  case 1: r = nack1(m->f->s, m->q, id, tok, 0, 0, "x", m->now, NULL); break;
  default: r = extend1(m->f->s, m->q, id, tok, 0, m->now); break;
  }
  if (r != -ENOENT) MFAIL(m, "stale lease id %lld token %lld: %d", (long long)id, (long long)tok, r);
}

static void model_run(struct fx *f, int keep_done, const char *q) {
  struct model *m = calloc(1, sizeof(*m));
  assert_non_null(m);
  const char *seed = getenv("SPIDERD_TEST_SEED");
  m_seed = seed ? strtoull(seed, NULL, 10) : 20240611ULL + (unsigned)keep_done;
  const char *steps_env = getenv("SPIDERD_TEST_MODEL_STEPS");
  int steps = steps_env ? atoi(steps_env) : 3000;
  m->rng = m_seed * 2654435761ULL + 1;
  m->f = f;
  m->q = q;
  m->keep_done = keep_done;
  m->now = T0;
  queue_conf_t c = defaults();
  c.keep_done = keep_done;
  c.max_deliveries = M_MAXDEL;
  c.visibility_ms = M_VIS;
  c.backoff_ms = M_BACKOFF;
  c.backoff_max_ms = M_BACKOFF_MAX;
  mkqueue(f->s, q, &c);
  int counts[9] = {0};
  for (m->step = 0; m->step < steps; m->step++) {
    int r = (int)rint_(m, 0, 99), op;
    if (r < 25) op = 0, m_put(m);
    else if (r < 45) op = 1, m_take(m);
    else if (r < 57) op = 2, m_ack(m);
    else if (r < 66) op = 3, m_nack(m);
    else if (r < 71) op = 4, m_extend(m);
    else if (r < 87) op = 5, m->now += rint_(m, 1, 2500);
    else if (r < 92) op = 6, m_requeue_purge(m, 0);
    else if (r < 95) op = 7, m_requeue_purge(m, 1);
    else op = 8, m_stale_ops(m);
    counts[op]++;
    m_check(m);
  }
  print_message("model (keep_done %d, seed %llu): %d steps: put %d take %d ack %d nack %d "
                "extend %d time %d requeue %d purge %d stale %d; acked %lld, put %lld\n",
                keep_done, m_seed, steps, counts[0], counts[1], counts[2], counts[3], counts[4],
                counts[5], counts[6], counts[7], counts[8], (long long)m->n_acked,
                (long long)m->n_put);
  free(m);
}

static void test_model(void **state) { model_run(*state, 0, "model"); }
static void test_model_keep_done(void **state) { model_run(*state, 1, "model-done"); }

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_put_creates_queue),    T(test_put_unique),
      T(test_put_policies_waiting), T(test_put_inflight),
      T(test_put_dead_done),        T(test_put_binary_and_sizes),
      T(test_put_last_byte),        T(test_put_batch_1000),
      T(test_put_batch_repeats),    T(test_take_order),
      T(test_take_visibility_token), T(test_take_paused_unknown),
      T(test_take_expired_leases),  T(test_ack),
      T(test_nack_delay),           T(test_nack_backoff),
      T(test_nack_retry_after),     T(test_nack_dead),
      T(test_extend),               T(test_settings),
      T(test_list_delete),          T(test_invalid_names),
      cmocka_unit_test(test_key_derive), T(test_key_mode_host),
      T(test_max_inflight),         T(test_key_inflight),
      T(test_key_rate),             T(test_key_rate_burst),
      T(test_key_order),            T(test_items_requeue_purge),
      T(test_requeue_all), T(test_nack_release),          T(test_stats_keys),
      T(test_transactions),
      T(test_model),                T(test_model_keep_done),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
