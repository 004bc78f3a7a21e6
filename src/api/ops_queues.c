/* Task queue operations (docs/queues.md): queues and their settings, put,
 * take (with a long-poll wait), ack / nack / extend, listing, requeue and
 * purge. Input is checked here, on the loop. An element's traffic (put,
 * take, ack, nack, extend) is one store call on a store thread; a change of
 * a queue's policy (settings, pause, resume, delete, requeue, purge) is
 * made with its event by flow/queues.h in one store op.
 *
 * A take that finds nothing and may wait parks its call on the daemon's
 * list of waiting takers (struct api_queues). It is taken again when a put,
 * nack, ack, requeue, resume or settings change of its queue commits on
 * this daemon (woken from that op's done callback, on the loop: no polling),
 * when the store's next_ms (the next element due, lease end or key wake-up)
 * comes, or when its wait ends (then it answers with no items). A waiting
 * taker whose client leaves is dropped at once; at daemon stop every waiting
 * taker is answered. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/ops_impl.h"
#include "clock.h"
#include "core/cron.h"
#include "core/names.h"
#include "core/queue.h"
#include "error.h"
#include "flow/queues.h"
#include "log.h"

#define WAIT_MAX_S 30
#define ITEMS_PAGE_DEFAULT 100
#define SECONDS_MAX 1e9 /* ~31 years: any duration the API takes */

/* ---- small helpers ---- */

static int64_t secs_ms(double s) { return (int64_t)llround(s * 1000.0); }
static json_t *ms_secs(int64_t ms) { return json_real((double)ms / 1000.0); }

static const char *qname(const op_call_t *c) { return op_str(c, "name"); }

/* 1 after failing the call when the queue name is not one (queue names
 * follow project names: core/names.h). */
static int bad_name(op_call_t *c) {
  char why[256];
  if (name_valid("queue name", qname(c), why, sizeof(why))) return 0;
  op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "name"), "%s", why);
  return 1;
}

/* A number of seconds >= 0 (and > 0 when positive is set) from params or
 * an entry; 1 after failing the call. */
static int seconds_of(op_call_t *c, const json_t *v, const char *what, int positive,
                      double *out) {
  double d = json_is_number(v) ? json_number_value(v) : NAN;
  if (!json_is_number(v) || !isfinite(d) || d < 0 || (positive && d <= 0) || d > SECONDS_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", what),
            "'%s' must be a number of seconds %s", what, positive ? "> 0" : ">= 0");
    return 1;
  }
  *out = d;
  return 0;
}

static void fail_store(op_call_t *c, int rc) {
  if (rc == -ENOENT)
    op_fail(c, SPD_ENOQUEUE, json_pack("{s:s}", "queue", qname(c)), "queue '%s' not found",
            qname(c));
  else if (c->err_code && c->err[0])
    op_fail(c, c->err_code, NULL, "%s", c->err);
  else if (rc == -EINVAL)
    op_fail(c, SPD_EBADPARAM, NULL, "the store refused the input: %s", spd_strerror(rc));
  else if (rc == SPD_ESHUTDOWN)
    op_fail(c, rc, NULL, "the daemon is shutting down");
  else
    op_fail(c, rc, NULL, "the store failed: %s", spd_strerror(rc));
}

/* ---- rendering ---- */

static void lease_str(int64_t id, int64_t token, char out[48]) {
  snprintf(out, 48, "%" PRId64 ".%" PRId64, id, token);
}

static json_t *render_item(const queue_item_t *it) {
  char lease[48];
  int inflight = it->state == QSTATE_INFLIGHT;
  if (inflight) lease_str(it->id, it->token, lease);
  json_t *o = json_object();
  json_object_set_new(o, "id", json_integer(it->id));
  json_object_set_new(o, "element", json_stringn(it->element ? it->element : "", it->len));
  json_object_set_new(o, "lease", inflight ? json_string(lease) : json_null());
  json_object_set_new(o, "lease_expires", inflight ? op_iso_time(it->due_ms) : json_null());
  json_object_set_new(o, "priority", json_integer(it->priority));
  json_object_set_new(o, "due", it->state == QSTATE_WAITING ? op_iso_time(it->due_ms) : json_null());
  json_object_set_new(o, "deliveries", json_integer(it->deliveries));
  json_object_set_new(o, "key", json_string(it->key ? it->key : ""));
  json_object_set_new(o, "state", json_string(queue_state_name(it->state)));
  json_object_set_new(o, "error", op_str_or_null(it->error));
  return o;
}

static json_t *render_items(const queue_item_list_t *l, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n && i < l->n; i++) json_array_append_new(a, render_item(&l->v[i]));
  return a;
}

static json_t *render_queue(const queue_conf_t *q, const queue_stats_t *st) {
  json_t *o = json_object();
  json_object_set_new(o, "name", json_string(q->name ? q->name : ""));
  json_object_set_new(o, "id", json_integer(q->id));
  json_object_set_new(o, "created", op_iso_time(q->created_ms));
  json_object_set_new(o, "paused", json_boolean(q->paused));
  json_object_set_new(o, "keep_done", json_boolean(q->keep_done));
  json_object_set_new(o, "visibility", ms_secs(q->visibility_ms));
  json_object_set_new(o, "max_deliveries", json_integer(q->max_deliveries));
  json_object_set_new(o, "backoff", ms_secs(q->backoff_ms));
  json_object_set_new(o, "backoff_max", ms_secs(q->backoff_max_ms));
  json_object_set_new(o, "max_inflight", json_integer(q->max_inflight));
  json_object_set_new(o, "key_mode", json_string(queue_key_mode_name(q->key_mode)));
  json_object_set_new(o, "key_inflight", json_integer(q->key_inflight));
  json_object_set_new(o, "key_rate", json_real(q->key_rate));
  json_object_set_new(o, "key_burst", json_real(q->key_burst));
  json_t *s = json_object();
  json_object_set_new(s, "size", json_integer(st->size));
  json_object_set_new(s, "waiting", json_integer(st->waiting));
  json_object_set_new(s, "past_due", json_integer(st->past_due));
  json_object_set_new(s, "inflight", json_integer(st->inflight));
  json_object_set_new(s, "dead", json_integer(st->dead));
  json_object_set_new(s, "done", json_integer(st->done));
  json_object_set_new(s, "oldest_due", op_iso_time(st->oldest_due_ms));
  json_object_set_new(s, "keys", json_integer(st->keys));
  json_object_set_new(s, "put", json_integer(q->n_put));
  json_object_set_new(s, "acked", json_integer(q->n_acked));
  json_object_set_new(o, "stats", s);
  return o;
}

/* A queue with its stats, read on a store thread into c->result. */
static int render_from_store(store_t *s, op_call_t *c, queue_conf_t *q) {
  queue_stats_t st;
  memset(&st, 0, sizeof(st));
  int rc = store_queue_stats(s, q->name, clock_wall_ms(), &st);
  if (rc) return rc;
  json_decref(c->result);
  c->result = render_queue(q, &st);
  return 0;
}

/* ---- waiting takers ---- */

typedef struct take take_t;

typedef struct api_queues {
  app_t *app;
  uv_timer_t timer; /* the earliest wake_at of the parked takers */
  take_t *head, *tail; /* parked takers, oldest first */
  uint64_t armed;      /* wake time the timer is set for (loop ms); 0 = none */
} api_queues_t;

struct take {
  op_call_t *c;
  take_t *next, *prev;
  int parked;            /* on the list */
  int busy;              /* a store take is in flight */
  int gone;              /* the client left */
  size_t max;
  int64_t visibility_ms;
  uint64_t deadline;     /* loop ms; 0 = no wait */
  uint64_t wake_at;      /* loop ms, while parked */
  http_watch_t *watch;
  queue_item_list_t items;
  int64_t next_ms;       /* wall ms from the store; 0 = nothing pending */
  int64_t taken_at;      /* wall ms of the take */
  queue_lease_t *acks;   /* "ack": acked before the first take, in its transaction */
  size_t nacks;
  int has_ack;           /* the request had "ack" (the reply says acked/stale) */
  int acked;             /* the acks ran (a parked take does not ack again) */
};

static void take_free(void *p) {
  take_t *t = p;
  queue_item_list_release(&t->items);
  free(t->acks);
  free(t);
}

static int parse_lease(const char *s, int64_t *id, int64_t *token);

static void timer_closed(uv_handle_t *h) { free(h->data); }

static void unpark(api_queues_t *q, take_t *t) {
  if (!t->parked) return;
  if (t->prev) t->prev->next = t->next;
  else q->head = t->next;
  if (t->next) t->next->prev = t->prev;
  else q->tail = t->prev;
  t->next = t->prev = NULL;
  t->parked = 0;
}

static void rearm(api_queues_t *q);

/* Answers a take: leaves the list, stops watching, replies. */
static void take_reply(take_t *t) {
  op_call_t *c = t->c;
  api_queues_t *q = c->app->queues;
  if (q) unpark(q, t);
  if (t->watch) http_watch_cancel(t->watch);
  t->watch = NULL;
  if (t->gone) {
    op_fail(c, SPD_EBADREQUEST, NULL, "the client left");
    return;
  }
  json_t *r = json_pack("{s:o}", "items", render_items(&t->items, t->items.n));
  if (t->has_ack) {
    json_t *stale = json_array();
    json_int_t good = 0;
    for (size_t i = 0; i < t->nacks; i++) {
      char s[48];
      if (!t->acks[i].result) {
        good++;
        continue;
      }
      lease_str(t->acks[i].id, t->acks[i].token, s);
      json_array_append_new(stale, json_string(s));
    }
    json_object_set_new(r, "acked", json_integer(good));
    json_object_set_new(r, "stale", stale);
  }
  op_ok(c, r);
}

static int take_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  take_t *t = c->priv;
  queue_item_list_release(&t->items);
  t->next_ms = 0;
  t->taken_at = clock_wall_ms();
  if (t->nacks && !t->acked) {
    int rc = store_queue_ack(s, qname(c), t->acks, t->nacks, t->taken_at);
    if (rc == -ENOENT) /* no such queue: nothing it names is held */
      for (size_t i = 0; i < t->nacks; i++) t->acks[i].result = -ENOENT;
    else if (rc)
      return rc;
    /* (t->acked is set by take_done: a run rolled back by a collision is
     * run again by the store pool, and must ack again) */
  }
  int rc = store_queue_take(s, qname(c), t->max, t->visibility_ms, t->taken_at, &t->items,
                            &t->next_ms);
  return rc == -ENOENT ? 0 : rc; /* an unknown queue gives nothing (yet) */
}

static void take_done(void *arg, int rc);
static void wake_queue(app_t *app, const char *name, size_t n);

static void take_submit(take_t *t) {
  t->busy = 1;
  int rc = store_submit(t->c->app->store, STORE_WRITE, take_fn, t->c, take_done);
  if (rc) {
    t->busy = 0;
    queue_item_list_release(&t->items);
    take_reply(t); /* stopping: what there is, nothing */
  }
}

/* Hands back what a take got for a client that left: due again at once. */
typedef struct giveback {
  char *name;
  queue_lease_t *leases;
  size_t n;
} giveback_t;

static int giveback_fn(store_t *s, void *arg) {
  giveback_t *g = arg;
  return store_queue_nack(s, g->name, g->leases, g->n, clock_wall_ms());
}

static void giveback_done(void *arg, int rc) {
  giveback_t *g = arg;
  if (rc) log_warn("queues", "cannot hand back %zu element(s) of queue '%s' a client left: %s",
                   g->n, g->name, spd_strerror(rc));
  free(g->name);
  free(g->leases);
  free(g);
}

static void give_back(app_t *app, const char *name, const queue_item_list_t *items) {
  giveback_t *g = calloc(1, sizeof(*g));
  if (g) g->leases = calloc(items->n, sizeof(*g->leases));
  if (g) g->name = strdup(name);
  if (!g || !g->leases || !g->name) goto fail;
  for (size_t i = 0; i < items->n; i++)
    g->leases[i] = (queue_lease_t){.id = items->v[i].id, .token = items->v[i].token,
                                   .delay_ms = 0, .error = "the client left before the reply"};
  g->n = items->n;
  if (!store_submit(app->store, STORE_WRITE, giveback_fn, g, giveback_done)) return;
fail:
  if (g) {
    free(g->name);
    free(g->leases);
  }
  free(g);
  log_warn("queues", "%zu element(s) of queue '%s' a client left come back when their lease "
           "ends", items->n, name);
}

static void on_client_gone(void *ud) {
  take_t *t = ud;
  t->watch = NULL; /* fired: ended by the server */
  t->gone = 1;
  if (!t->busy) take_reply(t);
}

static void park(api_queues_t *q, take_t *t) {
  uint64_t now = uv_now(q->app->loop);
  t->wake_at = t->deadline;
  if (t->next_ms > 0) {
    int64_t in = t->next_ms - t->taken_at;
    uint64_t at = now + (uint64_t)(in > 0 ? in : 0);
    if (at < t->wake_at) t->wake_at = at;
  }
  t->parked = 1;
  t->next = NULL;
  t->prev = q->tail;
  if (q->tail) q->tail->next = t;
  else q->head = t;
  q->tail = t;
  if (!t->watch && t->c->req) t->watch = http_req_watch_close(t->c->req, on_client_gone, t);
  rearm(q);
}

static void take_done(void *arg, int rc) {
  op_call_t *c = arg;
  take_t *t = c->priv;
  api_queues_t *q = c->app->queues;
  t->busy = 0;
  if (!rc && t->nacks) t->acked = 1; /* committed with the take */
  if (rc) {
    if (t->watch) http_watch_cancel(t->watch);
    t->watch = NULL;
    fail_store(c, rc);
    return;
  }
  if (t->gone) {
    if (t->items.n) give_back(c->app, qname(c), &t->items);
    take_reply(t);
    return;
  }
  if (t->items.n || !t->deadline || !q || uv_now(c->app->loop) >= t->deadline) {
    /* A full batch may have left more behind: the next waiter looks. */
    if (t->items.n && t->items.n == t->max) wake_queue(c->app, qname(c), 1);
    take_reply(t);
    return;
  }
  park(q, t);
}

/* Takes again (or ends) a parked taker. */
static void wake(api_queues_t *q, take_t *t) {
  unpark(q, t);
  if (uv_now(q->app->loop) >= t->deadline) take_reply(t);
  else take_submit(t);
}

static void on_timer(uv_timer_t *h) {
  api_queues_t *q = h->data;
  q->armed = 0;
  uint64_t now = uv_now(q->app->loop);
  take_t *t = q->head;
  while (t) {
    take_t *next = t->next;
    if (t->wake_at <= now) wake(q, t); /* may reply, never touches other takers */
    t = next;
  }
  rearm(q);
}

static void rearm(api_queues_t *q) {
  uint64_t first = 0;
  for (take_t *t = q->head; t; t = t->next)
    if (!first || t->wake_at < first) first = t->wake_at;
  if (first == q->armed) return;
  q->armed = first;
  if (!first) {
    uv_timer_stop(&q->timer);
    return;
  }
  uint64_t now = uv_now(q->app->loop);
  uv_timer_start(&q->timer, on_timer, first > now ? first - now : 0, 0);
}

/* Something in queue `name` may have become takeable: up to n of its
 * parked takers (oldest first; SIZE_MAX: all) take again. */
static void wake_queue(app_t *app, const char *name, size_t n) {
  api_queues_t *q = app->queues;
  if (!q || !n) return;
  take_t *t = q->head;
  int any = 0;
  while (t && n) {
    take_t *next = t->next;
    if (!strcmp(qname(t->c), name)) {
      wake(q, t);
      any = 1;
      n--;
    }
    t = next;
  }
  if (any) rearm(q);
}

void api_queues_wake_all(app_t *app) {
  api_queues_t *q = app->queues;
  if (!q || !q->head) return;
  take_t *t = q->head;
  while (t) {
    take_t *next = t->next;
    if (!t->busy) wake(q, t);
    t = next;
  }
  rearm(q);
}

static int queues_init(app_t *app) {
  if (app->queues) return 0;
  api_queues_t *q = calloc(1, sizeof(*q));
  if (!q) return -ENOMEM;
  q->app = app;
  uv_timer_init(app->loop, &q->timer);
  q->timer.data = q;
  app->queues = q;
  return 0;
}

void api_queues_stop(app_t *app) {
  api_queues_t *q = app->queues;
  if (!q) return;
  app->queues = NULL; /* takes in flight answer when they land */
  while (q->head) {
    take_t *t = q->head;
    unpark(q, t);
    take_reply(t);
  }
  uv_timer_stop(&q->timer);
  uv_close((uv_handle_t *)&q->timer, timer_closed);
}

void op_queues_take(op_call_t *c) {
  if (bad_name(c)) return;
  long long max = op_int(c, "max", 1);
  if (max < 1) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "max"), "'max' must be at least 1");
    return;
  }
  if (max > QUEUE_BATCH_MAX) {
    op_fail(c, SPD_ETOOBIG, json_pack("{s:s,s:i}", "field", "max", "limit", QUEUE_BATCH_MAX),
            "a take returns at most %d elements ('max' is %lld)", QUEUE_BATCH_MAX, max);
    return;
  }
  double vis = 0, wait = 0;
  const json_t *v;
  if ((v = op_json(c, "visibility")) && seconds_of(c, v, "visibility", 1, &vis)) return;
  if ((v = op_json(c, "wait")) && seconds_of(c, v, "wait", 0, &wait)) return;
  if (wait > WAIT_MAX_S) wait = WAIT_MAX_S;
  const json_t *acks = op_json(c, "ack");
  if (acks && !json_is_null(acks) && !json_is_array(acks)) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "ack"),
            "'ack' must be an array of leases (\"<id>.<token>\" strings, as take returns them)");
    return;
  }
  size_t nacks = json_is_array(acks) ? json_array_size(acks) : 0;
  if (nacks > QUEUE_BATCH_MAX) {
    op_fail(c, SPD_ETOOBIG, json_pack("{s:s,s:i}", "field", "ack", "limit", QUEUE_BATCH_MAX),
            "at most %d leases at once (this has %zu)", QUEUE_BATCH_MAX, nacks);
    return;
  }
  take_t *t = calloc(1, sizeof(*t));
  if (!t || (nacks && !(t->acks = calloc(nacks, sizeof(*t->acks))))) {
    free(t);
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  c->priv = t;
  c->priv_free = take_free;
  t->nacks = nacks;
  t->has_ack = json_is_array(acks);
  for (size_t i = 0; i < nacks; i++) {
    const json_t *l = json_array_get(acks, i);
    if (!json_is_string(l) || parse_lease(json_string_value(l), &t->acks[i].id,
                                          &t->acks[i].token)) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:i}", "field", "ack", "index", (int)i),
              "ack[%zu]: a lease is a string \"<id>.<token>\", as take returns it", i);
      return;
    }
  }
  t->c = c;
  t->max = (size_t)max;
  t->visibility_ms = secs_ms(vis);
  if (t->visibility_ms == 0 && vis > 0) t->visibility_ms = 1;
  if (wait > 0 && !c->app->stopping && !queues_init(c->app))
    t->deadline = uv_now(c->app->loop) + (uint64_t)secs_ms(wait);
  take_submit(t);
}

/* ---- put ---- */

typedef struct put {
  queue_put_t *items;
  size_t n;
} put_t;

static void put_free(void *p) {
  put_t *pt = p;
  free(pt->items);
  free(pt);
}

static const char *const put_fields[] = {"element", "priority", "delay", "due", "key", "policy",
                                         NULL};

/* Fills one put from entry e (a string or an object) over the defaults in
 * d (the request's top-level fields). 1 after failing the call. */
static int put_entry(op_call_t *c, const json_t *e, long idx, const queue_put_t *d,
                     int64_t now, queue_put_t *out) {
  char where[48] = "";
  if (idx >= 0) snprintf(where, sizeof(where), "elements[%ld]: ", idx);
  json_t *details = idx >= 0 ? json_pack("{s:s,s:i}", "field", "elements", "index", (int)idx)
                             : json_pack("{s:s}", "field", "element");
  *out = *d;
  const json_t *el = e, *v;
  if (json_is_object(e)) {
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)e, k, x) {
      int known = 0;
      for (int i = 0; put_fields[i] && !known; i++) known = !strcmp(k, put_fields[i]);
      if (!known) {
        op_fail(c, SPD_EBADPARAM, details,
                "%sunknown field '%s' (an element is a string or {\"element\", \"priority\", "
                "\"delay\" or \"due\", \"key\", \"policy\"})",
                where, k);
        return 1;
      }
    }
    el = json_object_get(e, "element");
    if (!el) {
      op_fail(c, SPD_EMISSING, details, "%s'element' is required", where);
      return 1;
    }
    if ((v = json_object_get(e, "priority")) && !json_is_null(v)) {
      if (!json_is_integer(v) || json_integer_value(v) < INT_MIN ||
          json_integer_value(v) > INT_MAX) {
        op_fail(c, SPD_EBADPARAM, details, "%s'priority' must be an integer (32 bits)", where);
        return 1;
      }
      out->priority = (int)json_integer_value(v);
    }
    const json_t *delay = json_object_get(e, "delay"), *due = json_object_get(e, "due");
    if (delay && json_is_null(delay)) delay = NULL;
    if (due && json_is_null(due)) due = NULL;
    if (delay && due) {
      op_fail(c, SPD_EBADPARAM, details, "%sgive 'delay' or 'due', not both", where);
      return 1;
    }
    if (delay) {
      double d2 = json_is_number(delay) ? json_number_value(delay) : NAN;
      if (!isfinite(d2) || d2 < 0 || d2 > SECONDS_MAX) {
        op_fail(c, SPD_EBADPARAM, details, "%s'delay' must be a number of seconds >= 0", where);
        return 1;
      }
      out->due_ms = now + secs_ms(d2);
    }
    if (due) {
      char why[200] = "";
      int64_t ms = 0;
      if (!json_is_string(due) || cron_parse_iso(json_string_value(due), NULL, &ms, why,
                                                  sizeof(why))) {
        op_fail(c, SPD_EBADPARAM, details, "%s'due' must be an ISO 8601 time%s%s", where,
                why[0] ? ": " : "", why);
        return 1;
      }
      out->due_ms = ms;
    }
    if ((v = json_object_get(e, "key")) && !json_is_null(v)) {
      if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
          json_string_length(v) > QUEUE_KEY_MAX) {
        op_fail(c, SPD_EBADPARAM, details,
                "%s'key' must be a string of at most %d bytes, without NUL", where,
                QUEUE_KEY_MAX);
        return 1;
      }
      out->key = json_string_value(v);
    }
    if ((v = json_object_get(e, "policy")) && !json_is_null(v)) {
      if (!json_is_string(v) || queue_policy_parse(json_string_value(v), &out->policy)) {
        op_fail(c, SPD_EBADPARAM, details,
                "%s'policy' must be overwrite, keep-earliest or keep-existing", where);
        return 1;
      }
    }
  }
  if (!json_is_string(el)) {
    op_fail(c, SPD_EBADPARAM, details,
            "%san element must be a string (or an object with an 'element' string)", where);
    return 1;
  }
  if (json_string_length(el) > QUEUE_ELEMENT_MAX) {
    op_fail(c, SPD_EBADPARAM, details, "%san element is at most %d bytes (this one is %zu)", where,
            QUEUE_ELEMENT_MAX, json_string_length(el));
    return 1;
  }
  json_decref(details);
  out->element = json_string_value(el);
  out->len = json_string_length(el);
  return 0;
}

static int put_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  put_t *pt = c->priv;
  return store_queue_put(s, qname(c), pt->items, pt->n, clock_wall_ms());
}

static void put_done(void *arg, int rc) {
  op_call_t *c = arg;
  put_t *pt = c->priv;
  if (rc) {
    if (rc == -ENOENT) rc = SPD_ESTORE; /* put creates its queue */
    fail_store(c, rc);
    return;
  }
  int64_t n[4] = {0};
  json_t *ids = json_array();
  for (size_t i = 0; i < pt->n; i++) {
    if ((unsigned)pt->items[i].result < 4) n[pt->items[i].result]++;
    json_array_append_new(ids, json_integer(pt->items[i].id));
  }
  wake_queue(c->app, qname(c), (size_t)(n[QPUT_ADDED] + n[QPUT_MOVED]));
  op_ok(c, json_pack("{s:I,s:I,s:I,s:I,s:o}", "added", (json_int_t)n[QPUT_ADDED], "moved",
                     (json_int_t)n[QPUT_MOVED], "kept", (json_int_t)n[QPUT_KEPT], "deferred",
                     (json_int_t)n[QPUT_DEFERRED], "ids", ids));
}

void op_queues_put(op_call_t *c) {
  if (bad_name(c)) return;
  const json_t *elements = op_json(c, "elements"), *element = op_json(c, "element");
  if (elements && element) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "element"),
            "give 'elements' (a list) or 'element' (one), not both");
    return;
  }
  if (!elements && !element) {
    op_fail(c, SPD_EMISSING, json_pack("{s:s}", "field", "elements"),
            "'elements' is required (a list of elements to put)");
    return;
  }
  if (elements && !json_is_array(elements)) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "elements"),
            "'elements' must be an array of elements (strings or objects)");
    return;
  }
  size_t n = elements ? json_array_size(elements) : 1;
  if (n > QUEUE_BATCH_MAX) {
    op_fail(c, SPD_ETOOBIG, json_pack("{s:s,s:i}", "field", "elements", "limit", QUEUE_BATCH_MAX),
            "a put takes at most %d elements (this one has %zu)", QUEUE_BATCH_MAX, n);
    return;
  }
  /* The top-level fields are the defaults of every element; with one
   * 'element' they are its own. */
  int64_t now = clock_wall_ms();
  queue_put_t d = {.due_ms = now, .policy = QPOLICY_OVERWRITE};
  json_t *top = json_object();
  for (int i = 1; put_fields[i]; i++) {
    const json_t *v = op_json(c, put_fields[i]);
    if (v) json_object_set(top, put_fields[i], (json_t *)v);
  }
  json_object_set_new(top, "element", json_string(""));
  queue_put_t base;
  int bad = put_entry(c, top, -1, &d, now, &base);
  json_decref(top);
  if (bad) return;
  put_t *pt = calloc(1, sizeof(*pt));
  if (pt && n) pt->items = calloc(n, sizeof(*pt->items));
  if (!pt || (n && !pt->items)) {
    free(pt);
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  c->priv = pt;
  c->priv_free = put_free;
  pt->n = n;
  for (size_t i = 0; i < n; i++) {
    const json_t *e = elements ? json_array_get(elements, i) : element;
    if (!elements) { /* {"element": ..., "priority": ...}: all in the top level */
      if (put_entry(c, e, -1, &base, now, &pt->items[i])) return;
    } else if (put_entry(c, e, (long)i, &base, now, &pt->items[i])) {
      return;
    }
  }
  if (n == 0) {
    op_ok(c, json_pack("{s:i,s:i,s:i,s:i,s:[]}", "added", 0, "moved", 0, "kept", 0, "deferred", 0,
                       "ids"));
    return;
  }
  op_store(c, STORE_WRITE, put_fn, put_done);
}

/* ---- ack, nack, extend ---- */

enum { LEASE_ACK, LEASE_NACK, LEASE_EXTEND };

typedef struct leases {
  queue_lease_t *v;
  size_t n;
  int kind;
  int64_t visibility_ms;
} leases_t;

static void leases_free(void *p) {
  leases_t *l = p;
  free(l->v);
  free(l);
}

/* "<id>.<token>" as take renders it. */
static int parse_lease(const char *s, int64_t *id, int64_t *token) {
  size_t n = strspn(s, "0123456789");
  if (n == 0 || n > 18 || s[n] != '.') return -EINVAL;
  const char *t = s + n + 1;
  size_t neg = *t == '-', m = strspn(t + neg, "0123456789");
  if (m == 0 || m > 19 || t[neg + m]) return -EINVAL;
  errno = 0;
  long long tok = strtoll(t, NULL, 10);
  if (errno) return -EINVAL;
  *id = strtoll(s, NULL, 10);
  *token = tok;
  return *id > 0 ? 0 : -EINVAL;
}

static int lease_entry(op_call_t *c, leases_t *l, const json_t *e, size_t idx,
                       queue_lease_t *out) {
  json_t *details = json_pack("{s:s,s:i}", "field", "leases", "index", (int)idx);
  const json_t *ls = e, *v;
  double d;
  if (json_is_object(e)) {
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)e, k, x) {
      int ok = !strcmp(k, "lease") ||
               (l->kind == LEASE_NACK && (!strcmp(k, "delay") || !strcmp(k, "retry_after") ||
                                          !strcmp(k, "error") || !strcmp(k, "release")));
      if (!ok) {
        op_fail(c, SPD_EBADPARAM, details, "leases[%zu]: unknown field '%s' (%s)", idx, k,
                l->kind == LEASE_NACK ? "expected lease, delay, retry_after, error, release"
                                      : "a lease here is its string, or {\"lease\": ...}");
        return 1;
      }
    }
    ls = json_object_get(e, "lease");
    if ((v = json_object_get(e, "delay")) && !json_is_null(v)) {
      d = json_is_number(v) ? json_number_value(v) : NAN;
      if (!isfinite(d) || d < 0 || d > SECONDS_MAX) {
        op_fail(c, SPD_EBADPARAM, details, "leases[%zu]: 'delay' must be a number of seconds >= 0",
                idx);
        return 1;
      }
      out->delay_ms = secs_ms(d);
    }
    if ((v = json_object_get(e, "retry_after")) && !json_is_null(v)) {
      d = json_is_number(v) ? json_number_value(v) : NAN;
      if (!isfinite(d) || d < 0 || d > SECONDS_MAX) {
        op_fail(c, SPD_EBADPARAM, details,
                "leases[%zu]: 'retry_after' must be a number of seconds >= 0", idx);
        return 1;
      }
      out->retry_after_ms = secs_ms(d);
    }
    if ((v = json_object_get(e, "release")) && !json_is_null(v)) {
      if (!json_is_boolean(v)) {
        op_fail(c, SPD_EBADPARAM, details, "leases[%zu]: 'release' must be true or false", idx);
        return 1;
      }
      out->release = json_is_true(v);
    }
    if ((v = json_object_get(e, "error")) && !json_is_null(v)) {
      if (!json_is_string(v)) {
        op_fail(c, SPD_EBADPARAM, details, "leases[%zu]: 'error' must be a string", idx);
        return 1;
      }
      out->error = json_string_value(v);
    }
  }
  if (!json_is_string(ls) || parse_lease(json_string_value(ls), &out->id, &out->token)) {
    if (json_is_string(ls))
      op_fail(c, SPD_EBADPARAM, details,
              "leases[%zu]: '%.64s' is not a lease (\"<id>.<token>\", as take returns it)", idx,
              json_string_value(ls));
    else
      op_fail(c, SPD_EBADPARAM, details, "leases[%zu]: a lease is a string \"<id>.<token>\"%s",
              idx, l->kind == LEASE_NACK ? " or {\"lease\", \"delay\", \"retry_after\", \"error\"}"
                                         : "");
    return 1;
  }
  json_decref(details);
  return 0;
}

static int lease_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  leases_t *l = c->priv;
  int64_t now = clock_wall_ms();
  switch (l->kind) {
  case LEASE_ACK: return store_queue_ack(s, qname(c), l->v, l->n, now);
  case LEASE_NACK: return store_queue_nack(s, qname(c), l->v, l->n, now);
  default: return store_queue_extend(s, qname(c), l->v, l->n, l->visibility_ms, now);
  }
}

static void lease_done(void *arg, int rc) {
  op_call_t *c = arg;
  leases_t *l = c->priv;
  if (rc) {
    fail_store(c, rc);
    return;
  }
  json_t *stale = json_array();
  json_int_t good = 0, dead = 0;
  for (size_t i = 0; i < l->n; i++) {
    if (l->v[i].result) {
      char s[48];
      lease_str(l->v[i].id, l->v[i].token, s);
      json_array_append_new(stale, json_string(s));
    } else {
      good++;
      dead += l->v[i].dead != 0;
    }
  }
  if (l->kind == LEASE_ACK) {
    /* An ack frees an in-flight slot (and may make a deferred put due). */
    if (good) wake_queue(c->app, qname(c), 1);
    op_ok(c, json_pack("{s:I,s:o}", "acked", good, "stale", stale));
  } else if (l->kind == LEASE_NACK) {
    wake_queue(c->app, qname(c), (size_t)(good - dead));
    op_ok(c, json_pack("{s:I,s:I,s:o}", "nacked", good - dead, "dead", dead, "stale", stale));
  } else {
    op_ok(c, json_pack("{s:I,s:o}", "extended", good, "stale", stale));
  }
}

void op_queues_ack(op_call_t *c) {
  if (bad_name(c)) return;
  const char *op = c->def->name;
  int kind = !strcmp(op, "queues.nack") ? LEASE_NACK
           : !strcmp(op, "queues.extend") ? LEASE_EXTEND : LEASE_ACK;
  const json_t *arr = op_json(c, "leases");
  if (!json_is_array(arr)) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "leases"),
            "'leases' must be an array of leases (\"<id>.<token>\" strings, as take returns "
            "them)");
    return;
  }
  size_t n = json_array_size(arr);
  if (n > QUEUE_BATCH_MAX) {
    op_fail(c, SPD_ETOOBIG, json_pack("{s:s,s:i}", "field", "leases", "limit", QUEUE_BATCH_MAX),
            "at most %d leases at once (this has %zu)", QUEUE_BATCH_MAX, n);
    return;
  }
  double delay = -1, retry_after = 0, vis = 0;
  const json_t *v;
  if ((v = op_json(c, "delay")) && seconds_of(c, v, "delay", 0, &delay)) return;
  if ((v = op_json(c, "retry_after")) && seconds_of(c, v, "retry_after", 0, &retry_after)) return;
  if ((v = op_json(c, "visibility")) && seconds_of(c, v, "visibility", 1, &vis)) return;
  int release = 0;
  if ((v = op_json(c, "release")) && !json_is_null(v)) {
    if (!json_is_boolean(v)) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "release"),
              "'release' must be true or false");
      return;
    }
    release = json_is_true(v);
  }
  leases_t *l = calloc(1, sizeof(*l));
  if (l && n) l->v = calloc(n, sizeof(*l->v));
  if (!l || (n && !l->v)) {
    free(l);
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  c->priv = l;
  c->priv_free = leases_free;
  l->n = n;
  l->kind = kind;
  l->visibility_ms = vis > 0 && secs_ms(vis) == 0 ? 1 : secs_ms(vis);
  for (size_t i = 0; i < n; i++) {
    queue_lease_t *q = &l->v[i];
    q->delay_ms = delay < 0 ? -1 : secs_ms(delay);
    q->retry_after_ms = secs_ms(retry_after);
    q->error = op_str(c, "error");
    q->release = release;
    if (lease_entry(c, l, json_array_get(arr, i), i, q)) return;
  }
  if (n == 0) {
    json_t *r = kind == LEASE_ACK ? json_pack("{s:i,s:[]}", "acked", 0, "stale")
              : kind == LEASE_NACK ? json_pack("{s:i,s:i,s:[]}", "nacked", 0, "dead", 0, "stale")
                                   : json_pack("{s:i,s:[]}", "extended", 0, "stale");
    op_ok(c, r);
    return;
  }
  op_store(c, STORE_WRITE, lease_fn, lease_done);
}

/* ---- queues and their settings ---- */

/* c->num[6]: takers of the queue to wake after success (-1: all). */
static void queue_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    fail_store(c, rc);
    return;
  }
  if (c->num[6]) wake_queue(c->app, qname(c), c->num[6] < 0 ? SIZE_MAX : (size_t)c->num[6]);
  op_ok_result(c);
}

static int get_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  queue_conf_t q;
  memset(&q, 0, sizeof(q));
  int rc = store_queue_get(s, qname(c), &q);
  if (!rc) rc = render_from_store(s, c, &q);
  queue_conf_release(&q);
  return rc;
}

void op_queues_get(op_call_t *c) {
  if (!bad_name(c)) op_store(c, STORE_READ, get_fn, queue_done);
}

static int list_one(void *arg, const queue_conf_t *q, const queue_stats_t *st) {
  op_call_t *c = arg;
  char why[8];
  if (!principal_queue_ok(c->who->projects, q->name) ||
      auth_job_queue(c->app, c->who, q->name, why, sizeof(why)))
    return 0;
  return json_array_append_new(c->result, render_queue(q, st)) ? -ENOMEM : 0;
}

static int list_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  json_t *arr = c->result = json_array();
  int rc = store_queues_each(s, clock_wall_ms(), list_one, c);
  c->result = json_pack("{s:o}", "queues", arr);
  return rc;
}

void op_queues_list(op_call_t *c) { op_store(c, STORE_READ, list_fn, queue_done); }

/* The settings params give, checked, into *set; 1 after failing the call. */
static int parse_settings(op_call_t *c, queues_settings_t *set) {
  const json_t *v;
  double d;
  queue_conf_t *q = &set->v;
#define SECS(field, member, positive, bit)                                   \
  if ((v = op_json(c, field))) {                                             \
    if (seconds_of(c, v, field, positive, &d)) return 1;                     \
    q->member = secs_ms(d) ? secs_ms(d) : (d > 0 ? 1 : 0);                   \
    set->given |= bit;                                                       \
  }
  SECS("visibility", visibility_ms, 1, QUEUES_VISIBILITY);
  SECS("backoff", backoff_ms, 0, QUEUES_BACKOFF);
  SECS("backoff_max", backoff_max_ms, 0, QUEUES_BACKOFF_MAX);
#undef SECS
#define FLAG(field, member, bit, value)                                      \
  if ((v = op_json(c, field))) {                                             \
    q->member = value;                                                       \
    set->given |= bit;                                                       \
  }
  FLAG("paused", paused, QUEUES_PAUSED, json_is_true(v));
  FLAG("keep_done", keep_done, QUEUES_KEEP_DONE, json_is_true(v));
  FLAG("max_deliveries", max_deliveries, QUEUES_MAX_DELIVERIES, (int)json_integer_value(v));
  FLAG("max_inflight", max_inflight, QUEUES_MAX_INFLIGHT, (int)json_integer_value(v));
  FLAG("key_inflight", key_inflight, QUEUES_KEY_INFLIGHT, (int)json_integer_value(v));
#undef FLAG
  const char *s = op_str(c, "key_mode");
  if (s && queue_key_mode_parse(s, &q->key_mode)) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "key_mode"),
            "'key_mode' must be none or host, not '%.64s'", s);
    return 1;
  }
  if (s) set->given |= QUEUES_KEY_MODE;
  if ((v = op_json(c, "key_rate"))) {
    d = json_number_value(v);
    if (d < 0 || d > 1e9) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "key_rate"),
              "'key_rate' must be a number of takes per second >= 0 (0: no limit)");
      return 1;
    }
    q->key_rate = d;
    set->given |= QUEUES_KEY_RATE;
  }
  if ((v = op_json(c, "key_burst"))) {
    d = json_number_value(v);
    if (d < 0 || d > 1e9) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "key_burst"),
              "'key_burst' must be a number >= 0");
      return 1;
    }
    q->key_burst = d;
    set->given |= QUEUES_KEY_BURST;
  }
  return 0;
}

/* c->priv: the queues_settings_t parsed. */
static int set_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  queue_conf_t q;
  int rc = queues_set(s, qname(c), c->priv, &q);
  if (rc) return rc;
  rc = render_from_store(s, c, &q);
  queue_conf_release(&q);
  return rc;
}

void op_queues_set(op_call_t *c) {
  if (bad_name(c)) return;
  queues_settings_t *set = calloc(1, sizeof(*set));
  if (!set) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  c->priv = set;
  c->priv_free = free;
  if (parse_settings(c, set)) return;
  c->num[6] = -1; /* new limits may let more through */
  op_store(c, STORE_WRITE, set_fn, queue_done);
}

/* pause and resume change an existing queue only. */
static int pause_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  queue_conf_t q;
  int rc = queues_pause(s, qname(c), !strcmp(c->def->name, "queues.pause"), &q);
  if (rc) return rc;
  rc = render_from_store(s, c, &q);
  queue_conf_release(&q);
  return rc;
}

void op_queues_pause(op_call_t *c) {
  if (bad_name(c)) return;
  c->num[6] = strcmp(c->def->name, "queues.resume") ? 0 : -1;
  op_store(c, STORE_WRITE, pause_fn, queue_done);
}

static int delete_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  int rc = queues_delete(s, qname(c));
  if (!rc) c->result = json_pack("{s:b}", "deleted", 1);
  return rc;
}

void op_queues_delete(op_call_t *c) {
  if (!bad_name(c)) op_store(c, STORE_WRITE, delete_fn, queue_done);
}

/* ---- listing, requeue, purge ---- */

typedef struct filter {
  queue_filter_t f;
  int64_t *ids;
} filter_t;

static void filter_free(void *p) {
  filter_t *f = p;
  free(f->ids);
  free(f);
}

/* Reads state, key, prefix and ids into a filter (c->priv). 1 after
 * failing the call. */
static int read_filter(op_call_t *c, unsigned dflt_states) {
  filter_t *f = calloc(1, sizeof(*f));
  if (!f) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return 1;
  }
  c->priv = f;
  c->priv_free = filter_free;
  f->f.states = dflt_states;
  const json_t *v = op_json(c, "state");
  if (v) {
    size_t i;
    json_t *x;
    f->f.states = 0;
    json_array_foreach(v, i, x) {
      queue_state_t st;
      if (queue_state_parse(json_string_value(x), &st)) {
        op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "state"),
                "unknown state '%.64s' (expected waiting, inflight, dead or done)",
                json_string_value(x));
        return 1;
      }
      f->f.states |= 1u << st;
    }
  }
  f->f.key = op_str(c, "key");
  f->f.prefix = op_str(c, "prefix");
  if ((v = op_json(c, "ids"))) {
    if (!json_is_array(v)) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "ids"),
              "'ids' must be an array of element ids");
      return 1;
    }
    size_t n = json_array_size(v);
    if (n > QUEUE_BATCH_MAX) {
      op_fail(c, SPD_ETOOBIG, json_pack("{s:s,s:i}", "field", "ids", "limit", QUEUE_BATCH_MAX),
              "at most %d ids at once (this has %zu)", QUEUE_BATCH_MAX, n);
      return 1;
    }
    f->ids = calloc(n ? n : 1, sizeof(*f->ids));
    if (!f->ids) {
      op_fail(c, -ENOMEM, NULL, "out of memory");
      return 1;
    }
    for (size_t i = 0; i < n; i++) {
      const json_t *x = json_array_get(v, i);
      if (!json_is_integer(x) || json_integer_value(x) < 1) {
        op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:i}", "field", "ids", "index", (int)i),
                "ids[%zu]: an element id is an integer >= 1", i);
        return 1;
      }
      f->ids[i] = json_integer_value(x);
    }
    f->f.ids = f->ids;
    f->f.nids = n;
  }
  return 0;
}

static uint32_t items_fingerprint(const op_call_t *c, unsigned states) {
  uint32_t h = 2166136261u ^ states;
  const char *parts[] = {qname(c), op_str(c, "key"), op_str(c, "prefix")};
  for (int i = 0; i < 3; i++) {
    h = (h ^ (unsigned char)(parts[i] ? 1 : 0)) * 16777619u;
    for (const char *p = parts[i]; p && *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    h = (h ^ 0xff) * 16777619u;
  }
  return h;
}

static int items_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  filter_t *f = c->priv;
  queue_item_list_t l = {0};
  size_t limit = f->f.limit;
  f->f.limit = limit + 1;
  /* An unknown queue is a 404, not an empty page. */
  queue_conf_t q;
  memset(&q, 0, sizeof(q));
  int rc = store_queue_get(s, qname(c), &q);
  queue_conf_release(&q);
  if (!rc) rc = store_queue_items(s, qname(c), &f->f, &l);
  if (!rc) {
    json_t *next = json_null();
    if (l.n > limit) {
      char cur[24];
      op_cursor_encode(l.v[limit - 1].id, items_fingerprint(c, f->f.states), cur);
      next = json_string(cur);
    }
    c->result = json_pack("{s:o,s:o}", "items", render_items(&l, limit), "next_cursor", next);
  }
  queue_item_list_release(&l);
  return rc;
}

void op_queues_items(op_call_t *c) {
  if (bad_name(c) || read_filter(c, 0)) return;
  filter_t *f = c->priv;
  f->f.limit = (size_t)op_int(c, "limit", ITEMS_PAGE_DEFAULT);
  const char *cursor = op_str(c, "cursor");
  uint32_t fp = 0;
  if (cursor && (op_cursor_decode(cursor, &f->f.after_id, &fp) ||
                 fp != items_fingerprint(c, f->f.states))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "cursor"),
            "'cursor' is not a cursor of this listing");
    return;
  }
  op_store(c, STORE_READ, items_fn, queue_done);
}

/* c->num[0]: the due time of requeued elements. */
static int requeue_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  filter_t *f = c->priv;
  int64_t count = 0, now = clock_wall_ms();
  int purge = !strcmp(c->def->name, "queues.purge");
  int rc = purge ? queues_purge(s, qname(c), &f->f, now, &count)
                 : queues_requeue(s, qname(c), &f->f, now + c->num[0], now, &count);
  if (!rc) c->result = json_pack("{s:I}", purge ? "purged" : "requeued", (json_int_t)count);
  if (!rc && !purge) c->num[6] = count;
  return rc;
}

void op_queues_requeue(op_call_t *c) {
  int purge = !strcmp(c->def->name, "queues.purge");
  if (bad_name(c) || read_filter(c, purge ? 0 : 1u << QSTATE_DEAD)) return;
  double delay = 0;
  const json_t *v = op_json(c, "delay");
  if (v && seconds_of(c, v, "delay", 0, &delay)) return;
  c->num[0] = secs_ms(delay);
  op_store(c, STORE_WRITE, requeue_fn, queue_done);
}

/* ---- keys: each politeness key's state ---- */

#define KEYS_PAGE_DEFAULT 100

static int keys_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  queue_key_list_t l = {0};
  size_t limit = (size_t)op_int(c, "limit", KEYS_PAGE_DEFAULT);
  int64_t now = clock_wall_ms();
  int rc = store_queue_keys(s, qname(c), op_str(c, "cursor"), limit + 1, now, &l);
  if (rc) {
    queue_key_list_release(&l);
    return rc;
  }
  json_t *arr = json_array();
  for (size_t i = 0; i < l.n && i < limit; i++) {
    const queue_key_info_t *k = &l.v[i];
    json_t *o = json_object();
    json_object_set_new(o, "key", json_string(k->key));
    json_object_set_new(o, "ready", json_integer(k->ready));
    json_object_set_new(o, "inflight", json_integer(k->inflight));
    json_object_set_new(o, "tokens", k->tokens < 0 ? json_null() : json_real(k->tokens));
    json_object_set_new(o, "blocked_until", op_iso_time(k->blocked_until_ms));
    json_object_set_new(o, "blocked_until_ms",
                        k->blocked_until_ms ? json_integer(k->blocked_until_ms) : json_null());
    json_object_set_new(o, "open", json_boolean(k->open));
    json_object_set_new(o, "wake_at", op_iso_time(k->wake_ms));
    json_object_set_new(o, "wake_ms", k->wake_ms ? json_integer(k->wake_ms) : json_null());
    json_array_append_new(arr, o);
  }
  /* The cursor is the page's last key: keys are listed in byte order. */
  json_t *next = l.n > limit ? json_string(l.v[limit - 1].key) : json_null();
  c->result = json_pack("{s:s,s:I,s:o,s:o}", "queue", qname(c), "at", (json_int_t)now, "keys",
                        arr, "next_cursor", next);
  queue_key_list_release(&l);
  return 0;
}

void op_queues_keys(op_call_t *c) {
  const char *cursor = op_str(c, "cursor");
  if (bad_name(c)) return;
  if (cursor && strlen(cursor) > QUEUE_KEY_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "cursor"),
            "'cursor' is not a cursor this API handed out (a key of at most %d bytes)",
            QUEUE_KEY_MAX);
    return;
  }
  op_store(c, STORE_READ, keys_fn, queue_done);
}
