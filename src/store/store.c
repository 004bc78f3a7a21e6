/* Backend dispatch: picks a backend by URL scheme and forwards every call
 * through its ops table, after the argument checks every backend shares (so
 * each backend answers -EINVAL the same way and needs no checks of its own).
 */
#include "store/store_impl.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"
#include "core/array.h"
#include "error.h"

static const struct store_ops *const store_backends[] = {
    &store_sqlite_ops,
    &store_pg_ops,
    &store_redis_ops,
};

/* Schemes a later build may offer, named so the error says what is missing
 * rather than calling a PostgreSQL URL a bad path. */
static const char *const store_known_schemes[] = {"rediss"};

/* Splits "scheme://rest" or "sqlite:rest"; anything else is a bare SQLite
 * path. A scheme is letters, digits, '+', '-', '.' after a letter (RFC 3986),
 * which keeps paths such as "./a:b" from being read as URLs. */
static int store_parse_url(const char *url, char *scheme, size_t schemelen,
                           const char **rest) {
  const char *p = url;
  if (isalpha((unsigned char)*p)) {
    p++;
    while (isalnum((unsigned char)*p) || *p == '+' || *p == '-' || *p == '.')
      p++;
    size_t n = (size_t)(p - url);
    int sqlite_short = n == 6 && strncmp(url, "sqlite", 6) == 0 && *p == ':';
    if (strncmp(p, "://", 3) == 0 || sqlite_short) {
      if (n >= schemelen) return -EINVAL;
      memcpy(scheme, url, n);
      scheme[n] = '\0';
      for (size_t i = 0; i < n; i++)
        scheme[i] = (char)tolower((unsigned char)scheme[i]);
      *rest = strncmp(p, "://", 3) == 0 ? p + 3 : p + 1;
      return 0;
    }
  }
  snprintf(scheme, schemelen, "sqlite");
  *rest = url;
  return 0;
}

/* "postgres" is libpq's other spelling of the scheme. */
static const struct store_ops *store_backend(const char *scheme) {
  if (!strcmp(scheme, "postgres")) scheme = "postgresql";
  for (size_t i = 0; i < sizeof(store_backends) / sizeof(store_backends[0]); i++)
    if (strcmp(scheme, store_backends[i]->name) == 0) return store_backends[i];
  return NULL;
}

int store_open(const char *url, store_t **out, char *err, size_t errlen) {
  char scheme[32];
  const char *rest;
  if (err && errlen) err[0] = '\0';
  if (!out) return -EINVAL;
  *out = NULL;
  if (!url || !*url) {
    snprintf(err, errlen, "store URL is empty");
    return -EINVAL;
  }
  if (store_parse_url(url, scheme, sizeof(scheme), &rest)) {
    snprintf(err, errlen, "store URL has an over-long scheme");
    return -EINVAL;
  }
  const struct store_ops *ops = store_backend(scheme);
  if (ops) return ops->open(url, rest, out, err, errlen);
  for (size_t i = 0; i < sizeof(store_known_schemes) / sizeof(store_known_schemes[0]); i++)
    if (strcmp(scheme, store_known_schemes[i]) == 0) {
      snprintf(err, errlen, "store backend \"%s\" is not available in this build%s", scheme,
               strcmp(scheme, "rediss") ? ""
                                        : ": rediss:// (Redis over TLS) needs hiredis_ssl, which "
                                          "this build's hiredis lacks; reach Redis through a TLS "
                                          "tunnel (stunnel, spiped) on 127.0.0.1 with redis://");
      return -EINVAL;
    }
  snprintf(err, errlen, "unknown store URL scheme \"%s\"", scheme); /* the URL may hold a password */
  return -EINVAL;
}

void store_close(store_t *s) {
  if (s) s->ops->close(s);
}

int store_tx_begin(store_t *s) { return s ? s->ops->tx_begin(s) : -EINVAL; }
int store_tx_commit(store_t *s) { return s ? s->ops->tx_commit(s) : -EINVAL; }
int store_tx_rollback(store_t *s) { return s ? s->ops->tx_rollback(s) : -EINVAL; }
int store_sp_begin(store_t *s) { return s ? s->ops->sp_begin(s) : -EINVAL; }
int store_sp_release(store_t *s) { return s ? s->ops->sp_release(s) : -EINVAL; }
int store_sp_rollback(store_t *s) { return s ? s->ops->sp_rollback(s) : -EINVAL; }

int store_job_insert(store_t *s, job_t *j) {
  if (!s || !j || !j->jobid || !j->project || !j->spider) return -EINVAL;
  if (j->state < 0 || j->state >= JOB_NSTATES) return -EINVAL;
  if (j->unique_key && !*j->unique_key) return -EINVAL;
  return s->ops->job_insert(s, j);
}

int store_job_claim(store_t *s, const char *node, size_t max, int64_t now_ms,
                    job_list_t *out) {
  if (!s || !node || !out) return -EINVAL;
  if (max == 0) return 0;
  return s->ops->job_claim(s, node, max, now_ms, out);
}

int store_job_claim_skip(store_t *s, const char *node, size_t max, int64_t now_ms,
                         const job_key_t *skip, size_t nskip, job_list_t *out) {
  if (!nskip) return store_job_claim(s, node, max, now_ms, out);
  if (!s || !node || !out || !skip || nskip > STORE_CLAIM_SKIP_MAX) return -EINVAL;
  for (size_t i = 0; i < nskip; i++)
    if (!skip[i].project) return -EINVAL;
  if (max == 0) return 0;
  return s->ops->job_claim_skip(s, node, max, now_ms, skip, nskip, out);
}

int store_claim_lock(store_t *s) {
  if (!s) return -EINVAL;
  return s->ops->claim_lock(s);
}

int store_job_started(store_t *s, int64_t id, int pid, int64_t pid_start) {
  if (!s) return -EINVAL;
  return s->ops->job_started(s, id, pid, pid_start);
}

int store_job_requeue(store_t *s, int64_t id) {
  if (!s) return -EINVAL;
  return s->ops->job_requeue(s, id);
}

int store_job_finish(store_t *s, int64_t id, job_state_t state, int64_t end_ms,
                     int exit_code, int term_signal, const json_t *stats) {
  if (!s || !(job_state_final(state) || state == JOB_PAUSED)) return -EINVAL;
  return s->ops->job_finish(s, id, state, end_ms, exit_code, term_signal, stats);
}

int store_job_cancel_pending(store_t *s, const char *project, const char *jobid,
                             int64_t now_ms, int *count) {
  int n = 0;
  if (count) *count = 0;
  if (!s || !project || !jobid) return -EINVAL;
  int rc = s->ops->job_cancel_pending(s, project, jobid, now_ms, &n);
  if (!rc && count) *count = n;
  return rc;
}

int store_job_get(store_t *s, int64_t id, job_t *out) {
  if (!s || !out) return -EINVAL;
  /* Callers pass an uninitialised job as often as an empty one; either way
   * it is safe to job_release afterwards, whatever the result. */
  job_init(out);
  return s->ops->job_get(s, id, out);
}

int store_job_status(store_t *s, const char *project, const char *jobid,
                     job_state_t *out) {
  if (!s || !jobid || !out) return -EINVAL;
  return s->ops->job_status(s, project, jobid, out);
}

static int health_valid(const char *h) {
  return !strcmp(h, "ok") || !strcmp(h, "degraded") || !strcmp(h, "broken");
}

int store_jobs_list(store_t *s, const job_filter_t *f, job_list_t *out) {
  static const job_filter_t all;
  if (!s || !out) return -EINVAL;
  if (f && (f->states >> JOB_NSTATES)) return -EINVAL;
  if (f && f->text && strlen(f->text) > JOB_FILTER_TEXT_MAX) return -EINVAL;
  if (f && f->nprojects) {
    if (f->nprojects > JOB_FILTER_PROJECTS_MAX || !f->projects) return -EINVAL;
    for (size_t i = 0; i < f->nprojects; i++)
      if (!f->projects[i] || !*f->projects[i]) return -EINVAL;
  }
  if (f && f->health && strcmp(f->health, "none") && !health_valid(f->health)) return -EINVAL;
  if (f && f->nmeta) {
    if (f->nmeta > JOB_FILTER_META_MAX || !f->meta) return -EINVAL;
    for (size_t i = 0; i < f->nmeta; i++)
      if (!job_meta_key_valid(f->meta[2 * i]) || !f->meta[2 * i + 1]) return -EINVAL;
  }
  if (f && (f->test < -1 || f->test > 1)) return -EINVAL;
  if (f && ((f->text && !*f->text) || (f->schedule_id && !f->test))) {
    job_filter_t g = *f;
    if (g.text && !*g.text) g.text = NULL; /* "" is no filter: the backends see NULL only */
    /* A test run is no part of its schedule's history: the schedule's
     * jobs are its real runs unless test runs are asked for. */
    if (g.schedule_id && !g.test) g.test = -1;
    return s->ops->jobs_list(s, &g, out);
  }
  return s->ops->jobs_list(s, f ? f : &all, out);
}

int store_jobs_page(store_t *s, int group, const char *project, size_t limit,
                    job_page_key_t *after, job_list_t *out, int *more) {
  if (!s || !after || !out || !more || group < 0 || group >= JOB_NGROUPS || !limit ||
      limit > JOB_PAGE_MAX)
    return -EINVAL;
  *more = 0;
  return s->ops->jobs_page(s, group, project, limit, after, out, more);
}

int store_job_counts(store_t *s, const char *project, int64_t counts[JOB_NSTATES]) {
  return store_job_counts_since(s, project, 0, counts);
}

int store_job_counts_since(store_t *s, const char *project, int64_t ended_since_ms,
                           int64_t counts[JOB_NSTATES]) {
  if (!s || !counts || ended_since_ms < 0) return -EINVAL;
  for (int i = 0; i < JOB_NSTATES; i++) counts[i] = 0;
  return s->ops->job_counts(s, project, ended_since_ms, counts);
}

int store_job_throughput(store_t *s, const char *project, int64_t from_ms, int64_t to_ms,
                         int64_t step_ms, job_bucket_t *buckets, size_t n) {
  if (!s || !buckets || step_ms < 1 || from_ms < 0 || to_ms <= from_ms) return -EINVAL;
  int64_t need = (to_ms - from_ms + step_ms - 1) / step_ms;
  if (need > JOB_BUCKETS_MAX || (size_t)need != n) return -EINVAL;
  for (size_t i = 0; i < n; i++)
    buckets[i] = (job_bucket_t){.t_ms = from_ms + (int64_t)i * step_ms};
  return s->ops->job_throughput(s, project, from_ms, to_ms, step_ms, buckets, n);
}

int store_trim_finished(store_t *s, int keep, int *deleted) {
  int n = 0;
  if (deleted) *deleted = 0;
  if (!s || keep < 0) return -EINVAL;
  if (keep == 0) return 0;
  int rc = s->ops->trim_finished(s, keep, &n);
  if (!rc && deleted) *deleted = n;
  return rc;
}

int store_job_heartbeat(store_t *s, int64_t id, int64_t now_ms) {
  if (!s) return -EINVAL;
  return s->ops->job_heartbeat(s, id, now_ms);
}

int job_meta_key_valid(const char *key) {
  size_t n = key ? strlen(key) : 0;
  if (n == 0 || n > JOB_META_KEY_MAX) return 0;
  for (const unsigned char *p = (const unsigned char *)key; *p; p++)
    if (*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\') return 0;
  return 1;
}

int store_job_set_meta(store_t *s, int64_t id, const json_t *meta) {
  if (!s || (meta && !json_is_object(meta))) return -EINVAL;
  return s->ops->job_set_meta(s, id, meta);
}

int store_job_set_history(store_t *s, int64_t id, job_state_t state, int corrected,
                          job_state_t original, const char *note) {
  if (!s || !job_state_final(state) || (corrected && !job_state_final(original)))
    return -EINVAL;
  return s->ops->job_set_history(s, id, state, corrected, original, note);
}

int store_job_set_health(store_t *s, int64_t id, const char *health, const json_t *reasons) {
  if (!s || (health && !health_valid(health)) || (reasons && !json_is_array(reasons)))
    return -EINVAL;
  return s->ops->job_set_health(s, id, health, reasons);
}

int store_job_set_segments(store_t *s, int64_t id, const json_t *segments) {
  if (!s || (segments && !json_is_array(segments))) return -EINVAL;
  return s->ops->job_set_segments(s, id, segments);
}

int store_job_resume(store_t *s, int64_t id) {
  if (!s) return -EINVAL;
  return s->ops->job_resume(s, id);
}

int store_jobs_waiting(store_t *s, int64_t upstream, job_list_t *out) {
  if (!s || !out || upstream <= 0) return -EINVAL;
  return s->ops->jobs_waiting(s, upstream, out);
}

int store_job_wake(store_t *s, int64_t id, int64_t now_ms) {
  if (!s) return -EINVAL;
  return s->ops->job_wake(s, id, now_ms);
}

int store_job_state_put(store_t *s, int64_t id, const void *data, size_t len, int64_t now_ms) {
  if (!s || (!data && len)) return -EINVAL;
  return s->ops->job_state_put(s, id, data, len, now_ms);
}

int store_job_state_get(store_t *s, int64_t id, void **data, size_t *len) {
  if (!s || !data || !len) return -EINVAL;
  *data = NULL;
  *len = 0;
  return s->ops->job_state_get(s, id, data, len);
}

int store_job_state_delete(store_t *s, int64_t id) {
  if (!s) return -EINVAL;
  return s->ops->job_state_delete(s, id);
}

int store_job_next_due(store_t *s, int64_t now_ms, int64_t *out) {
  if (!s || !out) return -EINVAL;
  *out = 0;
  return s->ops->job_next_due(s, now_ms, out);
}

static int store_schedule_ok(const schedule_t *sc) {
  return sc && sc->name && sc->project && sc->spider && sc->kind >= 0 &&
         sc->kind < SCHED_NKINDS && sc->overlap >= 0 && sc->overlap < OVERLAP_N &&
         sc->missed >= 0 && sc->missed < MISSED_N;
}

int store_schedule_insert(store_t *s, schedule_t *sc) {
  if (!s || !store_schedule_ok(sc)) return -EINVAL;
  return s->ops->schedule_insert(s, sc);
}

int store_schedule_update(store_t *s, const schedule_t *sc) {
  if (!s || !store_schedule_ok(sc)) return -EINVAL;
  return s->ops->schedule_update(s, sc);
}

int store_schedule_delete(store_t *s, int64_t id) {
  if (!s) return -EINVAL;
  return s->ops->schedule_delete(s, id);
}

int store_schedule_get(store_t *s, int64_t id, schedule_t *out) {
  if (!s || !out) return -EINVAL;
  schedule_init(out);
  return s->ops->schedule_get(s, id, NULL, out);
}

int store_schedule_find(store_t *s, const char *name, schedule_t *out) {
  if (!s || !out || !name) return -EINVAL;
  schedule_init(out);
  return s->ops->schedule_get(s, 0, name, out);
}

int store_schedules_list(store_t *s, int64_t after_id, size_t limit,
                         schedule_list_t *out) {
  if (!s || !out) return -EINVAL;
  return s->ops->schedules_list(s, after_id, limit, out);
}

int store_schedule_state_get(store_t *s, int64_t id, char **state) {
  if (!s || !state || id <= 0) return -EINVAL;
  *state = NULL;
  return s->ops->schedule_state_get(s, id, state);
}

int store_schedule_state_set(store_t *s, int64_t id, const char *state) {
  if (!s || id <= 0) return -EINVAL;
  return s->ops->schedule_state_set(s, id, state);
}

int store_runs_add(store_t *s, int64_t schedule_id, const int64_t *due,
                   const int64_t *fire, size_t n, int64_t horizon_ms, int64_t refill_ms) {
  if (!s || (n && (!due || !fire))) return -EINVAL;
  return s->ops->runs_add(s, schedule_id, due, fire, n, horizon_ms, refill_ms);
}

int store_runs_clear(store_t *s, int64_t schedule_id, int64_t from_ms) {
  if (!s) return -EINVAL;
  return s->ops->runs_clear(s, schedule_id, from_ms);
}

int store_schedules_refill(store_t *s, int64_t now_ms, size_t limit,
                           schedule_list_t *out) {
  if (!s || !out) return -EINVAL;
  return s->ops->schedules_refill(s, now_ms, limit, out);
}

int store_run_defer(store_t *s, int64_t run_id, const char *reason) {
  if (!s) return -EINVAL;
  return s->ops->run_defer(s, run_id, reason);
}

int store_runs_due(store_t *s, int64_t until_ms, size_t max, sched_run_list_t *out) {
  if (!s || !out) return -EINVAL;
  if (max == 0) return 0;
  return s->ops->runs_due(s, until_ms, max, out);
}

int store_runs_list(store_t *s, const run_filter_t *f, sched_run_list_t *out) {
  static const run_filter_t all;
  if (!s || !out) return -EINVAL;
  if (f && (f->states >> RUN_NSTATES)) return -EINVAL;
  return s->ops->runs_list(s, f ? f : &all, out);
}

int store_run_end(store_t *s, int64_t run_id, run_state_t state, int64_t job_id,
                  const char *reason, int64_t now_ms) {
  if (!s || state <= RUN_UPCOMING || state >= RUN_NSTATES) return -EINVAL;
  return s->ops->run_end(s, run_id, state, job_id, reason, now_ms);
}

void store_set_actor(store_t *s, const char *actor, const char *addr) {
  if (!s) return;
  s->actor = actor;
  s->addr = actor ? addr : NULL;
}

int store_event_add(store_t *s, event_t *e) {
  if (!s || !e || !e->type) return -EINVAL;
  if (!s->actor) return s->ops->event_add(s, e);
  /* The audit trail: who asked, on a copy (the caller owns e->data). */
  json_t *d = json_is_object(e->data) ? json_copy(e->data) : json_object();
  if (!d) return -ENOMEM;
  if (!json_object_get(d, "actor")) json_object_set_new(d, "actor", json_string(s->actor));
  if (s->addr && !json_object_get(d, "addr")) json_object_set_new(d, "addr", json_string(s->addr));
  json_t *was = e->data;
  e->data = d;
  int rc = s->ops->event_add(s, e);
  e->data = was;
  json_decref(d);
  return rc;
}

int store_events_list(store_t *s, const event_filter_t *f, event_list_t *out) {
  static const event_filter_t all;
  if (!s || !out || (f && f->before_id < 0)) return -EINVAL;
  return s->ops->events_list(s, f ? f : &all, out);
}

int store_events_head(store_t *s, int64_t *id) {
  if (!s || !id) return -EINVAL;
  *id = 0;
  return s->ops->events_head(s, id);
}

int store_lease_acquire(store_t *s, const char *name, const char *holder,
                        int64_t now_ms, int64_t ttl_ms, int64_t *token) {
  if (!s || !name || !holder || !token || ttl_ms <= 0) return -EINVAL;
  return s->ops->lease_acquire(s, name, holder, now_ms, ttl_ms, token);
}

int store_lease_check(store_t *s, const char *name, int64_t token, int64_t now_ms) {
  if (!s || !name) return -EINVAL;
  return s->ops->lease_check(s, name, token, now_ms);
}

int store_lease_release(store_t *s, const char *name, const char *holder,
                        int64_t token) {
  if (!s || !name || !holder) return -EINVAL;
  return s->ops->lease_release(s, name, holder, token);
}

int store_lease_get(store_t *s, const char *name, char **holder, int64_t *token,
                    int64_t *expires_ms) {
  if (!s || !name || !holder || !token || !expires_ms) return -EINVAL;
  *holder = NULL;
  return s->ops->lease_get(s, name, holder, token, expires_ms);
}

int store_jobs_prune(store_t *s, const prune_rule_t *rules, size_t nrules,
                     int keep_default, int64_t ended_before_default_ms, size_t max,
                     job_list_t *deleted) {
  int limited = keep_default > 0 || ended_before_default_ms > 0;
  if (!s || !deleted || (nrules && !rules) || keep_default < 0 || ended_before_default_ms < 0)
    return -EINVAL;
  for (size_t i = 0; i < nrules; i++) {
    if (!rules[i].project || rules[i].keep < 0 || rules[i].ended_before_ms < 0)
      return -EINVAL;
    limited |= rules[i].keep > 0 || rules[i].ended_before_ms > 0;
  }
  /* Nothing can go: spare the backend a scan of the whole history. */
  if (max == 0 || !limited) return 0;
  return s->ops->jobs_prune(s, rules, nrules, keep_default, ended_before_default_ms, max,
                            deleted);
}

int store_events_prune(store_t *s, int64_t before_ms, size_t max, int *deleted) {
  int n = 0;
  if (deleted) *deleted = 0;
  if (!s || !deleted) return -EINVAL;
  if (max == 0 || before_ms <= 0) return 0;
  int rc = s->ops->events_prune(s, before_ms, max, &n);
  if (!rc) *deleted = n;
  return rc;
}

int store_jobs_page_parts(store_t *s, store_page_part_fn part, int group, const char *project,
                          size_t limit, job_page_key_t *after, job_list_t *out, int *more) {
  size_t n0 = out->n;
  int rc;
  if (!after->id) {
    rc = part(s, group, 0, project, after, limit, out);
  } else {
    rc = part(s, group, 1, project, after, limit, out);
    if (!rc && out->n - n0 < limit)
      rc = part(s, group, 2, project, after, limit - (out->n - n0), out);
  }
  if (rc) return rc;
  if (out->n > n0) job_page_key_of(after, group, &out->v[out->n - 1]);
  *more = out->n - n0 == limit;
  return 0;
}

void store_prune_limits(const prune_rule_t *rules, size_t nrules, int keep_default,
                        int64_t ended_before_default_ms, const char *project,
                        const char *spider, int *keep, int64_t *ended_before_ms) {
  const prune_rule_t *best = NULL;
  for (size_t i = 0; i < nrules; i++) {
    const prune_rule_t *r = &rules[i];
    if (strcmp(r->project, project) != 0) continue;
    if (r->spider && strcmp(r->spider, spider) == 0) {
      best = r;
      break;
    }
    if (!r->spider && !best) best = r;
  }
  *keep = best ? best->keep : keep_default;
  *ended_before_ms = best ? best->ended_before_ms : ended_before_default_ms;
}

/* ---- task queues ---- */

static int store_qname_ok(const char *name) { return name && queue_name_valid(name) == 0; }

static int store_leases_ok(const queue_lease_t *l, size_t n) {
  return n == 0 || l != NULL;
}

int store_queue_put(store_t *s, const char *name, queue_put_t *items, size_t n,
                    int64_t now_ms) {
  if (!s || !store_qname_ok(name) || (n && !items)) return -EINVAL;
  for (size_t i = 0; i < n; i++) {
    const queue_put_t *p = &items[i];
    if (!p->element || p->len > QUEUE_ELEMENT_MAX) return -EINVAL;
    if (p->key && strlen(p->key) > QUEUE_KEY_MAX) return -EINVAL;
    if (p->policy < 0 || p->policy >= QPOLICY_N) return -EINVAL;
  }
  if (n == 0) return 0;
  return s->ops->queue_put(s, name, items, n, now_ms);
}

int store_queue_take(store_t *s, const char *name, size_t max, int64_t visibility_ms,
                     int64_t now_ms, queue_item_list_t *out, int64_t *next_ms) {
  int64_t next = 0;
  if (next_ms) *next_ms = 0;
  if (!s || !store_qname_ok(name) || !out || visibility_ms < 0) return -EINVAL;
  if (max == 0) return 0;
  int rc = s->ops->queue_take(s, name, max, visibility_ms, now_ms, out, &next);
  if (!rc && next_ms) *next_ms = next;
  return rc;
}

int store_queue_ack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                    int64_t now_ms) {
  if (!s || !store_qname_ok(name) || !store_leases_ok(leases, n)) return -EINVAL;
  if (n == 0) return 0;
  return s->ops->queue_ack(s, name, leases, n, now_ms);
}

int store_queue_nack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                     int64_t now_ms) {
  if (!s || !store_qname_ok(name) || !store_leases_ok(leases, n)) return -EINVAL;
  if (n == 0) return 0;
  return s->ops->queue_nack(s, name, leases, n, now_ms);
}

int store_queue_extend(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                       int64_t visibility_ms, int64_t now_ms) {
  if (!s || !store_qname_ok(name) || !store_leases_ok(leases, n) || visibility_ms < 0)
    return -EINVAL;
  if (n == 0) return 0;
  return s->ops->queue_extend(s, name, leases, n, visibility_ms, now_ms);
}

int store_queue_set(store_t *s, queue_conf_t *c) {
  if (!s || !c || !store_qname_ok(c->name)) return -EINVAL;
  if (c->visibility_ms <= 0 || c->max_deliveries < 0 || c->backoff_ms < 0 ||
      c->backoff_max_ms < 0 || c->max_inflight < 0 || c->key_inflight < 0 ||
      !(c->key_rate >= 0) || !(c->key_burst >= 0) || c->key_mode < 0 ||
      c->key_mode >= QKEY_N)
    return -EINVAL;
  return s->ops->queue_set(s, c);
}

int store_queue_get(store_t *s, const char *name, queue_conf_t *out) {
  if (!s || !store_qname_ok(name) || !out) return -EINVAL;
  memset(out, 0, sizeof(*out));
  return s->ops->queue_get(s, name, out);
}

int store_queues_list(store_t *s, const char *after, size_t limit,
                      queue_conf_list_t *out) {
  if (!s || !out) return -EINVAL;
  return s->ops->queues_list(s, after, limit, out);
}

int store_queue_delete(store_t *s, const char *name) {
  if (!s || !store_qname_ok(name)) return -EINVAL;
  return s->ops->queue_delete(s, name);
}

int store_queue_stats(store_t *s, const char *name, int64_t now_ms, queue_stats_t *out) {
  if (!s || !store_qname_ok(name) || !out) return -EINVAL;
  memset(out, 0, sizeof(*out));
  return s->ops->queue_stats(s, name, now_ms, out);
}

int store_queues_each(store_t *s, int64_t now_ms,
                      int (*fn)(void *ud, const queue_conf_t *q, const queue_stats_t *st),
                      void *ud) {
  queue_conf_list_t l = {0};
  int rc = store_queues_list(s, NULL, 0, &l);
  for (size_t i = 0; !rc && i < l.n; i++) {
    queue_stats_t st;
    rc = store_queue_stats(s, l.v[i].name, now_ms, &st);
    if (rc == -ENOENT) rc = 0; /* deleted meanwhile */
    else if (!rc) rc = fn(ud, &l.v[i], &st);
  }
  queue_conf_list_release(&l);
  return rc;
}

static int store_qfilter_ok(const queue_filter_t *f) {
  return !(f->states >> QSTATE_N) && (f->nids == 0 || f->ids);
}

int store_queue_items(store_t *s, const char *name, const queue_filter_t *f,
                      queue_item_list_t *out) {
  static const queue_filter_t all;
  if (!s || !store_qname_ok(name) || !out || (f && !store_qfilter_ok(f))) return -EINVAL;
  return s->ops->queue_items(s, name, f ? f : &all, out);
}

int store_queue_keys(store_t *s, const char *name, const char *after, size_t limit,
                     int64_t now_ms, queue_key_list_t *out) {
  if (!s || !store_qname_ok(name) || !out || (after && strlen(after) > QUEUE_KEY_MAX))
    return -EINVAL;
  return s->ops->queue_keys(s, name, after ? after : "", limit, now_ms, out);
}

void queue_key_list_release(queue_key_list_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) free(l->v[i].key);
  free(l->v);
  memset(l, 0, sizeof(*l));
}

int store_queue_requeue(store_t *s, const char *name, const queue_filter_t *f,
                        int64_t due_ms, int64_t now_ms, int64_t *count) {
  static const queue_filter_t all;
  int64_t n = 0;
  if (count) *count = 0;
  if (!s || !store_qname_ok(name) || (f && !store_qfilter_ok(f))) return -EINVAL;
  int rc = s->ops->queue_requeue(s, name, f ? f : &all, due_ms, now_ms, &n);
  if (!rc && count) *count = n;
  return rc;
}

int store_queue_purge(store_t *s, const char *name, const queue_filter_t *f,
                      int64_t now_ms, int64_t *count) {
  static const queue_filter_t all;
  int64_t n = 0;
  if (count) *count = 0;
  if (!s || !store_qname_ok(name) || (f && !store_qfilter_ok(f))) return -EINVAL;
  int rc = s->ops->queue_purge(s, name, f ? f : &all, now_ms, &n);
  if (!rc && count) *count = n;
  return rc;
}

int store_meta_get(store_t *s, const char *key, char **value) {
  if (!s || !key || !value) return -EINVAL;
  *value = NULL;
  return s->ops->meta_get(s, key, value);
}

int store_meta_set(store_t *s, const char *key, const char *value) {
  if (!s || !key || !value) return -EINVAL;
  return s->ops->meta_set(s, key, value);
}

/* ---- users and API tokens ---- */

static int store_kind_ok(principal_kind_t kind) {
  return kind == PRINCIPAL_USER || kind == PRINCIPAL_TOKEN;
}

/* A new auth generation: the wall clock says roughly when, the random
 * bytes make it one no other node writes too, so a node comparing what it
 * cached against the store never mistakes another node's change for its
 * own (two writes in one millisecond still differ). */
static int store_auth_bump(store_t *s) {
  unsigned char b[16];
  char gen[32 + 2 * sizeof(b) + 1];
  if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) return -EIO;
  size_t n = (size_t)snprintf(gen, sizeof(gen), "%lld-", (long long)clock_wall_ms());
  for (size_t i = 0; i < sizeof(b) && n + 2 < sizeof(gen); i++, n += 2)
    snprintf(gen + n, sizeof(gen) - n, "%02x", b[i]);
  return s->ops->meta_set(s, "auth.gen", gen);
}

/* Would p, as written, be a usable admin credential at now_ms (store.h)? */
static int store_admin_usable(const principal_t *p, int64_t now_ms) {
  return p->role == ROLE_ADMIN && p->secret && *p->secret &&
         (p->expires_ms == 0 || p->expires_ms > now_ms);
}

static int store_principal_write(store_t *s, const principal_t *p, int64_t keep_admin_ms) {
  if (!s || !p || !store_kind_ok(p->kind) || !p->name || !*p->name ||
      p->role < ROLE_READ || p->role > ROLE_ADMIN || keep_admin_ms < 0)
    return -EINVAL;
  /* A put that leaves the principal a usable admin takes no admin away:
   * no check, and no lock on PostgreSQL. */
  if (keep_admin_ms && store_admin_usable(p, keep_admin_ms)) keep_admin_ms = 0;
  /* The backends see no NULL string: "" is what the API means by none. */
  principal_t q = *p;
  if (!q.label) q.label = "";
  if (!q.secret) q.secret = "";
  if (!q.owner) q.owner = "";
  if (!q.projects) q.projects = "";
  int rc = s->ops->principal_put(s, &q, keep_admin_ms);
  if (rc) return rc;
  return store_auth_bump(s);
}

int store_principal_put(store_t *s, const principal_t *p) {
  return store_principal_write(s, p, 0);
}

int store_principal_put_keep_admin(store_t *s, const principal_t *p, int64_t now_ms) {
  return now_ms > 0 ? store_principal_write(s, p, now_ms) : -EINVAL;
}

static int store_principal_remove(store_t *s, principal_kind_t kind, const char *name,
                                  int64_t keep_admin_ms, int *count) {
  int n = 0;
  if (count) *count = 0;
  if (!s || !store_kind_ok(kind) || !name || !*name || keep_admin_ms < 0) return -EINVAL;
  int rc = s->ops->principal_delete(s, kind, name, keep_admin_ms, &n);
  /* Deleting nothing changed nothing: caches stay valid. */
  if (!rc && n > 0) rc = store_auth_bump(s);
  if (!rc && count) *count = n;
  return rc;
}

int store_principal_delete(store_t *s, principal_kind_t kind, const char *name, int *count) {
  return store_principal_remove(s, kind, name, 0, count);
}

int store_principal_delete_keep_admin(store_t *s, principal_kind_t kind, const char *name,
                                      int64_t now_ms, int *count) {
  if (count) *count = 0;
  return now_ms > 0 ? store_principal_remove(s, kind, name, now_ms, count) : -EINVAL;
}

int store_principals_list(store_t *s, principal_list_t *out) {
  if (!s || !out) return -EINVAL;
  return s->ops->principals_list(s, out);
}

int store_auth_gen(store_t *s, char **gen) {
  if (!s || !gen) return -EINVAL;
  *gen = NULL;
  int rc = s->ops->meta_get(s, "auth.gen", gen);
  if (rc == -ENOENT) {
    *gen = strdup("");
    rc = *gen ? 0 : -ENOMEM;
  }
  return rc;
}

/* ---- accounts ---- */

int store_accounts_get(store_t *s, char **doc) {
  if (!s || !doc) return -EINVAL;
  *doc = NULL;
  int rc = s->ops->meta_get(s, "accounts", doc);
  if (rc == -ENOENT) {
    *doc = strdup("{}");
    rc = *doc ? 0 : -ENOMEM;
  }
  return rc;
}

int store_accounts_put(store_t *s, const char *doc) {
  if (!s || !doc || doc[0] != '{') return -EINVAL;
  int rc = s->ops->meta_set(s, "accounts", doc);
  return rc ? rc : store_auth_bump(s);
}

/* ---- nodes ---- */

void node_info_release(node_info_t *n) {
  if (!n) return;
  free(n->name);
  free(n->url);
  free(n->version);
  memset(n, 0, sizeof(*n));
}

ARRAY_LIST_RELEASE(node_list_release, node_list_t, node_info_release)

/* Moves *item (size bytes) to the end of a growable array and clears it. */
static int list_push(void **v, size_t *n, size_t *cap, void *item, size_t size) {
  int rc = array_reserve(v, cap, *n + 1, size);
  if (rc) return rc;
  memcpy((char *)*v + (*n)++ * size, item, size);
  memset(item, 0, size);
  return 0;
}

int node_list_push(node_list_t *l, node_info_t *v) {
  return list_push((void **)&l->v, &l->n, &l->cap, v, sizeof(*v));
}

int principal_list_push(principal_list_t *l, principal_t *v) {
  return list_push((void **)&l->v, &l->n, &l->cap, v, sizeof(*v));
}

void egg_list_release(egg_list_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) {
    free(l->v[i].project);
    free(l->v[i].version);
  }
  free(l->v);
  memset(l, 0, sizeof(*l));
}

int egg_list_push(egg_list_t *l, egg_ref_t *v) {
  return list_push((void **)&l->v, &l->n, &l->cap, v, sizeof(*v));
}

int store_node_beat(store_t *s, const node_info_t *n, int64_t now_ms, int *was_dead) {
  int dead = 0;
  if (was_dead) *was_dead = 0;
  if (!s || !n || !n->name || !*n->name) return -EINVAL;
  int rc = s->ops->node_beat(s, n, now_ms, &dead);
  if (!rc && was_dead) *was_dead = dead;
  return rc;
}

int store_nodes_list(store_t *s, node_list_t *out) {
  if (!s || !out) return -EINVAL;
  return s->ops->nodes_list(s, out);
}

int store_nodes_reap(store_t *s, const char *self, int64_t now_ms, int64_t timeout_ms,
                     job_list_t *lost) {
  if (!s || !self || !lost || timeout_ms <= 0) return -EINVAL;
  return s->ops->nodes_reap(s, self, now_ms, timeout_ms, lost);
}

int store_job_cancel_request(store_t *s, int64_t id, int64_t now_ms) {
  if (!s) return -EINVAL;
  return s->ops->job_cancel_request(s, id, now_ms);
}

int store_jobs_cancel_requested(store_t *s, const char *node, job_list_t *out) {
  if (!s || !node || !out) return -EINVAL;
  return s->ops->jobs_cancel_requested(s, node, out);
}

/* ---- eggs ---- */

int store_egg_put(store_t *s, const char *project, const char *version, const void *data,
                  size_t len, int64_t now_ms) {
  if (!s || !project || !version) return -EINVAL;
  return s->ops->egg_put(s, project, version, data, len, now_ms);
}

int store_egg_get(store_t *s, const char *project, const char *version, void **data,
                  size_t *len) {
  if (!s || !project || !version || !data || !len) return -EINVAL;
  *data = NULL;
  *len = 0;
  return s->ops->egg_get(s, project, version, data, len);
}

int store_eggs_list(store_t *s, egg_list_t *out) {
  if (!s || !out) return -EINVAL;
  return s->ops->eggs_list(s, out);
}

int store_egg_delete(store_t *s, const char *project, const char *version, int *count) {
  int n = 0;
  if (count) *count = 0;
  if (!s || !project) return -EINVAL;
  int rc = s->ops->egg_delete(s, project, version, &n);
  if (!rc && count) *count = n;
  return rc;
}


int store_shared(const store_t *s) { return s && s->ops->shared; }

/* ---- notifications ---- */

int store_notify(store_t *s, unsigned what) {
  if (!s) return -EINVAL;
  return s->ops->notify(s, what);
}

int store_watch_open(const char *url, store_watch_t **out, char *err, size_t errlen) {
  char scheme[32];
  const char *rest;
  if (err && errlen) err[0] = '\0';
  if (!out || !url) return -EINVAL;
  *out = NULL;
  if (store_parse_url(url, scheme, sizeof(scheme), &rest)) return -EINVAL;
  const struct store_ops *ops = store_backend(scheme);
  if (!ops) {
    snprintf(err, errlen, "unknown store URL scheme \"%s\"", scheme); /* the URL may hold a password */
    return -EINVAL;
  }
  return ops->watch_open(url, rest, out, err, errlen);
}

int store_watch_fd(store_watch_t *w) { return w ? w->fd(w) : -1; }

int store_watch_read(store_watch_t *w, unsigned *what) {
  if (!w || !what) return -EINVAL;
  return w->read(w, what);
}

void store_watch_close(store_watch_t *w) {
  if (w) w->close(w);
}
