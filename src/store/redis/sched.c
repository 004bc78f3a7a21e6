/* The Redis backend's schedules, runs, events and leases (store.h), each op
 * one Lua script (store/redis/internal.h).
 *
 * Keys under the prefix P:
 *   sched:ID, sched:seq     a hash per schedule (fields as in schedule_t); ids
 *   scheds                  zset id -> id
 *   sched:names             hash name -> id (names are unique)
 *   sched:refill            zset refill_ms -> id of schedules not paused
 *   run:ID, runs:seq        a hash per run (fields as in sched_run_t); ids
 *   runs:all                zset due_ms -> PAD(id): due order, then id
 *   runs:sched:SID          the same for one schedule
 *   runs:dues:SID           hash due_ms -> run id (a due time is one run)
 *   runs:upcoming           zset fire_ms -> PAD(id) of upcoming runs
 *   runs:ended              zset done_ms -> PAD(id) of ended runs (pruning)
 *   event:ID, events:seq    a hash per event; ids (never reused)
 *   events                  zset id -> id
 *   lease:NAME              hash holder, token, expires_ms
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "store/redis/internal.h"

/* ---- schedules ---- */

#define SF(name, type) {#name, type, offsetof(schedule_t, name)}
static const struct redis_field sched_fields[] = {
    SF(id, RF_I64),          SF(name, RF_STR),           SF(kind, RF_INT),
    SF(expr, RF_STR),        SF(interval_ms, RF_I64),    SF(once_ms, RF_I64),
    SF(tz, RF_STR),          SF(start_ms, RF_I64),       SF(end_ms, RF_I64),
    SF(jitter_ms, RF_I64),   SF(overlap, RF_INT),        SF(missed, RF_INT),
    SF(catchup_max, RF_INT), SF(paused, RF_INT),         SF(project, RF_STR),
    SF(spider, RF_STR),      SF(version, RF_STR),        SF(args, RF_JSON),
    SF(settings, RF_JSON),   SF(priority, RF_DBL),       SF(timeout_ms, RF_I64),
    SF(max_retries, RF_INT), SF(retry_backoff_ms, RF_I64), SF(webhooks, RF_JSON),
    SF(created_ms, RF_I64),  SF(updated_ms, RF_I64),     SF(horizon_ms, RF_I64),
    SF(refill_ms, RF_I64),   SF(last_due_ms, RF_I64),     SF(meta, RF_JSON),
};
#undef SF

static int row_schedule(const redisReply *r, schedule_t *sc) {
  schedule_init(sc);
  int rc = redis_decode(r, sched_fields, sizeof(sched_fields) / sizeof(sched_fields[0]), sc);
  if (rc) schedule_release(sc);
  return rc;
}

static void ra_num(redis_args_t *a, const char *k, int64_t v) {
  ra_str(a, k);
  ra_i64(a, v);
}

static int schedule_put(struct redis_store *q, const char *mode, const schedule_t *sc,
                        int64_t *id) {
  redis_args_t a = {0};
  ra_str(&a, mode);
  ra_i64(&a, sc->id);
  ra_kv_str(&a, "name", sc->name);
  ra_num(&a, "kind", sc->kind);
  ra_kv_str(&a, "expr", sc->expr);
  ra_num(&a, "interval_ms", sc->interval_ms);
  ra_num(&a, "once_ms", sc->once_ms);
  ra_kv_str(&a, "tz", sc->tz);
  ra_num(&a, "start_ms", sc->start_ms);
  ra_num(&a, "end_ms", sc->end_ms);
  ra_num(&a, "jitter_ms", sc->jitter_ms);
  ra_num(&a, "overlap", sc->overlap);
  ra_num(&a, "missed", sc->missed);
  ra_num(&a, "catchup_max", sc->catchup_max);
  ra_num(&a, "paused", sc->paused);
  ra_kv_str(&a, "project", sc->project);
  ra_kv_str(&a, "spider", sc->spider);
  ra_kv_str(&a, "version", sc->version);
  ra_kv_json(&a, "args", sc->args);
  ra_kv_json(&a, "settings", sc->settings);
  ra_str(&a, "priority");
  ra_dbl(&a, sc->priority);
  ra_num(&a, "timeout_ms", sc->timeout_ms);
  ra_num(&a, "max_retries", sc->max_retries);
  ra_num(&a, "retry_backoff_ms", sc->retry_backoff_ms);
  ra_kv_json(&a, "webhooks", sc->webhooks);
  ra_num(&a, "created_ms", sc->created_ms);
  ra_num(&a, "updated_ms", sc->updated_ms);
  ra_num(&a, "horizon_ms", sc->horizon_ms);
  ra_num(&a, "refill_ms", sc->refill_ms);
  ra_num(&a, "last_due_ms", sc->last_due_ms);
  ra_kv_json(&a, "meta", sc->meta);
  redisReply *r = NULL;
  int rc = redis_eval(q, RS_SCHEDULE_PUT, &a, &r, "write schedule");
  if (!rc && id) *id = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_schedule_insert(store_t *s, schedule_t *sc) {
  int64_t now = clock_wall_ms(), id = 0;
  if (!sc->created_ms) sc->created_ms = now;
  if (!sc->updated_ms) sc->updated_ms = sc->created_ms;
  int rc = schedule_put(RQ(s), "insert", sc, &id);
  if (!rc) sc->id = id;
  return rc;
}

int redis_schedule_update(store_t *s, const schedule_t *sc) {
  return schedule_put(RQ(s), "update", sc, NULL);
}

int redis_schedule_delete(store_t *s, int64_t id) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  return redis_eval(RQ(s), RS_SCHEDULE_DELETE, &a, NULL, "delete schedule");
}

int redis_schedule_get(store_t *s, int64_t id, const char *name, schedule_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, id);
  ra_str(&a, name);
  int rc = redis_eval(RQ(s), RS_SCHEDULE_GET, &a, &r, "get schedule");
  if (!rc) {
    schedule_t sc;
    rc = row_schedule(r, &sc);
    if (!rc) {
      schedule_release(out);
      *out = sc;
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_schedule_state_get(store_t *s, int64_t id, char **state) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, id);
  int rc = redis_eval(RQ(s), RS_SCHEDULE_STATE_GET, &a, &r, "get schedule state");
  if (!rc) rc = rr_strz(r, state);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_schedule_state_set(store_t *s, int64_t id, const char *state) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_str(&a, state ? "1" : "0");
  ra_str(&a, state);
  return redis_eval(RQ(s), RS_SCHEDULE_STATE_SET, &a, NULL, "set schedule state");
}

static int schedules_call(struct redis_store *q, int id, redis_args_t *a,
                          schedule_list_t *out, const char *what) {
  redisReply *r = NULL;
  int rc = redis_eval(q, id, a, &r, what);
  if (!rc && r->type != REDIS_REPLY_ARRAY) rc = SPD_ESTORE;
  if (!rc && r->elements) {
    schedule_t *v = realloc(out->v, (out->n + r->elements) * sizeof(*v));
    if (!v) {
      rc = -ENOMEM;
    } else {
      out->v = v;
      for (size_t i = 0; !rc && i < r->elements; i++)
        if (!(rc = row_schedule(r->element[i], &out->v[out->n]))) out->n++;
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_schedules_list(store_t *s, int64_t after_id, size_t limit, schedule_list_t *out) {
  redis_args_t a = {0};
  ra_i64(&a, after_id);
  ra_i64(&a, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
  return schedules_call(RQ(s), RS_SCHEDULES_LIST, &a, out, "list schedules");
}

int redis_schedules_refill(store_t *s, int64_t now_ms, size_t limit, schedule_list_t *out) {
  redis_args_t a = {0};
  ra_i64(&a, now_ms);
  ra_i64(&a, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
  return schedules_call(RQ(s), RS_SCHEDULES_REFILL, &a, out, "schedules to refill");
}

/* ---- runs ---- */

#define RF(name, type) {#name, type, offsetof(sched_run_t, name)}
static const struct redis_field run_fields[] = {
    RF(id, RF_I64),    RF(schedule_id, RF_I64), RF(due_ms, RF_I64), RF(fire_ms, RF_I64),
    RF(state, RF_INT), RF(job_id, RF_I64),      RF(done_ms, RF_I64), RF(reason, RF_STR),
};
#undef RF

static void run_release(void *r) { sched_run_release(r); }

static int runs_call(struct redis_store *q, int id, redis_args_t *a, sched_run_list_t *out,
                     const char *what) {
  redisReply *r = NULL;
  int rc = redis_eval(q, id, a, &r, what);
  if (!rc)
    rc = redis_decode_rows(r, run_fields, sizeof(run_fields) / sizeof(run_fields[0]),
                           (void **)&out->v, &out->n, sizeof(*out->v), run_release);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_runs_add(store_t *s, int64_t schedule_id, const int64_t *due, const int64_t *fire,
                   size_t n, int64_t horizon_ms, int64_t refill_ms) {
  redis_args_t a = {0};
  ra_i64(&a, schedule_id);
  ra_i64(&a, horizon_ms);
  ra_i64(&a, refill_ms);
  for (size_t i = 0; i < n; i++) {
    ra_i64(&a, due[i]);
    ra_i64(&a, fire[i]);
  }
  return redis_eval(RQ(s), RS_RUNS_ADD, &a, NULL, "add runs");
}

int redis_runs_clear(store_t *s, int64_t schedule_id, int64_t from_ms) {
  redis_args_t a = {0};
  ra_i64(&a, schedule_id);
  ra_i64(&a, from_ms);
  return redis_eval(RQ(s), RS_RUNS_CLEAR, &a, NULL, "clear runs");
}

int redis_run_defer(store_t *s, int64_t run_id, const char *reason) {
  redis_args_t a = {0};
  ra_i64(&a, run_id);
  ra_str(&a, reason);
  return redis_eval(RQ(s), RS_RUN_DEFER, &a, NULL, "defer run");
}

int redis_runs_due(store_t *s, int64_t until_ms, size_t max, sched_run_list_t *out) {
  redis_args_t a = {0};
  ra_i64(&a, until_ms);
  ra_i64(&a, max > 1000000 ? 1000000 : (int64_t)max);
  return runs_call(RQ(s), RS_RUNS_DUE, &a, out, "due runs");
}

int redis_runs_list(store_t *s, const run_filter_t *f, sched_run_list_t *out) {
  redis_args_t a = {0};
  ra_i64(&a, f->schedule_id);
  ra_i64(&a, f->states);
  ra_i64(&a, f->from_ms);
  ra_i64(&a, f->to_ms);
  ra_i64(&a, f->after_id);
  ra_i64(&a, f->limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)f->limit);
  return runs_call(RQ(s), RS_RUNS_LIST, &a, out, "list runs");
}

int redis_run_end(store_t *s, int64_t run_id, run_state_t state, int64_t job_id,
                  const char *reason, int64_t now_ms) {
  redis_args_t a = {0};
  ra_i64(&a, run_id);
  ra_i64(&a, state);
  ra_i64(&a, job_id);
  ra_str(&a, reason);
  ra_i64(&a, now_ms);
  return redis_eval(RQ(s), RS_RUN_END, &a, NULL, "end run");
}

/* ---- events ---- */

int redis_event_add(store_t *s, event_t *e) {
  redis_args_t a = {0};
  if (!e->ts_ms) e->ts_ms = clock_wall_ms();
  ra_i64(&a, e->ts_ms);
  ra_str(&a, e->type);
  ra_i64(&a, e->schedule_id);
  ra_i64(&a, e->job_id);
  ra_json(&a, e->data);
  redisReply *r = NULL;
  int rc = redis_eval(RQ(s), RS_EVENT_ADD, &a, &r, "add event");
  if (!rc) e->id = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}

#define EVF(name, type) {#name, type, offsetof(event_t, name)}
static const struct redis_field event_fields[] = {
    EVF(id, RF_I64),     EVF(ts_ms, RF_I64),  EVF(type, RF_STR),
    EVF(schedule_id, RF_I64), EVF(job_id, RF_I64), EVF(data, RF_JSON),
};
#undef EVF

static void event_free(void *e) { event_release(e); }

int redis_events_list(store_t *s, const event_filter_t *f, event_list_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, f->after_id);
  ra_str(&a, f->type_prefix);
  ra_i64(&a, f->schedule_id);
  ra_i64(&a, f->job_id);
  ra_i64(&a, f->limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)f->limit);
  ra_i64(&a, f->before_id);
  ra_i64(&a, f->newest_first != 0);
  int rc = redis_eval(RQ(s), RS_EVENTS_LIST, &a, &r, "list events");
  if (!rc)
    rc = redis_decode_rows(r, event_fields, sizeof(event_fields) / sizeof(event_fields[0]),
                           (void **)&out->v, &out->n, sizeof(*out->v), event_free);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_events_head(store_t *s, int64_t *id) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  int rc = redis_eval(RQ(s), RS_EVENTS_HEAD, &a, &r, "events head");
  if (!rc) *id = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_events_prune(store_t *s, int64_t before_ms, size_t max, int *deleted) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, before_ms);
  ra_i64(&a, max > 1000000 ? 1000000 : (int64_t)max);
  int rc = redis_eval(RQ(s), RS_EVENTS_PRUNE, &a, &r, "prune events");
  if (!rc) *deleted = (int)rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}

/* ---- leases ---- */

int redis_lease_acquire(store_t *s, const char *name, const char *holder, int64_t now_ms,
                        int64_t ttl_ms, int64_t *token) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_str(&a, holder);
  ra_i64(&a, now_ms);
  ra_i64(&a, ttl_ms);
  int rc = redis_eval(RQ(s), RS_LEASE_ACQUIRE, &a, &r, "acquire lease");
  if (!rc) *token = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_lease_check(store_t *s, const char *name, int64_t token, int64_t now_ms) {
  redis_args_t a = {0};
  ra_str(&a, name);
  ra_i64(&a, token);
  ra_i64(&a, now_ms);
  return redis_eval(RQ(s), RS_LEASE_CHECK, &a, NULL, "check lease");
}

int redis_lease_release(store_t *s, const char *name, const char *holder, int64_t token) {
  redis_args_t a = {0};
  ra_str(&a, name);
  ra_str(&a, holder);
  ra_i64(&a, token);
  return redis_eval(RQ(s), RS_LEASE_RELEASE, &a, NULL, "release lease");
}

int redis_lease_get(store_t *s, const char *name, char **holder, int64_t *token,
                    int64_t *expires_ms) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  int rc = redis_eval(RQ(s), RS_LEASE_GET, &a, &r, "get lease");
  if (!rc) {
    *token = rr_i64(rr_field(r, "token"));
    *expires_ms = rr_i64(rr_field(r, "expires_ms"));
    rc = rr_strz(rr_field(r, "holder"), holder);
  }
  if (r) freeReplyObject(r);
  return rc;
}
