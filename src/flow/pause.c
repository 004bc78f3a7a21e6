/* Pausing and resuming a job (flow/pause.h). */
#include "flow/pause.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/event.h"
#include "flow/pausestate.h"
#include "error.h"

static int add_event(store_t *s, const char *type, const job_t *j, json_t *data /* taken */) {
  event_t e = {.type = (char *)type, .schedule_id = j->schedule_id, .job_id = j->id,
               .data = data};
  int rc = store_event_add(s, &e);
  json_decref(data);
  return rc;
}

static json_t *event_data(const job_t *j) {
  return json_pack("{s:s, s:s, s:s, s:i}", "project", j->project, "spider", j->spider, "jobid",
                   j->jobid, "attempt", j->attempt);
}

/* The newest entry of project + jobid in a state of mask, into *out. */
static int find(store_t *s, const jobs_pause_t *p, unsigned mask, job_t *out) {
  job_list_t l = {0};
  job_filter_t f = {.project = p->project, .jobid = p->jobid, .states = mask};
  int rc = store_jobs_list(s, &f, &l);
  if (rc) return rc;
  if (!l.n) {
    job_list_release(&l);
    return -ENOENT;
  }
  size_t best = 0;
  for (size_t i = 1; i < l.n; i++)
    if (l.v[i].id > l.v[best].id) best = i;
  *out = l.v[best];
  job_init(&l.v[best]);
  job_list_release(&l);
  return 0;
}

int jobs_pause(store_t *s, jobs_pause_t *p, int64_t now_ms) {
  job_release(&p->job);
  p->here = p->already = p->remote = 0;
  p->why[0] = '\0';
  int rc = find(s, p, 1u << JOB_RUNNING, &p->job);
  if (rc == 0) {
    if (p->job.node && strcmp(p->job.node, p->node)) {
      /* Its node hears it as it hears a cancel (run/cluster.c). */
      rc = store_job_cancel_request(s, p->job.id, -(now_ms > 0 ? now_ms : 1));
      p->remote = rc == 0;
      return rc == -ENOENT ? 0 : rc; /* it ended meanwhile: nothing to pause */
    }
    p->here = 1;
    return 0;
  }
  if (rc != -ENOENT) return rc;
  if ((rc = find(s, p, 1u << JOB_PAUSED, &p->job)) == 0) {
    p->already = 1;
    return 0;
  }
  if (rc != -ENOENT) return rc;
  if ((rc = find(s, p, 0, &p->job)) == 0) {
    snprintf(p->why, sizeof(p->why), "job '%s' is %s: only a running job can be paused",
             p->jobid, job_state_name(p->job.state));
    return SPD_ECONFLICT;
  }
  return rc;
}

int jobs_resume(store_t *s, jobs_pause_t *p, int64_t now_ms) {
  (void)now_ms;
  job_release(&p->job);
  p->already = 0;
  p->why[0] = '\0';
  p->change = (flow_change_t){0};
  int rc = find(s, p, 1u << JOB_PAUSED, &p->job);
  if (rc == -ENOENT) {
    if ((rc = find(s, p, 0, &p->job))) return rc;
    if (p->job.state == JOB_PENDING || p->job.state == JOB_RUNNING) {
      p->already = 1;
      return 0;
    }
    snprintf(p->why, sizeof(p->why), "job '%s' is %s: only a paused job can be resumed",
             p->jobid, job_state_name(p->job.state));
    return SPD_ECONFLICT;
  }
  if (rc) return rc;
  if ((rc = store_job_resume(s, p->job.id))) return rc;
  if ((rc = add_event(s, EV_JOB_RESUMED, &p->job, event_data(&p->job)))) return rc;
  p->job.state = JOB_PENDING;
  p->change.queued = 1;
  p->change.dispatch = 1;
  return 0;
}

json_t *jobs_segments_add(const job_t *j, int64_t end_ms, const json_t *stats,
                          const char *reason) {
  json_t *a = json_is_array(j->segments) ? json_deep_copy(j->segments) : json_array();
  /* The runner's summary ("items"), else Scrapy's own counter. */
  json_t *items = json_object_get(stats, "items");
  if (!json_is_integer(items)) items = json_object_get(stats, "item_scraped_count");
  json_t *seg = json_pack("{s:s?, s:o, s:o, s:I, s:s}", "node", j->node, "started",
                          job_time_json(j->start_ms), "ended", job_time_json(end_ms), "items",
                          (json_int_t)(json_is_integer(items) ? json_integer_value(items) : 0),
                          "reason", reason);
  if (!a || !seg || json_array_append_new(a, seg)) {
    json_decref(a);
    return NULL;
  }
  return a;
}

int jobs_end_paused(store_t *s, const job_t *j, int64_t end_ms, int exit_code, int term_signal,
                    const json_t *stats, const char *state_dir) {
  int rc = 0;
  if (state_dir && store_shared(s) && (rc = pausestate_save(s, j->id, state_dir, end_ms)))
    return rc;
  rc = store_job_finish(s, j->id, JOB_PAUSED, end_ms, exit_code, term_signal, stats);
  json_t *segs = rc ? NULL : jobs_segments_add(j, end_ms, stats, "paused");
  if (!rc && !segs) rc = -ENOMEM;
  if (!rc) rc = store_job_set_segments(s, j->id, segs);
  if (!rc) {
    json_t *d = event_data(j);
    if (d) json_object_set(d, "segments", segs);
    rc = add_event(s, EV_JOB_PAUSED, j, d);
  }
  json_decref(segs);
  return rc;
}

int jobs_end_segment(store_t *s, const job_t *j, job_state_t state, int64_t end_ms,
                     const json_t *stats) {
  if (!json_is_array(j->segments)) return 0;
  json_t *segs = jobs_segments_add(j, end_ms, stats, job_state_name(state));
  int rc = segs ? store_job_set_segments(s, j->id, segs) : -ENOMEM;
  json_decref(segs);
  return rc ? rc : pausestate_drop(s, j->id);
}

int jobs_cancel_paused(store_t *s, const job_t *j, int64_t now_ms, flow_change_t *c) {
  int rc = store_job_finish(s, j->id, JOB_CANCELLED, now_ms, j->exit_code, j->term_signal,
                            j->stats);
  if (!rc) rc = pausestate_drop(s, j->id);
  if (!rc) {
    json_t *d = json_pack("{s:s, s:s, s:s, s:b, s:b}", "project", j->project, "spider",
                          j->spider, "jobid", j->jobid, "started", 1, "paused", 1);
    rc = add_event(s, EV_JOB_CANCELLED, j, d);
  }
  if (!rc && c) c->finished++;
  return rc;
}
