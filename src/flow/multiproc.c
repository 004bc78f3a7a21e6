/* Multi-process runs (flow/multiproc.h). */
#include "flow/multiproc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "flow/jobs.h"
#include "flow/queues.h"

#define SEEN_SUFFIX ".seen"

void multiproc_queue_name(const char *jobid, char *out, size_t cap) {
  snprintf(out, cap, "multiprocess-%s", jobid);
}

static const char *setting(const job_t *j, const char *name) {
  return json_string_value(json_object_get(j->settings, name));
}

/* A backfill's parent also runs on no node: the frontier named after the
 * job tells a multi-process run's apart. */
int multiproc_is_parent(const job_t *j) {
  char want[128];
  const char *frontier = setting(j, "SPIDERD_QUEUE");
  if (!j->start_ms || j->node || !frontier || !j->jobid) return 0;
  multiproc_queue_name(j->jobid, want, sizeof(want));
  return !strcmp(frontier, want);
}

static int add_event(store_t *s, const char *type, const job_t *j, int64_t ts_ms,
                     json_t *data /* taken */) {
  if (!data) return -ENOMEM;
  event_t e = {.type = (char *)type, .ts_ms = ts_ms, .job_id = j->id, .data = data};
  int rc = store_event_add(s, &e);
  json_decref(data);
  return rc;
}

/* Puts urls into queue `name` (an element already there stays as it is:
 * a URL is crawled once whatever its seeds). */
static int put_urls(store_t *s, const char *name, const char *const *urls, size_t n,
                    int64_t now_ms, int64_t *added) {
  *added = 0;
  if (!n) return 0;
  queue_put_t *items = calloc(n, sizeof(*items));
  if (!items) return -ENOMEM;
  for (size_t i = 0; i < n; i++)
    items[i] = (queue_put_t){.element = urls[i], .len = strlen(urls[i]),
                             .due_ms = now_ms, .policy = QPOLICY_KEEP_EXISTING};
  int rc = store_queue_put(s, name, items, n, now_ms);
  for (size_t i = 0; !rc && i < n; i++) *added += items[i].result == QPUT_ADDED;
  free(items);
  return rc;
}

/* The frontier and the seen set, made anew (a run's queues hold nothing
 * of another's). */
static int make_queues(store_t *s, const char *frontier, const char *seen) {
  int rc = store_queue_delete(s, frontier);
  if (rc == -ENOENT) rc = 0;
  if (!rc) rc = store_queue_delete(s, seen);
  if (rc == -ENOENT) rc = 0;
  queues_settings_t fs = {0};
  if (!rc) rc = queues_set(s, frontier, &fs, NULL);
  queues_settings_t ss = {.given = QUEUES_PAUSED | QUEUES_KEEP_DONE,
                          .v = {.paused = 1, .keep_done = 1}};
  if (!rc) rc = queues_set(s, seen, &ss, NULL);
  return rc;
}

int multiproc_start(store_t *s, job_t *parent, job_list_t *kids, const char *const *urls,
                    size_t nurls, int64_t now_ms, int64_t *added, flow_change_t *c) {
  const char *frontier = setting(parent, "SPIDERD_QUEUE");
  const char *seen = setting(parent, "SPIDERD_DUPEFILTER_QUEUE");
  if (!frontier || !seen || !multiproc_is_parent(parent)) return -EINVAL;
  int rc = store_job_insert(s, parent);
  json_t *d = json_pack("{s:s, s:s, s:s, s:i, s:s}", "project", parent->project, "spider",
                        parent->spider, "jobid", parent->jobid, "processes", (int)kids->n,
                        "queue", frontier);
  if (!rc) rc = add_event(s, "job.queued", parent, parent->created_ms, json_incref(d));
  if (!rc) rc = add_event(s, "job.started", parent, now_ms, json_incref(d));
  json_decref(d);
  if (!rc) rc = make_queues(s, frontier, seen);
  if (!rc) rc = put_urls(s, frontier, urls, nurls, now_ms, added);
  for (size_t i = 0; !rc && i < kids->n; i++) {
    kids->v[i].parent_id = parent->id;
    rc = jobs_enqueue(s, &kids->v[i],
                      json_pack("{s:I, s:s}", "parent", (json_int_t)parent->id, "queue", frontier),
                      c);
  }
  return rc;
}

int multiproc_add(store_t *s, int64_t id, const char *const *urls, size_t n, int64_t now_ms,
                  job_t *parent, int64_t *added) {
  *added = 0;
  int rc = store_job_get(s, id, parent);
  if (rc) return rc;
  const char *frontier = setting(parent, "SPIDERD_QUEUE");
  if (!multiproc_is_parent(parent) || !frontier) return SPD_EBADPARAM;
  /* The row lock (an update; SQLite and Redis serialise writes anyway):
   * the parent's end waits for this put, or this put sees the end. */
  rc = parent->state == JOB_RUNNING ? store_job_heartbeat(s, id, now_ms) : -ENOENT;
  if (rc) return rc == -ENOENT ? SPD_ECONFLICT : rc;
  return put_urls(s, frontier, urls, n, now_ms, added);
}

/* ---- the end ---- */

/* Is kids->v[i] an attempt that a later one retried? */
static int superseded(const job_list_t *kids, size_t i) {
  for (size_t k = 0; k < kids->n; k++)
    if (kids->v[k].retry_of == kids->v[i].id) return 1;
  return 0;
}

/* A child's item count as its runner wrote it (spiderd_runner/stats.py). */
static json_int_t kid_items(const job_t *k) {
  json_t *v = json_object_get(k->stats, "items");
  return json_is_integer(v) ? json_integer_value(v) : 0;
}

/* The parent's state from its children's last attempts, and their counts
 * and items in stats (under "children": the statistics count items where
 * a crawl scraped them, not twice); -EAGAIN (nothing to do yet) while one
 * waits or runs. */
static int derive(const job_list_t *kids, json_t *stats, job_state_t *st) {
  int64_t n[JOB_NSTATES] = {0};
  json_int_t items = 0;
  for (size_t i = 0; i < kids->n; i++) {
    const job_t *k = &kids->v[i];
    if (!job_state_final(k->state)) return -EAGAIN;
    if (superseded(kids, i)) continue;
    n[k->state]++;
    items += kid_items(k);
  }
  *st = n[JOB_CANCELLED] ? JOB_CANCELLED
        : n[JOB_FAILED] || n[JOB_LOST] ? JOB_FAILED
                                        : JOB_FINISHED;
  json_t *ch = json_pack("{s:I, s:I, s:I, s:I, s:I}", "finished", (json_int_t)n[JOB_FINISHED],
                         "failed", (json_int_t)n[JOB_FAILED], "cancelled",
                         (json_int_t)n[JOB_CANCELLED], "lost", (json_int_t)n[JOB_LOST], "items",
                         items);
  return ch && !json_object_set_new(stats, "children", ch) ? 0 : -ENOMEM;
}

static const char *end_event(job_state_t st) {
  return st == JOB_FINISHED ? "job.finished" : st == JOB_CANCELLED ? "job.cancelled" : "job.failed";
}

static int drop_queue(store_t *s, const char *name) {
  if (!name) return 0;
  int rc = queues_delete(s, name);
  return rc == -ENOENT ? 0 : rc;
}

static int settle_end(store_t *s, const job_t *p, const job_list_t *kids, int64_t now_ms,
                      flow_change_t *c) {
  json_t *stats = json_object();
  job_state_t st = JOB_FINISHED;
  int rc = stats ? derive(kids, stats, &st) : -ENOMEM;
  if (!rc) rc = store_job_finish(s, p->id, st, now_ms, -1, 0, stats);
  if (!rc)
    rc = add_event(s, end_event(st), p, now_ms,
                   json_pack("{s:s, s:s, s:s, s:s, s:O}", "project", p->project, "spider",
                             p->spider, "jobid", p->jobid, "reason", "children", "children",
                             json_object_get(stats, "children")));
  json_decref(stats);
  if (!rc && c) c->finished++;
  if (!rc) rc = drop_queue(s, setting(p, "SPIDERD_QUEUE"));
  if (!rc) rc = drop_queue(s, setting(p, "SPIDERD_DUPEFILTER_QUEUE"));
  return rc == -EAGAIN ? 0 : rc;
}

int multiproc_settle(store_t *s, int64_t parent_id, int64_t now_ms, flow_change_t *c) {
  job_t p;
  job_list_t kids = {0};
  int rc = store_job_get(s, parent_id, &p);
  if (rc || !multiproc_is_parent(&p) || p.state != JOB_RUNNING) goto out;
  /* The row lock: of two children ending at once on two nodes, the second
   * to take it sees the first's end and ends the parent. */
  rc = store_job_heartbeat(s, parent_id, now_ms);
  job_filter_t f = {.parent_id = parent_id};
  if (!rc) rc = store_jobs_list(s, &f, &kids);
  if (!rc) rc = settle_end(s, &p, &kids, now_ms, c);
out:
  job_list_release(&kids);
  job_release(&p);
  return rc == -ENOENT ? 0 : rc;
}
