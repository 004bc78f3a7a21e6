/* The task queues' engine (queue_engine.h): their policy and bookkeeping,
 * and every queue op's frame, over a backend's row reads and writes;
 * sqlite/queue.c explains the model. */
#include "store/queue_engine.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "core/array.h"
#include "log.h"

int queue_take_before(int64_t p1, int64_t d1, int64_t p2, int64_t d2) {
  return p1 > p2 || (p1 == p2 && d1 < d2);
}

queue_state_t qitem_public_state(int s) {
  switch (s) {
  case QITEM_INFLIGHT:
    return QSTATE_INFLIGHT;
  case QITEM_DEAD:
    return QSTATE_DEAD;
  case QITEM_DONE:
    return QSTATE_DONE;
  default:
    return QSTATE_WAITING;
  }
}

int qitem_stored_state(queue_state_t st) {
  return st == QSTATE_INFLIGHT ? QITEM_INFLIGHT : st == QSTATE_DEAD ? QITEM_DEAD : QITEM_DONE;
}

int qitem_waiting_state(int64_t due, int64_t now) { return due <= now ? QITEM_READY : QITEM_DELAYED; }

/* Counters for an element entering (sign +1) or leaving (-1) stored state
 * `state`; any other state counts nothing. */
static void queue_deltas_move(queue_deltas_t *d, int state, int sign) {
  switch (state) {
  case QITEM_READY:
    d->ready += sign;
    /* fall through */
  case QITEM_DELAYED:
    d->waiting += sign;
    break;
  case QITEM_INFLIGHT:
    d->inflight += sign;
    break;
  case QITEM_DEAD:
    d->dead += sign;
    break;
  case QITEM_DONE:
    d->done += sign;
    break;
  }
}

/* A key's bucket size: c->key_burst, at least 1. */
static double queue_key_burst(const queue_conf_t *c) { return c->key_burst < 1 ? 1 : c->key_burst; }

/* Fills k as a key that has no stored row: a full bucket as of now. */
static void queue_key_init(queue_key_t *k, const queue_conf_t *c, int64_t now) {
  k->tokens = queue_key_burst(c);
  k->tokens_ms = now;
}

void queue_key_ready_add(queue_key_t *k, int64_t pri, int64_t due) {
  if (k->n_ready == 0) {
    k->head_pri = pri;
    k->head_due = due;
    k->head_stale = 0;
  } else if (!k->head_stale && queue_take_before(pri, due, k->head_pri, k->head_due)) {
    k->head_pri = pri;
    k->head_due = due;
  }
  k->n_ready++;
  k->dirty = 1;
}

/* `count` ready elements leave key k (taken, moved, purged); its head must
 * be read again. */
static void queue_key_ready_del(queue_key_t *k, int64_t count) {
  k->n_ready -= count;
  if (k->n_ready < 0) k->n_ready = 0;
  k->head_stale = 1;
  k->dirty = 1;
}

/* An element of key k leaves stored state `state`: k's ready or in-flight
 * count and d. k may be NULL unless state is QITEM_READY or QITEM_INFLIGHT. */
static void queue_key_leave(queue_key_t *k, queue_deltas_t *d, int state) {
  if (state == QITEM_READY) queue_key_ready_del(k, 1);
  if (state == QITEM_INFLIGHT) {
    k->inflight--;
    k->dirty = 1;
  }
  queue_deltas_move(d, state, -1);
}

/* An element of key k enters stored state `state` (< 0: none, it was
 * deleted) with (pri, due): d, and k's ready elements when ready. k may be
 * NULL unless state is QITEM_READY. */
static void queue_key_enter(queue_key_t *k, queue_deltas_t *d, int state, int64_t pri,
                            int64_t due) {
  queue_deltas_move(d, state, +1);
  if (state == QITEM_READY) queue_key_ready_add(k, pri, due);
}

/* A Retry-After: key k takes nothing before `until`. */
static void queue_key_block(queue_key_t *k, int64_t until) {
  k->block_ms = queue_max(k->block_ms, until);
  k->dirty = 1;
}

/* Refills k's token bucket up to now (when the queue has a rate). */
static void queue_key_refill(queue_key_t *k, const queue_conf_t *c, int64_t now) {
  if (c->key_rate <= 0) return;
  double burst = queue_key_burst(c);
  if (now > k->tokens_ms) {
    k->tokens += (double)(now - k->tokens_ms) * c->key_rate / 1000.0;
    k->tokens_ms = now;
  }
  if (k->tokens > burst) k->tokens = burst;
}

/* Decides whether k (refilled, its head read) is open now, and if not,
 * when it may be (wake_ms, 0 = when a lease ends or never). Marks k dirty. */
static void queue_key_decide(queue_key_t *k, const queue_conf_t *c, int64_t now) {
  k->open = 0;
  k->wake_ms = 0;
  if (k->n_ready <= 0) {
    /* Nothing to open for; a block or a spent bucket still wakes it, so a
     * take then forgets the key (key_flush deletes idle rows). */
    if (k->block_ms > now)
      k->wake_ms = k->block_ms;
    else if (c->key_rate > 0 && k->tokens < queue_key_burst(c))
      k->wake_ms = now + (int64_t)ceil((queue_key_burst(c) - k->tokens) * 1000.0 / c->key_rate);
  } else if (k->block_ms > now) {
    k->wake_ms = k->block_ms;
  } else if (c->key_inflight > 0 && k->inflight >= c->key_inflight) {
    /* opens again when one of its leases ends */
  } else if (c->key_rate > 0 && k->tokens < 1.0) {
    k->wake_ms = now + (int64_t)ceil((1.0 - k->tokens) * 1000.0 / c->key_rate);
  } else {
    k->open = 1;
  }
  k->dirty = 1;
}

queue_key_info_t *queue_key_list_add(queue_key_list_t *l) {
  return array_push((void **)&l->v, &l->n, &l->cap, sizeof(*l->v));
}

void queue_key_info_fill(queue_key_info_t *out, const queue_key_t *k, const queue_conf_t *c,
                         int64_t now) {
  queue_key_t x = *k; /* a copy: nothing is written back */
  queue_key_refill(&x, c, now);
  queue_key_decide(&x, c, now);
  out->ready = x.n_ready;
  out->inflight = x.inflight;
  out->tokens = c->key_rate > 0 ? x.tokens : -1;
  out->blocked_until_ms = x.block_ms > now ? x.block_ms : 0;
  out->open = x.open;
  out->wake_ms = x.open ? 0 : x.wake_ms;
}

/* Does k (settled) hold nothing worth remembering, so its row may go? */
static int queue_key_idle(const queue_key_t *k, const queue_conf_t *c, int64_t now) {
  return k->n_ready <= 0 && k->inflight <= 0 && k->block_ms <= now &&
         (c->key_rate <= 0 || k->tokens >= queue_key_burst(c));
}

/* How many of `room` elements open key k may hand out now (its in-flight
 * limit and tokens). */
static size_t queue_key_room(const queue_key_t *k, const queue_conf_t *c, size_t room) {
  if (c->key_inflight > 0)
    room = (size_t)queue_min((int64_t)room, queue_max(0, c->key_inflight - k->inflight));
  if (c->key_rate > 0) room = (size_t)queue_min((int64_t)room, (int64_t)floor(k->tokens));
  return room;
}

/* After a take leased n of key k's ready elements: k's count, head (next:
 * an element was left, (next_pri, next_due) its next head; else the take
 * saw them all), leases and tokens, and d. */
static void queue_key_taken(queue_key_t *k, const queue_conf_t *c, queue_deltas_t *d,
                            int64_t n, int next, int64_t next_pri, int64_t next_due) {
  if (n == 0) {
    /* An open key without a ready element: its count was off. */
    k->n_ready = 0;
    k->head_stale = 0;
    k->dirty = 1;
  } else {
    queue_key_ready_del(k, n);
    if (next) {
      k->head_pri = next_pri;
      k->head_due = next_due;
      k->head_stale = 0;
    } else {
      k->n_ready = 0; /* the pick saw every ready element of the key */
    }
    k->inflight += n;
    if (c->key_rate > 0) k->tokens -= (double)n;
  }
  d->ready -= n;
  d->waiting -= n;
  d->inflight += n;
}

/* How many of `max` elements a take may hand out under the queue's
 * in-flight limit, with d->inflight leases begun or ended in this call. */
static size_t queue_take_room(const queue_conf_t *c, const queue_deltas_t *d, size_t max) {
  size_t room = max;
  if (c->max_inflight > 0) {
    int64_t inflight = c->n_inflight + d->inflight;
    room = (size_t)queue_min((int64_t)room, queue_max(0, c->max_inflight - inflight));
  }
  return room;
}

/* The lease end of a take at now: visibility_ms, or the queue's when 0. */
static int64_t queue_lease_end(const queue_conf_t *c, int64_t visibility_ms, int64_t now) {
  return now + (visibility_ms ? visibility_ms : c->visibility_ms);
}

/* The earliest of t's due time, lease end and key wake-up (0 = none). */
static int64_t queue_next_time(const int64_t t[QUEUE_NEXT_N]) {
  int64_t best = 0;
  for (int i = QUEUE_NEXT_DELAYED; i <= QUEUE_NEXT_WAKE; i++)
    if (t[i] && (best == 0 || t[i] < best)) best = t[i];
  return best;
}

/* Has an element delivered `deliveries` times had its last delivery? */
static int queue_last_delivery(const queue_conf_t *c, int64_t deliveries) {
  return c->max_deliveries > 0 && deliveries >= c->max_deliveries;
}

static uint64_t jitter_state;

/* splitmix64, seeded once per process. */
double queue_jitter(void) {
  uint64_t v = __atomic_load_n(&jitter_state, __ATOMIC_RELAXED);
  if (v == 0) {
    uint64_t seed = ((uint64_t)time(NULL) << 22) ^ (uint64_t)getpid() ^ 1;
    __atomic_compare_exchange_n(&jitter_state, &v, seed, 0, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
  }
  v = __atomic_add_fetch(&jitter_state, 0x9e3779b97f4a7c15ULL, __ATOMIC_RELAXED);
  v ^= v >> 30;
  v *= 0xbf58476d1ce4e5b9ULL;
  v ^= v >> 27;
  v *= 0x94d049bb133111ebULL;
  v ^= v >> 31;
  return 0.75 + (double)(v >> 11) / 9007199254740992.0 * 0.5;
}

/* The delay before the next delivery after the deliveries-th failed: the
 * queue's backoff doubled per delivery up to its maximum, with jitter. */
static int64_t queue_backoff_ms(const queue_conf_t *c, int64_t deliveries) {
  double d = (double)c->backoff_ms;
  for (int64_t i = 1; i < deliveries && d < (double)c->backoff_max_ms; i++) d *= 2;
  if (d > (double)c->backoff_max_ms) d = (double)c->backoff_max_ms;
  return (int64_t)(d * queue_jitter());
}

/* When the element of nack l, delivered `deliveries` times, is due again
 * (its delay, none on release, else the backoff; no sooner than a
 * Retry-After). */
static int64_t queue_nack_due(const queue_conf_t *c, const queue_lease_t *l, int64_t deliveries,
                    int64_t now) {
  int64_t delay = l->delay_ms >= 0 ? l->delay_ms
                  : l->release     ? 0
                                   : queue_backoff_ms(c, deliveries);
  int64_t due = now + delay;
  if (l->retry_after_ms > 0) due = queue_max(due, now + l->retry_after_ms);
  return due;
}

void queue_stats_fill(queue_stats_t *out, const queue_conf_t *c, int64_t past_due,
              int64_t first_delayed, int64_t first_ready) {
  out->waiting = c->n_waiting;
  out->inflight = c->n_inflight;
  out->size = c->n_waiting + c->n_inflight;
  out->dead = c->n_dead;
  out->done = c->n_done;
  out->past_due = past_due;
  if (first_delayed && first_ready)
    out->oldest_due_ms = queue_min(first_delayed, first_ready);
  else
    out->oldest_due_ms = first_delayed ? first_delayed : first_ready;
  if (out->waiting == 0) out->oldest_due_ms = 0;
}

void queue_items_drop(queue_item_list_t *out, size_t first) {
  for (size_t i = first; i < out->n; i++) queue_item_release(&out->v[i]);
  out->n = first;
}

/* ---- the key cache ---- */

static uint64_t str_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
  return h;
}

static int cache_rehash(queue_key_cache_t *kc, size_t nslot) {
  uint32_t *ns = calloc(nslot, sizeof(*ns));
  if (!ns) return -ENOMEM;
  for (size_t i = 0; i < kc->nkeys; i++) {
    size_t at = str_hash(kc->keys[i].key) & (nslot - 1);
    while (ns[at]) at = (at + 1) & (nslot - 1);
    ns[at] = (uint32_t)(i + 1);
  }
  free(kc->slot);
  kc->slot = ns;
  kc->nslot = nslot;
  return 0;
}

/* Key k's entry in kc, or NULL when it has none. */
static queue_key_t *queue_key_cache_find(const queue_key_cache_t *kc, const char *k) {
  if (!kc->nslot) return NULL;
  uint64_t h = str_hash(k);
  for (size_t at = h & (kc->nslot - 1); kc->slot[at]; at = (at + 1) & (kc->nslot - 1)) {
    queue_key_t *e = &kc->keys[kc->slot[at] - 1];
    if (strcmp(e->key, k) == 0) return e;
  }
  return NULL;
}

/* A new zeroed entry for key k (a copy of k in it), not yet in kc: fill it,
 * then queue_key_cache_commit it, or queue_key_cache_drop it. Valid until the next
 * queue_key_cache_add. -ENOMEM. */
static int queue_key_cache_add(queue_key_cache_t *kc, const char *k, queue_key_t **out) {
  if (array_reserve((void **)&kc->keys, &kc->capkeys, kc->nkeys + 1, sizeof(*kc->keys)))
    return -ENOMEM;
  queue_key_t *e = &kc->keys[kc->nkeys];
  memset(e, 0, sizeof(*e));
  if (!(e->key = strdup(k))) return -ENOMEM;
  *out = e;
  return 0;
}

/* Adds the entry of the last queue_key_cache_add to kc. -ENOMEM (it stays in kc,
 * not indexed). */
static int queue_key_cache_commit(queue_key_cache_t *kc) {
  kc->nkeys++;
  if (kc->nkeys * 2 > kc->nslot) return cache_rehash(kc, kc->nslot ? kc->nslot * 2 : 16);
  size_t at = str_hash(kc->keys[kc->nkeys - 1].key) & (kc->nslot - 1);
  while (kc->slot[at]) at = (at + 1) & (kc->nslot - 1);
  kc->slot[at] = (uint32_t)kc->nkeys;
  return 0;
}

/* Forgets the entry of the last queue_key_cache_add. */
static void queue_key_cache_drop(queue_key_cache_t *kc) {
  free(kc->keys[kc->nkeys].key);
  kc->keys[kc->nkeys].key = NULL;
}

/* Frees kc's entries and index; kc is empty after. */
static void queue_key_cache_release(queue_key_cache_t *kc) {
  for (size_t i = 0; i < kc->nkeys; i++) free(kc->keys[i].key);
  free(kc->keys);
  free(kc->slot);
  kc->keys = NULL;
  kc->slot = NULL;
  kc->nkeys = kc->capkeys = kc->nslot = 0;
}

/* ---- one call on one queue ---- */

int queue_call_key(queue_call_t *x, const char *k, const queue_key_t *row, queue_key_t **out) {
  queue_key_t *e = queue_key_cache_find(&x->kc, k);
  int rc;
  if (e) {
    *out = e;
    return 0;
  }
  if ((rc = queue_key_cache_add(&x->kc, k, &e))) return rc;
  if (row == QUEUE_KEY_READ) {
    rc = x->rows->key_get(x, k, e);
    if (rc == -ENOENT) {
      queue_key_init(e, &x->c, x->now);
    } else if (rc) {
      queue_key_cache_drop(&x->kc);
      return rc;
    }
  } else if (row) {
    char *name = e->key;
    *e = *row;
    e->key = name;
    e->exists = 1;
    e->dirty = e->head_stale = 0;
  } else {
    queue_key_init(e, &x->c, x->now);
  }
  if ((rc = queue_key_cache_commit(&x->kc))) return rc;
  *out = e;
  return 0;
}

/* Refills k's bucket, reads its head again when stale, and decides whether
 * it is open now and, if not, when it may be. */
static int queue_call_settle(queue_call_t *x, queue_key_t *k) {
  const queue_conf_t *c = &x->c;
  queue_key_refill(k, c, x->now);
  if (k->n_ready > 0 && k->head_stale) {
    int rc = x->rows->key_head(x, k->key, &k->head_pri, &k->head_due);
    if (rc == -ENOENT) {
      /* The count disagrees with the rows: the rows win. */
      log_warn("store", "queue %s key '%s' counted %lld ready elements and has none",
               c->name ? c->name : "?", k->key, (long long)k->n_ready);
      k->n_ready = 0;
    } else if (rc) {
      return rc;
    }
    k->head_stale = 0;
  }
  queue_key_decide(k, c, x->now);
  return 0;
}

int queue_call_flush_key(queue_call_t *x, queue_key_t *k) {
  int rc;
  if (!k->dirty) return 0;
  if ((rc = queue_call_settle(x, k))) return rc;
  if (queue_key_idle(k, &x->c, x->now)) {
    if (k->exists && (rc = x->rows->key_delete(x, k->key))) return rc;
    k->exists = 0;
  } else {
    if ((rc = x->rows->key_put(x, k))) return rc;
    k->exists = 1;
  }
  k->dirty = 0;
  return 0;
}

int queue_call_flush_keys(queue_call_t *x) {
  for (size_t i = 0; i < x->kc.nkeys; i++) {
    int rc = queue_call_flush_key(x, &x->kc.keys[i]);
    if (rc) return rc;
  }
  return 0;
}

int queue_call_finish(queue_call_t *x) {
  int rc = queue_call_flush_keys(x);
  if (rc) return rc;
  const queue_deltas_t *d = &x->d;
  if (!d->waiting && !d->ready && !d->inflight && !d->dead && !d->done && !d->put &&
      !d->acked && x->lease_seq == x->lease_seq0)
    return 0;
  return x->rows->counters(x);
}

/* Takes up to `room` elements from open key k, whose head is the best;
 * stops at the first element after the next key's head (has2). */
static int take_from_key(queue_call_t *x, queue_key_t *k, int has2, int64_t p2, int64_t d2,
                         size_t room, int64_t lease_end, int64_t token,
                         queue_item_list_t *out, size_t *got) {
  size_t first = out->n;
  *got = 0;
  room = queue_key_room(k, &x->c, room);
  if (room == 0) { /* settled open at a moment that has passed: settle again */
    k->dirty = 1;
    return queue_call_flush_key(x, k);
  }
  int next = 0;
  int64_t next_pri = 0, next_due = 0;
  int rc = x->rows->pick(x, k, room, has2, p2, d2, lease_end, token, out, &next, &next_pri,
                         &next_due);
  if (rc) return rc; /* the caller drops what out got */
  size_t n = out->n - first;
  queue_key_taken(k, &x->c, &x->d, (int64_t)n, next, next_pri, next_due);
  *got = n;
  return queue_call_flush_key(x, k);
}

int queue_call_take(queue_call_t *x, size_t max, int64_t visibility_ms,
                    queue_item_list_t *out, size_t *taken) {
  const queue_rows_t *r = x->rows;
  int64_t now = x->now, t[QUEUE_NEXT_N];
  int rc;
  /* One probe says which sweeps have work (each costs a statement or a
   * temporary b-tree even when it finds nothing). */
  if ((rc = r->times(x, t)) ||
      (t[QUEUE_NEXT_LEASE] && t[QUEUE_NEXT_LEASE] <= now && (rc = r->expire(x))) ||
      (t[QUEUE_NEXT_DELAYED] && t[QUEUE_NEXT_DELAYED] <= now && (rc = r->promote(x))) ||
      (t[QUEUE_NEXT_WAKE] && t[QUEUE_NEXT_WAKE] <= now && (rc = r->wake(x))) ||
      (rc = queue_call_flush_keys(x)))
    return rc;
  size_t room = queue_take_room(&x->c, &x->d, max), got_all = 0;
  int64_t lease_end = queue_lease_end(&x->c, visibility_ms, now);
  int64_t token = ++x->lease_seq;
  int idle_rounds = 0; /* rounds that took nothing: a key settled closed */
  while (!rc && got_all < room && idle_rounds < 64) {
    queue_key_t *k = NULL;
    int64_t p2 = 0, d2 = 0;
    int has2 = 0;
    size_t got = 0;
    if ((rc = r->best_key(x, &k, &has2, &p2, &d2)) || !k) break;
    rc = take_from_key(x, k, has2, p2, d2, room - got_all, lease_end, token, out, &got);
    got_all += got;
    idle_rounds = got ? 0 : idle_rounds + 1;
  }
  *taken += got_all;
  return rc;
}

int queue_call_next(queue_call_t *x, int64_t *next_ms) {
  int64_t t[QUEUE_NEXT_N];
  int rc = x->rows->times(x, t);
  if (!rc) *next_ms = queue_next_time(t);
  return rc;
}

/* ---- put, ack, nack, requeue ---- */

int queue_call_moved(queue_call_t *x, const char *key, int from, int to, int64_t pri,
                     int64_t due) {
  queue_key_t *k = NULL;
  int rc;
  if ((from == QITEM_READY || from == QITEM_INFLIGHT || to == QITEM_READY) &&
      (rc = queue_call_key(x, key, QUEUE_KEY_READ, &k)))
    return rc;
  queue_key_leave(k, &x->d, from);
  queue_key_enter(k, &x->d, to, pri, due);
  if (to == QITEM_READY || to == QITEM_DELAYED) x->woke = 1;
  return 0;
}

/* Writes w and keeps the bookkeeping of its element (of key, in `from`). */
static int call_write(queue_call_t *x, const queue_write_t *w, const char *key, int from) {
  int rc = x->rows->write(x, w);
  if (rc) return rc;
  return queue_call_moved(x, key, from, w->kind == QWRITE_DELETE ? -1 : w->state, w->pri,
                          w->due);
}

int queue_call_put(queue_call_t *x, queue_put_t *p) {
  char derived[QUEUE_KEY_MAX + 1];
  const char *key = p->key;
  int64_t due = p->due_ms, pri = p->priority;
  queue_elem_t e;
  int rc;
  if (!key) {
    queue_key_derive(x->c.key_mode, p->element, p->len, derived, sizeof(derived));
    key = derived;
  }
  int state = qitem_waiting_state(due, x->now);
  memset(&e, 0, sizeof(e));
  if ((rc = x->rows->put(x, p, queue_hash(p->element, p->len), key, state, &e))) return rc;
  p->id = e.id;
  if (e.inserted) {
    p->result = QPUT_ADDED;
    x->d.put++;
    return queue_call_moved(x, key, -1, state, pri, due);
  }
  p->result = QPUT_KEPT;
  if (p->policy == QPOLICY_KEEP_EXISTING) return 0;
  queue_write_t w = {.kind = QWRITE_STATE, .id = e.id, .pri = pri, .due = due};
  if (e.state == QITEM_INFLIGHT) {
    /* Leased: the new due time waits for the lease's end (0 means none). */
    if (p->policy == QPOLICY_KEEP_EARLIEST && e.redue_ms) {
      w.due = queue_min(e.redue_ms, due);
      w.pri = queue_max(e.redue_pri, pri);
    }
    w.kind = QWRITE_REDUE;
    w.due = queue_max(w.due, 1);
    p->result = QPUT_DEFERRED;
    return x->rows->write(x, &w);
  }
  if (e.state == QITEM_DEAD || e.state == QITEM_DONE) {
    /* Finished: it starts again. */
    w.state = state;
    w.reset = 1;
    x->d.put++;
    p->result = QPUT_ADDED;
    return call_write(x, &w, e.key, e.state);
  }
  /* Waiting: moves when its time or priority changes. */
  if (p->policy == QPOLICY_KEEP_EARLIEST) {
    w.due = queue_min(e.due, due);
    w.pri = queue_max(e.pri, pri);
  }
  if (w.due == e.due && w.pri == e.pri) return 0;
  w.state = qitem_waiting_state(w.due, x->now);
  p->result = QPUT_MOVED;
  return call_write(x, &w, e.key, e.state);
}

int queue_call_lease_end(queue_call_t *x, int ack, queue_lease_t *l, const queue_elem_t *h) {
  queue_write_t w = {.kind = QWRITE_STATE, .id = l->id, .pri = h->pri, .error = NULL};
  l->result = 0;
  l->dead = 0;
  if (ack) {
    x->d.acked++;
    if (h->redue_ms) { /* a put while it was leased: due again */
      w.state = qitem_waiting_state(h->redue_ms, x->now);
      w.due = h->redue_ms;
      w.pri = h->redue_pri;
      w.reset = 1;
    } else if (x->c.keep_done) {
      w.state = QITEM_DONE;
      w.due = x->now;
    } else {
      w.kind = QWRITE_DELETE;
    }
    return call_write(x, &w, h->key, QITEM_INFLIGHT);
  }
  /* A Retry-After speaks for the key (the host), whatever becomes of this
   * element. */
  if (l->retry_after_ms > 0) {
    queue_key_t *k;
    int rc = queue_call_key(x, h->key, QUEUE_KEY_READ, &k);
    if (rc) return rc;
    queue_key_block(k, x->now + l->retry_after_ms);
  }
  w.error = l->error;
  if (!l->release && queue_last_delivery(&x->c, h->deliveries)) {
    l->dead = 1;
    w.state = QITEM_DEAD;
    w.due = x->now;
  } else {
    w.due = queue_nack_due(&x->c, l, h->deliveries, x->now);
    w.state = qitem_waiting_state(w.due, x->now);
    w.uncount = l->release ? 1 : 0;
  }
  return call_write(x, &w, h->key, QITEM_INFLIGHT);
}

int queue_call_expired(queue_call_t *x, int64_t id, const char *key, int64_t deliveries,
                       int64_t pri) {
  int dead = queue_last_delivery(&x->c, deliveries);
  queue_write_t w = {.kind = QWRITE_STATE, .id = id, .due = x->now, .pri = pri,
                     .state = dead ? QITEM_DEAD : QITEM_READY,
                     .error = dead ? QUEUE_EXPIRED_ERROR : NULL};
  return call_write(x, &w, key, QITEM_INFLIGHT);
}

int queue_call_requeue(queue_call_t *x, int requeue, const queue_elem_t *e, int64_t due_ms) {
  queue_write_t w = {.kind = QWRITE_DELETE, .id = e->id, .pri = e->pri};
  if (requeue) {
    w.kind = QWRITE_STATE;
    w.state = qitem_waiting_state(due_ms, x->now);
    w.due = due_ms;
    w.reset = 1;
  }
  return call_write(x, &w, e->key, e->state);
}

int queue_limits_changed(const queue_conf_t *a, const queue_conf_t *b) {
  return a->key_inflight != b->key_inflight || a->key_rate != b->key_rate ||
         a->key_burst != b->key_burst;
}

int queue_call_key_info(queue_call_t *x, queue_key_list_t *out, const char *key, size_t len,
                        const queue_key_t *k) {
  queue_key_info_t *e = queue_key_list_add(out);
  if (!e || !(e->key = strndup(key ? key : "", len))) return -ENOMEM;
  queue_key_info_fill(e, k, &x->c, x->now);
  return 0;
}

void queue_call_release(queue_call_t *x) {
  queue_key_cache_release(&x->kc);
  if (x->rows->release) x->rows->release(x);
}

/* ---- the queue ops: one frame for every backend ---- */

/* Starts call x on connection s at now: its transaction begun (*began). */
static int op_begin(queue_call_t *x, const queue_rows_t *r, store_t *s, int64_t now,
                    int *began) {
  memset(x, 0, sizeof(*x));
  x->rows = r;
  x->s = s;
  x->now = now;
  return r->begin(x, began);
}

/* Loads queue name's row for the call (QUEUE_LOAD_*). */
static int op_load(queue_call_t *x, const char *name, int how) {
  int rc = x->rows->load(x, name, how);
  x->lease_seq0 = x->lease_seq;
  x->c.name = (char *)name;
  return rc;
}

/* queue_call_finish, then the wake-up of takers elsewhere when elements
 * became takeable. */
static int op_finish(queue_call_t *x) {
  int rc = queue_call_finish(x);
  if (!rc && x->woke && x->rows->woken) rc = x->rows->woken(x);
  return rc;
}

/* Ends the call: released, its transaction committed or rolled back by rc. */
static int op_end(queue_call_t *x, int began, int rc) {
  queue_call_release(x);
  return x->rows->end(x, began, rc);
}

int queue_op_put(const queue_rows_t *r, store_t *s, const char *name, queue_put_t *items,
                 size_t n, int64_t now_ms) {
  queue_call_t x;
  int began, rc = op_begin(&x, r, s, now_ms, &began);
  if (rc) return rc;
  rc = op_load(&x, name, QUEUE_LOAD_OPEN);
  for (size_t i = 0; !rc && i < n; i++) rc = queue_call_put(&x, &items[i]);
  if (!rc) rc = op_finish(&x);
  return op_end(&x, began, rc);
}

int queue_op_take(const queue_rows_t *r, store_t *s, const char *name, size_t max,
                  int64_t visibility_ms, int64_t now_ms, queue_item_list_t *out,
                  int64_t *next_ms) {
  queue_call_t x;
  size_t taken = 0, first = out->n;
  int began, rc = op_begin(&x, r, s, now_ms, &began);
  if (rc) return rc;
  rc = op_load(&x, name, QUEUE_LOAD_LOCK);
  if (rc == -ENOENT) { /* no queue: nothing to take, nothing to wait for */
    rc = 0;
    goto out;
  }
  if (rc || x.c.paused) goto out;
  rc = queue_call_take(&x, max, visibility_ms, out, &taken);
  if (!rc) rc = op_finish(&x);
  if (!rc && taken < max) rc = queue_call_next(&x, next_ms);
out:
  rc = op_end(&x, began, rc);
  if (rc) queue_items_drop(out, first);
  return rc;
}

/* Was lease i of l ended earlier in this call (the same id and token,
 * held)? A lease ends once. */
static int lease_repeated(const queue_lease_t *l, const queue_elem_t *h, size_t i) {
  for (size_t j = 0; j < i; j++)
    if (h[j].id && l[j].id == l[i].id && l[j].token == l[i].token) return 1;
  return 0;
}

int queue_op_leases(const queue_rows_t *r, store_t *s, const char *name, int ack,
                    queue_lease_t *leases, size_t n, int64_t now_ms) {
  queue_call_t x;
  queue_elem_t *h = NULL;
  int began, rc = op_begin(&x, r, s, now_ms, &began);
  if (rc) return rc;
  rc = op_load(&x, name, QUEUE_LOAD_LOCK);
  if (!rc && !(h = calloc(n ? n : 1, sizeof(*h)))) rc = -ENOMEM;
  if (!rc) rc = r->leases(&x, leases, n, h);
  for (size_t i = 0; !rc && i < n; i++) {
    queue_lease_t *l = &leases[i];
    l->result = 0;
    l->dead = 0;
    if (!h[i].id || lease_repeated(leases, h, i)) {
      h[i].id = 0;
      l->result = -ENOENT;
      continue;
    }
    rc = queue_call_lease_end(&x, ack, l, &h[i]);
  }
  if (!rc && r->flush) rc = r->flush(&x);
  if (!rc) rc = op_finish(&x);
  free(h);
  return op_end(&x, began, rc);
}

/* Writes settings c: a new queue's, or over the stored ones (*cur as they
 * were; *created tells which). */
static int set_write(queue_call_t *x, const queue_conf_t *c, queue_conf_t *cur, int *created) {
  const queue_rows_t *r = x->rows;
  int rc = op_load(x, c->name, QUEUE_LOAD_LOCK);
  *cur = x->c;
  *created = 0;
  if (rc == -ENOENT) {
    rc = r->conf_write(x, c, 1);
    if (rc == -EEXIST) { /* made by another connection since: change it */
      rc = op_load(x, c->name, QUEUE_LOAD_LOCK);
      *cur = x->c;
    } else {
      *created = !rc;
    }
  }
  if (!rc && !*created) rc = r->conf_write(x, c, 0);
  x->lease_seq0 = x->lease_seq;
  x->c.name = c->name;
  return rc;
}

int queue_op_set(const queue_rows_t *r, store_t *s, queue_conf_t *c) {
  queue_call_t x;
  queue_conf_t cur;
  int created;
  int began, rc = op_begin(&x, r, s, clock_wall_ms(), &began);
  if (rc) return rc;
  if ((rc = set_write(&x, c, &cur, &created)) || created) goto done;
  /* Limits may have changed: every key decides again whether it is open. */
  if (queue_limits_changed(&cur, &x.c)) {
    if (!(rc = r->keys_touch(&x))) rc = queue_call_flush_keys(&x);
    x.woke = 1;
  }
  /* Resumed: waiting takers may go on. */
  if (cur.paused && !x.c.paused) x.woke = 1;
  if (!rc && x.woke && !x.c.paused && r->woken) rc = r->woken(&x);
done:
  if (!rc) {
    char *name = c->name;
    *c = x.c;
    c->name = name;
  }
  return op_end(&x, began, rc);
}

int queue_op_get(const queue_rows_t *r, store_t *s, const char *name, queue_conf_t *out) {
  queue_call_t x = {.rows = r, .s = s};
  int rc = r->load(&x, name, QUEUE_LOAD_READ);
  if (!rc) {
    *out = x.c;
    if (!(out->name = strdup(name))) rc = -ENOMEM;
  }
  return rc;
}

int queue_op_delete(const queue_rows_t *r, store_t *s, const char *name) {
  queue_call_t x;
  int began, rc = op_begin(&x, r, s, 0, &began);
  if (rc) return rc;
  rc = op_load(&x, name, QUEUE_LOAD_LOCK);
  if (!rc) rc = r->drop(&x);
  return op_end(&x, began, rc);
}

int queue_op_stats(const queue_rows_t *r, store_t *s, const char *name, int64_t now_ms,
                   queue_stats_t *out) {
  queue_call_t x = {.rows = r, .s = s, .now = now_ms};
  queue_stats_row_t row;
  memset(&row, 0, sizeof(row));
  int rc = r->stats(&x, name, &row);
  if (rc) return rc;
  out->keys = row.keys;
  queue_stats_fill(out, &row.c, row.ready + row.delayed_due, row.t[QUEUE_NEXT_DELAYED],
                   row.t[QUEUE_NEXT_READY]);
  return 0;
}

int queue_op_keys(const queue_rows_t *r, store_t *s, const char *name, const char *after,
                  size_t limit, int64_t now_ms, queue_key_list_t *out) {
  queue_call_t x = {.rows = r, .s = s, .now = now_ms};
  size_t first = out->n;
  int rc = r->load(&x, name, QUEUE_LOAD_READ);
  if (!rc) rc = r->key_page(&x, after, limit, out);
  if (rc) { /* all or nothing */
    for (size_t i = first; i < out->n; i++) free(out->v[i].key);
    out->n = first;
  }
  return rc;
}

int queue_op_items(const queue_rows_t *r, store_t *s, const char *name,
                   const queue_filter_t *f, queue_item_list_t *out) {
  queue_call_t x = {.rows = r, .s = s};
  int rc = r->load(&x, name, QUEUE_LOAD_READ);
  return rc ? rc : r->items(&x, f, out);
}

/* Requeue (waiting again from due_ms, a fresh start) or purge, a chunk at a
 * time, each chunk's keys and counters kept as it goes. */
int queue_op_bulk(const queue_rows_t *r, store_t *s, const char *name, const queue_filter_t *f,
                  int requeue, int64_t due_ms, int64_t now_ms, int64_t *count) {
  queue_call_t x;
  queue_elem_t *v = NULL;
  int64_t after = f->after_id, total = 0;
  int state = qitem_waiting_state(due_ms, now_ms);
  int began, rc = op_begin(&x, r, s, now_ms, &began);
  if (rc) return rc;
  rc = op_load(&x, name, QUEUE_LOAD_LOCK);
  if (!rc && !(v = calloc(r->bulk_chunk, sizeof(*v)))) rc = -ENOMEM;
  while (!rc) {
    size_t n = 0;
    int applied = 0;
    rc = r->bulk(&x, f, requeue, state, due_ms, after, v, &n, &applied);
    for (size_t i = 0; !rc && i < n; i++) {
      rc = applied ? queue_call_moved(&x, v[i].key, v[i].state, requeue ? state : -1,
                                      v[i].pri, due_ms)
                   : queue_call_requeue(&x, requeue, &v[i], due_ms);
      if (v[i].id > after) after = v[i].id;
    }
    total += (int64_t)n;
    if (n < r->bulk_chunk) break;
  }
  free(v);
  if (!rc) rc = op_finish(&x);
  if (!rc) *count = total;
  return op_end(&x, began, rc);
}
