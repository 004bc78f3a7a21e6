/* The Redis backend's task queues (store.h, core/queue.h, docs/queues.md),
 * each op one Lua script (store/redis/internal.h), with SQLite's semantics
 * (sqlite/queue.c): the same states, politeness keys, counters and orders.
 *
 * Keys under the prefix P, for queue NAME (Q = P "q:NAME:"):
 *   queues          zset (all scores 0) of queue names, by name
 *   queues:seq      queue ids; qi:seq: element ids (never reused)
 *   q:NAME          hash: the settings (queue_conf_t's names), the counters,
 *                   lease_seq
 *   Q el            hash element bytes -> id (uniqueness)
 *   Q i:ID          hash per element: id, state (0 waiting not yet due,
 *                   4 waiting and due, 1 in flight, 2 dead, 3 done),
 *                   priority, due_ms (in flight: the lease end), key,
 *                   deliveries, token, created_ms, error, element, and
 *                   redue_ms / redue_pri (a due time a put deferred)
 *   Q all           zset id -> id (listings, id order)
 *   Q delayed       zset due_ms -> id of state 0
 *   Q inflight      zset lease end -> id of state 1
 *   Q ready         zset due_ms -> id of state 4 (oldest due)
 *   Q r:KEY         lex zset of KEY's state-4 elements: fixed-width
 *                   (priority DESC, due ASC, id ASC), the take order
 *   Q k:KEY, kset   a key's politeness state (in flight, token bucket,
 *                   Retry-After block) and the set of keys holding one;
 *                   a key that holds nothing worth remembering is deleted
 *                   whenever an op settles it (as SQLite's queue_keys)
 *
 * Take walks every key holding state (to settle it and find the open ones),
 * so its cost grows with the number of politeness keys, not elements.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "store/queue_engine.h"
#include "store/redis/internal.h"

/* ---- conversions ---- */

#define CF(name, type) {#name, type, offsetof(queue_conf_t, name)}
static const struct redis_field conf_fields[] = {
    CF(id, RF_I64),           CF(name, RF_STR),           CF(created_ms, RF_I64),
    CF(paused, RF_INT),       CF(keep_done, RF_INT),      CF(visibility_ms, RF_I64),
    CF(max_deliveries, RF_INT), CF(backoff_ms, RF_I64),   CF(backoff_max_ms, RF_I64),
    CF(max_inflight, RF_INT), CF(key_mode, RF_INT),       CF(key_inflight, RF_INT),
    CF(key_rate, RF_DBL),     CF(key_burst, RF_DBL),      CF(n_waiting, RF_I64),
    CF(n_inflight, RF_I64),   CF(n_dead, RF_I64),         CF(n_done, RF_I64),
    CF(n_put, RF_I64),        CF(n_acked, RF_I64),
};
#undef CF

static int row_conf(const redisReply *r, queue_conf_t *c) {
  int rc = redis_decode(r, conf_fields, sizeof(conf_fields) / sizeof(conf_fields[0]), c);
  if (rc) queue_conf_release(c);
  return rc;
}

#define IF(name, type) {#name, type, offsetof(queue_item_t, name)}
static const struct redis_field item_fields[] = {
    IF(id, RF_I64),         IF(state, RF_INT),   IF(priority, RF_INT), IF(due_ms, RF_I64),
    IF(key, RF_STR),        IF(deliveries, RF_INT), IF(token, RF_I64), IF(created_ms, RF_I64),
    IF(error, RF_STR),
};
#undef IF

/* Appends the item rows of array r to out (all or nothing). */
static int rows_items(const redisReply *r, queue_item_list_t *out) {
  size_t first = out->n;
  int rc = 0;
  if (!r || r->type != REDIS_REPLY_ARRAY) return SPD_ESTORE;
  for (size_t i = 0; !rc && i < r->elements; i++) {
    queue_item_t *it = queue_item_list_add(out);
    if (!it) {
      rc = -ENOMEM;
      break;
    }
    rc = redis_decode(r->element[i], item_fields, sizeof(item_fields) / sizeof(item_fields[0]),
                      it);
    const redisReply *el = rr_field(r->element[i], "element");
    if (!rc) {
      size_t len = el && el->type == REDIS_REPLY_STRING ? el->len : 0;
      if (!(it->element = malloc(len + 1))) {
        rc = -ENOMEM;
      } else {
        if (len) memcpy(it->element, el->str, len);
        it->element[len] = '\0';
        it->len = len;
      }
    }
    if (!rc && !it->key && !(it->key = strdup(""))) rc = -ENOMEM;
  }
  if (rc) queue_items_drop(out, first);
  return rc;
}

static void ra_settings(redis_args_t *a, const queue_conf_t *c) {
  ra_i64(a, c->paused ? 1 : 0);
  ra_i64(a, c->keep_done ? 1 : 0);
  ra_i64(a, c->visibility_ms);
  ra_i64(a, c->max_deliveries);
  ra_i64(a, c->backoff_ms);
  ra_i64(a, c->backoff_max_ms);
  ra_i64(a, c->max_inflight);
  ra_i64(a, c->key_mode);
  ra_i64(a, c->key_inflight);
  ra_dbl(a, c->key_rate);
  ra_dbl(a, c->key_burst);
}

static void ra_filter(redis_args_t *a, const queue_filter_t *f) {
  ra_i64(a, f->states);
  ra_i64(a, f->key ? 1 : 0);
  ra_str(a, f->key);
  ra_i64(a, f->prefix ? 1 : 0);
  ra_str(a, f->prefix);
  ra_i64(a, f->after_id);
  ra_i64(a, f->limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)f->limit);
  ra_i64(a, (int64_t)f->nids);
  for (size_t i = 0; i < f->nids; i++) ra_i64(a, f->ids[i]);
}

/* ---- put, take, ack, nack, extend ---- */

int redis_queue_put(store_t *s, const char *name, queue_put_t *items, size_t n,
                    int64_t now_ms) {
  struct redis_store *q = RQ(s);
  redis_args_t a = {0};
  queue_conf_t def = {0};
  char(*hosts)[QUEUE_KEY_MAX + 1] = calloc(n, sizeof(*hosts));
  if (!hosts) return -ENOMEM;
  queue_conf_defaults(&def);
  ra_str(&a, name);
  ra_i64(&a, now_ms);
  ra_settings(&a, &def);
  for (size_t i = 0; i < n; i++) {
    const queue_put_t *p = &items[i];
    if (!p->key)
      queue_key_derive(QKEY_HOST, p->element, p->len, hosts[i], sizeof(hosts[i]));
    ra_bin(&a, p->element, p->len);
    ra_i64(&a, p->key ? 1 : 0);
    ra_str(&a, p->key);
    ra_str(&a, hosts[i]);
    ra_i64(&a, p->due_ms);
    ra_i64(&a, p->priority);
    ra_i64(&a, p->policy);
  }
  redisReply *r = NULL;
  int rc = redis_eval(q, RS_QUEUE_PUT, &a, &r, "queue put");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * n)) rc = SPD_ESTORE;
  if (!rc) {
    int added = 0;
    for (size_t i = 0; i < n; i++) {
      items[i].result = (queue_put_result_t)rr_i64(r->element[2 * i]);
      items[i].id = rr_i64(r->element[2 * i + 1]);
      added |= items[i].result == QPUT_ADDED || items[i].result == QPUT_MOVED;
    }
    if (added) redis_note(q, STORE_NOTE_QUEUES);
  }
  if (r) freeReplyObject(r);
  free(hosts);
  return rc;
}

int redis_queue_take(store_t *s, const char *name, size_t max, int64_t visibility_ms,
                     int64_t now_ms, queue_item_list_t *out, int64_t *next_ms) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_i64(&a, max > 100000 ? 100000 : (int64_t)max);
  ra_i64(&a, visibility_ms);
  ra_i64(&a, now_ms);
  int rc = redis_eval(RQ(s), RS_QUEUE_TAKE, &a, &r, "queue take");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != 2)) rc = SPD_ESTORE;
  if (!rc) {
    rc = rows_items(r->element[1], out);
    if (!rc) *next_ms = rr_i64(r->element[0]);
  }
  if (r) freeReplyObject(r);
  return rc;
}

/* Runs script id on a's arguments and each lease's id and token; a lease's
 * result is the script's answer for it (0 held, else not). */
static int leases_eval(store_t *s, int id, const char *what, redis_args_t *a,
                       queue_lease_t *leases, size_t n) {
  redisReply *r = NULL;
  for (size_t i = 0; i < n; i++) {
    ra_i64(a, leases[i].id);
    ra_i64(a, leases[i].token);
  }
  int rc = redis_eval(RQ(s), id, a, &r, what);
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != n)) rc = SPD_ESTORE;
  for (size_t i = 0; !rc && i < n; i++) leases[i].result = rr_i64(r->element[i]) ? -ENOENT : 0;
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_ack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                    int64_t now_ms) {
  redis_args_t a = {0};
  ra_str(&a, name);
  ra_i64(&a, now_ms);
  return leases_eval(s, RS_QUEUE_ACK, "queue ack", &a, leases, n);
}

int redis_queue_nack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                     int64_t now_ms) {
  struct redis_store *q = RQ(s);
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_i64(&a, now_ms);
  for (size_t i = 0; i < n; i++) {
    ra_i64(&a, leases[i].id);
    ra_i64(&a, leases[i].token);
    ra_i64(&a, leases[i].delay_ms);
    ra_i64(&a, leases[i].retry_after_ms);
    ra_str(&a, leases[i].error);
    ra_i64(&a, leases[i].release ? 1 : 0);
    /* The backoff's jitter comes from the client, so a script stays
     * deterministic. */
    ra_dbl(&a, queue_jitter());
  }
  int rc = redis_eval(q, RS_QUEUE_NACK, &a, &r, "queue nack");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * n)) rc = SPD_ESTORE;
  int back = 0;
  for (size_t i = 0; !rc && i < n; i++) {
    leases[i].result = rr_i64(r->element[2 * i]) ? -ENOENT : 0;
    leases[i].dead = (int)rr_i64(r->element[2 * i + 1]);
    back |= !leases[i].result && !leases[i].dead;
  }
  if (!rc && back) redis_note(q, STORE_NOTE_QUEUES);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_extend(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                       int64_t visibility_ms, int64_t now_ms) {
  redis_args_t a = {0};
  ra_str(&a, name);
  ra_i64(&a, visibility_ms);
  ra_i64(&a, now_ms);
  return leases_eval(s, RS_QUEUE_EXTEND, "queue extend", &a, leases, n);
}

/* ---- settings, listing, stats ---- */

int redis_queue_set(store_t *s, queue_conf_t *c) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, c->name);
  ra_i64(&a, clock_wall_ms());
  ra_settings(&a, c);
  int rc = redis_eval(RQ(s), RS_QUEUE_SET, &a, &r, "queue set");
  if (!rc) {
    queue_conf_t got = {0};
    rc = row_conf(r, &got);
    if (!rc) {
      char *name = c->name;
      free(got.name);
      *c = got;
      c->name = name;
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_get(store_t *s, const char *name, queue_conf_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  int rc = redis_eval(RQ(s), RS_QUEUE_GET, &a, &r, "queue get");
  if (!rc) rc = row_conf(r, out);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queues_list(store_t *s, const char *after, size_t limit, queue_conf_list_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, after);
  ra_i64(&a, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
  int rc = redis_eval(RQ(s), RS_QUEUES_LIST, &a, &r, "queue list");
  for (size_t i = 0; !rc && i < r->elements; i++) {
    queue_conf_t *c = queue_conf_list_add(out);
    if (!c) {
      rc = -ENOMEM;
      break;
    }
    if ((rc = row_conf(r->element[i], c))) out->n--;
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_delete(store_t *s, const char *name) {
  redis_args_t a = {0};
  ra_str(&a, name);
  return redis_eval(RQ(s), RS_QUEUE_DELETE, &a, NULL, "queue delete");
}

int redis_queue_stats(store_t *s, const char *name, int64_t now_ms, queue_stats_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_i64(&a, now_ms);
  int rc = redis_eval(RQ(s), RS_QUEUE_STATS, &a, &r, "queue stats");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != 9)) rc = SPD_ESTORE;
  if (!rc) {
    int64_t v[9];
    for (int i = 0; i < 9; i++) v[i] = rr_i64(r->element[i]);
    queue_conf_t c = {.n_waiting = v[0], .n_inflight = v[1], .n_dead = v[2], .n_done = v[3]};
    queue_stats_fill(out, &c, v[4] + v[5], v[6], v[7]);
    out->keys = v[8];
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_keys(store_t *s, const char *name, const char *after, size_t limit,
                     int64_t now_ms, queue_key_list_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_str(&a, after);
  ra_i64(&a, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
  ra_i64(&a, now_ms);
  int rc = redis_eval(RQ(s), RS_QUEUE_KEYS, &a, &r, "queue keys");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements % 7)) rc = SPD_ESTORE;
  size_t first = out->n;
  for (size_t i = 0; !rc && i < r->elements; i += 7) {
    queue_key_info_t *e = queue_key_list_add(out);
    if (!e || rr_strz(r->element[i], &e->key) || !e->key) {
      rc = -ENOMEM;
      break;
    }
    e->ready = rr_i64(r->element[i + 1]);
    e->inflight = rr_i64(r->element[i + 2]);
    e->tokens = rr_dbl(r->element[i + 3]);
    e->blocked_until_ms = rr_i64(r->element[i + 4]);
    e->open = (int)rr_i64(r->element[i + 5]);
    e->wake_ms = rr_i64(r->element[i + 6]);
  }
  if (rc) {
    for (size_t i = first; i < out->n; i++) free(out->v[i].key);
    out->n = first;
  }
  if (r) freeReplyObject(r);
  return rc;
}

/* ---- selections ---- */

int redis_queue_items(store_t *s, const char *name, const queue_filter_t *f,
                      queue_item_list_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_filter(&a, f);
  int rc = redis_eval(RQ(s), RS_QUEUE_ITEMS, &a, &r, "queue items");
  if (!rc) rc = rows_items(r, out);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_requeue(store_t *s, const char *name, const queue_filter_t *f,
                        int64_t due_ms, int64_t now_ms, int64_t *count) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_i64(&a, now_ms);
  ra_i64(&a, due_ms);
  ra_filter(&a, f);
  int rc = redis_eval(RQ(s), RS_QUEUE_REQUEUE, &a, &r, "queue requeue");
  if (!rc) {
    *count = rr_i64(r);
    if (*count) redis_note(RQ(s), STORE_NOTE_QUEUES);
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_purge(store_t *s, const char *name, const queue_filter_t *f, int64_t now_ms,
                      int64_t *count) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_i64(&a, now_ms);
  ra_filter(&a, f);
  int rc = redis_eval(RQ(s), RS_QUEUE_PURGE, &a, &r, "queue purge");
  if (!rc) *count = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}
