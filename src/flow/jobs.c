/* A job's transitions and their events (flow/jobs.h). */
#include "flow/jobs.h"
#include "flow/multiproc.h"
#include "flow/health.h"
#include "flow/pause.h"
#include "flow/schedules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"
#include "error.h"
#include "log.h"

void jobs_resolve(const config_t *cfg, job_t *j) {
  if (j->timeout_ms <= 0) j->timeout_ms = clock_secs_ms(cfg->job_timeout);
  if (j->max_retries <= 0) j->max_retries = cfg->job_retries;
  if (j->retry_backoff_ms <= 0) j->retry_backoff_ms = clock_secs_ms(cfg->retry_backoff);
  if (j->attempt < 1) j->attempt = 1;
}

/* ---- events ---- */

/* The small description every event of a running or ended job carries;
 * NULL on allocation failure (the event is then recorded without data
 * rather than not at all). */
static json_t *event_data(const job_t *j, int exit_code, int term_signal) {
  json_t *d = json_pack("{s:s,s:s,s:s,s:i}", "project", j->project, "spider", j->spider,
                        "jobid", j->jobid, "attempt", j->attempt);
  if (!d) return NULL;
  json_object_set_new(d, "exit_code", exit_code >= 0 ? json_integer(exit_code) : json_null());
  json_object_set_new(d, "signal", term_signal ? json_integer(term_signal) : json_null());
  return d;
}

static int add_event(store_t *s, const char *type, const job_t *j, int64_t ts_ms,
                     json_t *data /* taken */) {
  /* A test run's events are no part of its schedule's history. */
  event_t e = {.type = (char *)type, .ts_ms = ts_ms, .schedule_id = j->test ? 0 : j->schedule_id,
               .job_id = j->id, .data = data};
  int rc = store_event_add(s, &e);
  json_decref(data);
  return rc;
}

/* ---- queued ---- */

/* The job's row and its job.queued event apart, so that a retry records
 * its job.retried between them (it names the new row's id). */
static int enqueue_insert(store_t *s, job_t *job, json_t *extra) {
  int rc = store_job_insert(s, job);
  if (rc) json_decref(extra);
  return rc;
}

static int enqueue_event(store_t *s, job_t *job, json_t *extra, flow_change_t *c) {
  json_t *d = json_pack("{s:s, s:s, s:s}", "project", job->project, "spider", job->spider,
                        "jobid", job->jobid);
  if (d && extra) json_object_update(d, extra);
  json_decref(extra);
  int rc = d ? add_event(s, "job.queued", job, job->created_ms, d) : -ENOMEM;
  if (!rc && c) {
    c->queued++;
    /* A job waiting out its backoff is claimed when its time comes (the
     * launcher's due timer), not now. */
    if (job->not_before_ms <= job->created_ms) c->dispatch = 1;
  }
  return rc;
}

static int after_settle(store_t *s, job_t *w, int64_t now_ms, flow_change_t *c, int depth);

int jobs_enqueue(store_t *s, job_t *job, json_t *extra, flow_change_t *c) {
  /* A job that waits for others is never due until their ends wake it. */
  if (job->after) job->not_before_ms = JOBS_AFTER_WAIT_MS;
  int rc = enqueue_insert(s, job, extra);
  if (!rc) rc = enqueue_event(s, job, extra, c);
  /* Those that ended already settle it now. */
  if (!rc && job->after) rc = after_settle(s, job, clock_wall_ms(), c, 0);
  return rc;
}

/* ---- waiting for other jobs (after) ---- */

#define AFTER_CHAIN_MAX 1000 /* jobs a cascade of cancels walks down */
#define AFTER_RETRIES_MAX 101 /* attempts of one job (retries are at most 100) */

/* A failed or lost attempt that was retried is not its job's outcome: *up
 * becomes its newest retry (the retry's row is written before the jobs
 * waiting for the attempt are settled: jobs_end, jobs_reaped). */
static int after_newest_attempt(store_t *s, job_t *up) {
  for (int hops = 0; hops <= AFTER_RETRIES_MAX; hops++) {
    if (up->state != JOB_FAILED && up->state != JOB_LOST) return 0;
    char next[256];
    if (job_retry_jobid(up->jobid, up->attempt + 1, next, sizeof(next))) return 0;
    job_list_t l = {0};
    job_filter_t f = {.project = up->project, .jobid = next, .limit = 1, .newest_first = 1};
    int rc = store_jobs_list(s, &f, &l);
    int found = !rc && l.n == 1 && l.v[0].retry_of == up->id;
    if (found) {
      job_release(up);
      *up = l.v[0];
      job_init(&l.v[0]);
    }
    job_list_release(&l);
    if (rc || !found) return rc;
  }
  return 0;
}

/* What w's upstream jobs say: *verdict 1 when all finished, 0 while one
 * has not ended (or a retry of it runs), -1 when one ended otherwise (its
 * job id and state in why, for the cancel's reason). */
static int after_verdict(store_t *s, const job_t *w, int *verdict, char *why, size_t len) {
  size_t i;
  json_t *v;
  *verdict = 1;
  json_array_foreach(w->after, i, v) {
    job_t up;
    int64_t id = json_integer_value(v);
    int rc = store_job_get(s, id, &up);
    if (rc == -ENOENT) { /* pruned from history: its outcome is unknown */
      snprintf(why, len, "upstream #%lld deleted", (long long)id);
      *verdict = -1;
      return 0;
    }
    if (!rc) rc = after_newest_attempt(s, &up);
    if (rc) {
      job_release(&up);
      return rc;
    }
    if (up.state == JOB_FAILED || up.state == JOB_CANCELLED || up.state == JOB_LOST) {
      snprintf(why, len, "upstream %s %s", up.jobid, job_state_name(up.state));
      *verdict = -1;
    } else if (up.state != JOB_FINISHED) {
      *verdict = 0;
    }
    job_release(&up);
    if (*verdict < 0) return 0;
  }
  return 0;
}

static int after_ended(store_t *s, int64_t id, int64_t now_ms, flow_change_t *c, int depth);

/* w cannot run: it is cancelled with why, and what waits for it in turn. */
static int after_cancel(store_t *s, job_t *w, const char *why, int64_t now_ms,
                        flow_change_t *c, int depth) {
  int n = 0;
  int rc = store_job_cancel_pending(s, w->project, w->jobid, now_ms, &n);
  if (rc || n == 0) return rc;
  w->state = JOB_CANCELLED;
  w->end_ms = now_ms;
  if (c) c->unqueued += n;
  rc = add_event(s, "job.cancelled", w, 0,
                 json_pack("{s:s, s:s, s:s, s:b, s:s}", "project", w->project, "spider",
                           w->spider, "jobid", w->jobid, "started", 0, "reason", why));
  return rc ? rc : after_ended(s, w->id, now_ms, c, depth + 1);
}

/* Releases or cancels waiting job w once its upstream jobs allow it. */
static int after_settle(store_t *s, job_t *w, int64_t now_ms, flow_change_t *c, int depth) {
  char why[320];
  int verdict;
  int rc = after_verdict(s, w, &verdict, why, sizeof(why));
  if (rc || verdict == 0) return rc;
  if (verdict < 0) return after_cancel(s, w, why, now_ms, c, depth);
  rc = store_job_wake(s, w->id, now_ms);
  if (rc == -ENOENT) return 0; /* not pending any more */
  if (!rc) w->not_before_ms = now_ms;
  if (!rc && c) c->dispatch = c->woken = 1;
  return rc;
}

/* Job id ended: the jobs waiting for it are settled. */
static int after_ended(store_t *s, int64_t id, int64_t now_ms, flow_change_t *c, int depth) {
  if (depth >= AFTER_CHAIN_MAX) {
    log_warn("launcher", "jobs waiting for job #%lld are left waiting: a chain of over %d jobs",
             (long long)id, AFTER_CHAIN_MAX);
    return 0;
  }
  job_list_t l = {0};
  int rc = store_jobs_waiting(s, id, &l);
  for (size_t i = 0; i < l.n && !rc; i++) rc = after_settle(s, &l.v[i], now_ms, c, depth);
  job_list_release(&l);
  return rc;
}

int jobs_after_ended(store_t *s, const job_t *j, int64_t now_ms, flow_change_t *c) {
  int rc = after_ended(s, j->id, now_ms, c, 0);
  /* A retry ended: what waits for the attempts before it is settled too. */
  int64_t prev = j->retry_of;
  for (int hops = 0; !rc && prev && hops < AFTER_RETRIES_MAX; hops++) {
    job_t a;
    if ((rc = store_job_get(s, prev, &a))) {
      job_release(&a);
      return rc == -ENOENT ? 0 : rc; /* pruned: nothing waits for it any more */
    }
    rc = after_ended(s, a.id, now_ms, c, 0);
    prev = a.retry_of;
    job_release(&a);
  }
  return rc;
}

int jobs_rerun(job_t *src, const char *jobid, job_t *out) {
  job_init(out);
  out->jobid = strdup(jobid);
  out->project = src->project;
  out->spider = src->spider;
  out->version = src->version;
  out->args = src->args ? src->args : json_object();
  out->settings = src->settings ? src->settings : json_object();
  out->priority = src->priority;
  out->meta = src->meta;
  out->test = src->test; /* a test run again: its limits are in its settings */
  out->state = JOB_PENDING;
  src->project = src->spider = src->version = NULL;
  src->args = src->settings = src->meta = NULL;
  job_release(src);
  return out->jobid && out->args && out->settings ? 0 : -ENOMEM;
}

static void random_jobid(char out[33]) {
  uint8_t b[16];
  if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
    uint64_t x = (uint64_t)clock_wall_ms() ^ ((uint64_t)(uintptr_t)out << 16);
    memcpy(b, &x, 8);
    memcpy(b + 8, &x, 8);
  }
  for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

int jobs_fire(store_t *s, const schedule_t *sc, const sched_run_t *r, const char *why,
              int64_t now_ms, int64_t *job_id, flow_change_t *c) {
  job_t j;
  char jobid[33];
  random_jobid(jobid);
  int rc = schedule_job(sc, jobid, now_ms, &j);
  if (!rc) rc = schedules_job_state(s, &j); /* the crawl starts from the last run's state */
  if (!rc)
    rc = jobs_enqueue(s, &j,
                      json_pack("{s:I, s:I, s:I, s:s?}", "run_id", (json_int_t)r->id, "due_ms",
                                (json_int_t)r->due_ms, "late_ms",
                                (json_int_t)(now_ms - r->fire_ms), "reason", why),
                      c);
  if (!rc) rc = store_run_end(s, r->id, RUN_FIRED, j.id, why, now_ms);
  if (!rc && job_id) *job_id = j.id;
  job_release(&j);
  return rc;
}

/* ---- cancelled ---- */

#define CANCEL_FAMILY_MAX 10000 /* descendants reached by one cancel */

int jobs_cancel_pending(store_t *s, const char *project, const char *jobid, int64_t now_ms,
                        int *count, flow_change_t *c) {
  job_list_t l = {0};
  job_filter_t f = {.project = project, .jobid = jobid,
                    .states = 1u << JOB_PENDING | 1u << JOB_PAUSED};
  int n = 0, rc = store_jobs_list(s, &f, &l);
  if (!rc) rc = store_job_cancel_pending(s, project, jobid, now_ms, &n);
  for (size_t i = 0; i < l.n && !rc; i++) {
    if (l.v[i].state == JOB_PAUSED) {
      rc = jobs_cancel_paused(s, &l.v[i], now_ms, c);
      if (!rc) (*count)++;
      continue;
    }
    rc = add_event(s, "job.cancelled", &l.v[i], 0,
                   json_pack("{s:s, s:s, s:s, s:b}", "project", l.v[i].project, "spider",
                             l.v[i].spider, "jobid", l.v[i].jobid, "started", 0));
  }
  /* The last child of a multi-process run that never started ends it. */
  for (size_t i = 0; i < l.n && !rc; i++)
    if (l.v[i].parent_id) rc = multiproc_settle(s, l.v[i].parent_id, now_ms, c);
  for (size_t i = 0; i < l.n && !rc; i++) rc = jobs_after_ended(s, &l.v[i], now_ms, c);
  job_list_release(&l);
  *count += n;
  if (!rc && c) c->unqueued += n;
  return rc;
}

/* Asks the node running j, when it is another node, to stop it: 1 when
 * asked, 0 when j is not running elsewhere. */
static int cancel_remote(store_t *s, const jobs_cancel_t *c, const job_t *j, int64_t now) {
  if (j->state != JOB_RUNNING || !j->node || !strcmp(j->node, c->node)) return 0;
  int rc = store_job_cancel_request(s, j->id, now);
  return rc == -ENOENT ? 0 : rc ? rc : 1;
}

int jobs_cancel(store_t *s, jobs_cancel_t *c, int64_t now_ms) {
  job_list_t family = {0};
  job_filter_t f = {.project = c->project, .jobid = c->jobid};
  int rc = store_jobs_list(s, &f, &family);
  if (!rc && !c->children_only)
    rc = jobs_cancel_pending(s, c->project, c->jobid, now_ms, &c->count, &c->change);
  /* Running on another node (a shared store): that node stops it. The job
   * itself stays as it is when only its children are stopped: it is only
   * where the walk begins. */
  for (size_t i = 0; i < family.n && !rc && !c->children_only; i++) {
    const job_t *j = &family.v[i];
    if (j->state == JOB_RUNNING && !j->node) {
      /* Running on no node, it has no process to stop: a backfill's parent
       * ends here; a multi-process run's parent ends with its last child
       * (multiproc_settle), stopped below. Either was running, and counts
       * as stopped (cancel.json's prevstate "running"). */
      if (!multiproc_is_parent(j))
        rc = jobs_end_idle(s, j, JOB_CANCELLED, now_ms, NULL, &c->change);
      if (!rc) c->remote++;
    } else if ((rc = cancel_remote(s, c, j, now_ms)) == 1) {
      c->remote++;
      rc = 0;
    } else if (!rc && j->state == JOB_RUNNING && j->node && !strcmp(j->node, c->node)) {
      c->here++;
    }
  }
  /* Breadth first over the family; `family` grows as children are found. */
  for (size_t i = 0; i < family.n && family.n < CANCEL_FAMILY_MAX && !rc; i++) {
    job_list_t kids = {0};
    job_filter_t kf = {.parent_id = family.v[i].id,
                       .states = 1u << JOB_PENDING | 1u << JOB_RUNNING};
    rc = store_jobs_list(s, &kf, &kids);
    for (size_t k = 0; k < kids.n && !rc; k++) {
      job_t *kid = &kids.v[k];
      if (kid->state == JOB_PENDING) {
        rc = jobs_cancel_pending(s, kid->project, kid->jobid, now_ms, &c->family, &c->change);
      } else if ((rc = cancel_remote(s, c, kid, now_ms)) == 1) {
        c->family_remote++;
        rc = 0;
      } else if (!rc) {
        job_t copy = {.project = strdup(kid->project), .jobid = strdup(kid->jobid)};
        rc = copy.project && copy.jobid ? job_list_append(&c->running, &copy, 1) : -ENOMEM;
        job_release(&copy);
      }
      if (!rc) rc = job_list_append(&family, kid, 1);
    }
    job_list_release(&kids);
  }
  job_list_release(&family);
  return rc;
}

/* ---- started ---- */

int jobs_started(store_t *s, const job_t *j, int pid, int64_t pid_start, int warm) {
  int rc = store_job_started(s, j->id, pid, pid_start);
  if (rc) return rc;
  json_t *d = event_data(j, -1, 0);
  if (d) {
    json_object_set_new(d, "pid", json_integer(pid));
    json_object_set_new(d, "start", json_string(warm ? "warm" : "cold"));
  }
  return add_event(s, "job.started", j, 0, d);
}

int jobs_adopted(store_t *s, int64_t id, int pid, int64_t pid_start) {
  return store_job_started(s, id, pid, pid_start);
}

/* ---- ended, and retried ---- */

static const char *end_event(job_state_t st) {
  switch (st) {
  case JOB_FINISHED: return "job.finished";
  case JOB_CANCELLED: return "job.cancelled";
  case JOB_LOST: return "job.lost";
  default: return "job.failed";
  }
}

int jobs_retry(store_t *s, const job_t *t, int64_t end_ms, int exit_code, int term_signal,
               uint32_t rnd, int64_t *retry_id, int64_t *not_before, flow_change_t *c) {
  char jobid[256];
  *retry_id = 0;
  int rc = job_retry_jobid(t->jobid, t->attempt + 1, jobid, sizeof(jobid));
  if (rc) return 0; /* no valid id can be made: the failure stands */
  job_t r;
  job_init(&r);
  r.jobid = strdup(jobid);
  r.project = strdup(t->project);
  r.spider = strdup(t->spider);
  r.version = t->version ? strdup(t->version) : NULL;
  r.args = json_incref(t->args);
  r.settings = json_incref(t->settings);
  r.meta = json_incref(t->meta); /* the same job, again: the same meta */
  /* The attempt that ended gave its key up in this transaction (jobs_end
   * finished it first), so the retry takes it over: no one can slip a
   * second job with the key in between. */
  r.unique_key = t->unique_key ? strdup(t->unique_key) : NULL;
  if (!r.jobid || !r.project || !r.spider || (t->version && !r.version) ||
      (t->unique_key && !r.unique_key)) {
    job_release(&r);
    return -ENOMEM;
  }
  r.priority = t->priority;
  r.state = JOB_PENDING;
  r.schedule_id = t->schedule_id;
  r.test = t->test;
  r.parent_id = t->parent_id;
  r.retry_of = t->id;
  r.attempt = t->attempt + 1;
  r.max_retries = t->max_retries;
  r.retry_backoff_ms = t->retry_backoff_ms;
  r.timeout_ms = t->timeout_ms;
  int64_t delay = job_retry_delay_ms(t->retry_backoff_ms, t->attempt, rnd);
  r.not_before_ms = end_ms + delay;
  rc = enqueue_insert(s, &r, NULL);
  if (rc == SPD_ECONFLICT) {
    /* Another live job holds the key (it cannot, unless the attempt
     * was not holding it): that job does the work; the failure stands
     * rather than the end going unrecorded. */
    log_warn("launcher", "job '%s' is not retried: job #%lld holds its unique key '%s'",
             t->jobid, (long long)r.id, r.unique_key);
    job_release(&r);
    return 0;
  }
  if (rc == 0) {
    json_t *d = event_data(t, exit_code, term_signal);
    if (d) {
      json_object_set_new(d, "retry_jobid", json_string(r.jobid));
      json_object_set_new(d, "retry_id", json_integer(r.id));
      json_object_set_new(d, "delay_ms", json_integer(delay));
    }
    rc = add_event(s, "job.retried", t, 0, d);
  }
  if (rc == 0) /* every job's timeline starts with its job.queued */
    rc = enqueue_event(s, &r, json_pack("{s:I, s:i}", "retry_of", (json_int_t)t->id, "attempt",
                                        r.attempt),
                       c);
  if (rc == 0) {
    *retry_id = r.id;
    if (not_before) *not_before = r.not_before_ms;
  }
  job_release(&r);
  return rc;
}

/* finished_to_keep: the history trimmed after an end, and the store's
 * count of ended jobs then, for the loop's (has_finished). */
static int end_trim(store_t *s, jobs_end_t *e) {
  int deleted = 0;
  if (e->keep <= 0) return 0;
  int rc = store_trim_finished(s, e->keep, &deleted);
  if (rc || deleted <= 0) return rc;
  int64_t counts[JOB_NSTATES];
  rc = store_job_counts(s, NULL, counts);
  if (rc) return rc;
  e->change.has_finished = 1;
  e->change.finished_count =
      counts[JOB_FINISHED] + counts[JOB_FAILED] + counts[JOB_CANCELLED] + counts[JOB_LOST];
  return 0;
}

/* The end's events: job.timeout when it timed out, its end event, then its
 * health's (jobs_end). */
static int end_events(store_t *s, jobs_end_t *e, const health_verdict_t *v) {
  const job_t *j = e->job;
  int rc;
  if (e->end_reason && !strcmp(e->end_reason, "timeout")) {
    json_t *d = event_data(j, e->exit_code, e->term_signal);
    if (d) json_object_set_new(d, "timeout_ms", json_integer(j->timeout_ms));
    if ((rc = add_event(s, "job.timeout", j, 0, d))) return rc;
  }
  json_t *d = event_data(j, e->exit_code, e->term_signal);
  if (d && e->end_reason) json_object_set_new(d, "reason", json_string(e->end_reason));
  if ((rc = add_event(s, end_event(e->state), j, 0, d))) return rc;
  return health_announce(s, j, e->end_ms, v, &e->change);
}

int jobs_end(store_t *s, jobs_end_t *e) {
  const job_t *j = e->job;
  e->retry_id = 0;
  if (e->state == JOB_PAUSED)
    return jobs_end_paused(s, j, e->end_ms, e->exit_code, e->term_signal, e->stats,
                           e->state_dir);
  /* Sampled once: a write the store pool repeats finds them there. */
  if (json_is_object(e->stats) && e->items_path && !json_object_get(e->stats, "item_fields")) {
    json_t *fields = health_item_fields(e->items_path);
    if (fields) json_object_set_new(e->stats, "item_fields", fields);
  }
  health_verdict_t v;
  int rc = health_rate(s, j, e->state, e->stats, e->end_ms, e->end_reason, &v);
  if (!rc) rc = store_job_finish(s, j->id, e->state, e->end_ms, e->exit_code, e->term_signal,
                                 e->stats);
  /* A limit's slot is free: nodes whose jobs wait on it claim again. */
  if (!rc && e->notify) rc = store_notify(s, STORE_NOTE_JOBS);
  if (!rc) rc = jobs_end_segment(s, j, e->state, e->end_ms, e->stats);
  if (!rc) rc = end_events(s, e, &v);
  health_verdict_release(&v);
  if (rc) return rc;
  if ((e->state == JOB_FAILED || e->state == JOB_LOST) && j->attempt <= j->max_retries)
    rc = jobs_retry(s, j, e->end_ms, e->exit_code, e->term_signal, e->rnd, &e->retry_id,
                    &e->retry_not_before, &e->change);
  /* After the retry: a job waiting for this one then waits for it. */
  if (!rc) rc = jobs_after_ended(s, j, e->end_ms, &e->change);
  if (!rc && j->parent_id) rc = multiproc_settle(s, j->parent_id, e->end_ms, &e->change);
  return rc ? rc : end_trim(s, e);
}

flow_change_t jobs_end_submitted(void) { return (flow_change_t){.finished = 1}; }

flow_change_t jobs_end_dropped(void) { return (flow_change_t){.finished = -1}; }

int jobs_still_ours(store_t *s, int64_t id, const char *node, int *ours) {
  job_t cur;
  int rc = store_job_get(s, id, &cur);
  *ours = !rc && cur.state == JOB_RUNNING && cur.node && !strcmp(cur.node, node);
  job_release(&cur);
  return rc == -ENOENT ? 0 : rc;
}

int jobs_reaped(store_t *s, const config_t *cfg, job_t *job, int64_t now_ms, uint32_t rnd,
                int64_t *retry_id, flow_change_t *c) {
  int64_t id = 0;
  jobs_resolve(cfg, job);
  /* Its node died, not the crawl: it runs again at once, and once even
   * with no retries configured. */
  job->retry_backoff_ms = 0;
  json_t *d = event_data(job, -1, 0);
  if (d) {
    json_object_set_new(d, "reason", json_string("node_dead"));
    if (job->node) json_object_set_new(d, "node", json_string(job->node));
  }
  int rc = add_event(s, "job.lost", job, 0, d);
  if (!rc && c) c->finished++;
  if (!rc && job->attempt <= (job->max_retries > 0 ? job->max_retries : 1))
    rc = jobs_retry(s, job, now_ms, -1, 0, rnd, &id, NULL, c);
  if (!rc) rc = jobs_after_ended(s, job, now_ms, c);
  if (!rc && job->parent_id) rc = multiproc_settle(s, job->parent_id, now_ms, c);
  if (retry_id) *retry_id = rc ? 0 : id;
  return rc;
}

int jobs_reap_nodes(store_t *s, const config_t *cfg, int64_t now_ms, int64_t timeout_ms,
                    uint32_t rnd, job_list_t *lost, int *retried, flow_change_t *c) {
  size_t from = lost->n;
  int rc = store_nodes_reap(s, cfg->node_name, now_ms, timeout_ms, lost);
  for (size_t i = from; i < lost->n && !rc; i++) {
    int64_t retry = 0;
    rc = jobs_reaped(s, cfg, &lost->v[i], now_ms, rnd + (uint32_t)i, &retry, c);
    if (!rc && retry) (*retried)++;
  }
  return rc;
}

int jobs_prune(store_t *s, const prune_rule_t *rules, size_t nrules, int keep_default,
               int64_t ended_before_ms, size_t max, job_list_t *deleted, flow_change_t *c) {
  size_t from = deleted->n;
  int rc = store_jobs_prune(s, rules, nrules, keep_default, ended_before_ms, max, deleted);
  for (size_t i = from; !rc && i < deleted->n; i++) {
    const job_t *d = &deleted->v[i];
    if (d->start_ms && job_state_final(d->state)) c->finished--;
  }
  return rc;
}

/* ---- files ---- */

static char *job_file(const char *dir, const char *project, const char *spider,
                      const char *jobid, const char *ext) {
  char *out = NULL;
  if (!dir || !*dir) return NULL;
  if (asprintf(&out, "%s/%s/%s/%s%s", dir, project, spider, jobid, ext) < 0) return NULL;
  return out;
}

char *jobs_log_path(const config_t *cfg, const char *project, const char *spider,
                    const char *jobid) {
  return job_file(cfg->logs_dir, project, spider, jobid, ".log");
}

char *jobs_items_path(const config_t *cfg, const char *project, const char *spider,
                      const char *jobid) {
  if (config_items_remote(cfg)) return NULL;
  return job_file(cfg->items_dir, project, spider, jobid, ".jl");
}

/* ---- a job with no process ends ---- */

int jobs_end_idle(store_t *s, const job_t *j, job_state_t state, int64_t now_ms, const char *why,
                  flow_change_t *c) {
  int rc = store_job_finish(s, j->id, state, now_ms, -1, 0, NULL);
  if (rc) return rc;
  json_t *d = event_data(j, -1, 0);
  if (d && why) json_object_set_new(d, "reason", json_string(why));
  rc = add_event(s, end_event(state), j, now_ms, d);
  if (!rc && c) c->finished++;
  if (!rc) rc = jobs_after_ended(s, j, now_ms, c);
  return rc;
}
