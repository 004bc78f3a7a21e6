/* jobs.stats: per project, spider or schedule, over a window of end times,
 * the runs by state, the success rate, durations and items. The store
 * computes the figures (store_job_stats); this parses and renders. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ops_impl.h"
#include "clock.h"
#include "error.h"
#include "flow/accounts.h"
#include "store/store.h"

#define STATS_DEFAULT_MS (7 * 24 * 3600 * 1000LL)

static const char *const stats_by_names[JOB_STATS_NBY] = {"project", "spider", "schedule",
                                                          "account"};

/* priv the job_stats_t; num[0] from, num[1] to, num[2] by. */
static int stats_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  job_stats_query_t q = {.project = op_str(c, "project"),
                         .spider = op_str(c, "spider"),
                         .schedule_id = op_int(c, "schedule", 0),
                         .from_ms = c->num[0],
                         .to_ms = c->num[1],
                         .account = op_str(c, "account"),
                         .by = (job_stats_by_t)c->num[2]};
  json_t *doc = NULL;
  int rc = q.account || q.by == JOB_STATS_BY_ACCOUNT ? accounts_load(s, &doc) : 0;
  q.accounts = doc;
  if (!rc && q.account && !json_object_get(doc, q.account)) {
    snprintf(c->err, sizeof(c->err), "no account '%.64s'", q.account);
    rc = SPD_ENOACCOUNT;
  }
  if (!rc && (q.project || !c->nmine)) rc = store_job_stats(s, &q, c->priv);
  /* a caller limited to projects: theirs, one after the other */
  for (size_t i = 0; !rc && !q.project && i < c->nmine; i++) {
    q.project = c->mine[i];
    rc = store_job_stats(s, &q, c->priv);
    q.project = NULL;
  }
  json_decref(doc);
  return rc;
}

static json_t *stats_group_json(const job_stats_group_t *g, job_stats_by_t by) {
  json_t *runs = json_object();
  for (int st = JOB_FINISHED; st <= JOB_LOST; st++) /* the final states */
    json_object_set_new(runs, job_state_name((job_state_t)st), json_integer(g->runs[st]));
  json_t *o = json_object();
  if (by == JOB_STATS_BY_SCHEDULE) {
    json_object_set_new(o, "schedule", json_integer(g->schedule_id));
  } else if (by == JOB_STATS_BY_ACCOUNT) {
    json_object_set_new(o, "account", *g->account ? json_string(g->account) : json_null());
  } else {
    json_object_set_new(o, "project", json_string(g->project));
    if (by == JOB_STATS_BY_SPIDER) json_object_set_new(o, "spider", json_string(g->spider));
  }
  json_object_set_new(o, "runs", runs);
  json_object_set_new(o, "ended", json_integer(g->ended));
  json_object_set_new(o, "success_rate",
                      json_real(g->ended ? (double)g->runs[JOB_FINISHED] / (double)g->ended : 0));
  json_object_set_new(o, "duration_ms",
                      json_pack("{s:I,s:I,s:I}", "p50", (json_int_t)g->dur_p50_ms, "p95",
                                (json_int_t)g->dur_p95_ms, "max", (json_int_t)g->dur_max_ms));
  json_object_set_new(o, "items",
                      json_pack("{s:I,s:f}", "total", (json_int_t)g->items, "per_run",
                                g->ended ? (double)g->items / (double)g->ended : 0.0));
  json_object_set_new(o, "last_success",
                      g->last_success_ms ? json_integer(g->last_success_ms) : json_null());
  json_object_set_new(o, "last_success_time",
                      g->last_success_ms ? op_iso_time(g->last_success_ms) : json_null());
  return o;
}

static void stats_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    op_fail(c, rc, NULL, "%s", c->err[0] ? c->err : spd_strerror(rc));
    return;
  }
  const job_stats_t *st = c->priv;
  job_stats_by_t by = (job_stats_by_t)c->num[2];
  json_t *groups = json_array();
  for (size_t i = 0; i < st->n; i++) json_array_append_new(groups, stats_group_json(&st->v[i], by));
  long long sid = op_int(c, "schedule", 0);
  json_t *sched = sid ? json_integer(sid) : json_null();
  op_ok(c, json_pack("{s:I,s:I,s:o,s:o,s:s,s:o,s:o,s:o,s:I,s:o}", "from",
                     (json_int_t)c->num[0], "to", (json_int_t)c->num[1], "from_time",
                     op_iso_time(c->num[0]), "to_time", op_iso_time(c->num[1]), "by",
                     stats_by_names[by], "project", op_str_or_null(op_str(c, "project")),
                     "spider", op_str_or_null(op_str(c, "spider")), "schedule", sched,
                     "scanned", (json_int_t)st->scanned, "groups", groups));
}

static void stats_free(void *p) {
  job_stats_release(p);
  free(p);
}

void op_jobs_stats(op_call_t *c) {
  int64_t now = clock_wall_ms(), from, to;
  if (op_time_param(c, "to", now, &to)) return;
  int64_t dflt = to - STATS_DEFAULT_MS;
  if (op_time_param(c, "from", dflt < 0 ? 0 : dflt, &from)) return;
  if (from >= to) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "from"), "'from' must be before 'to'");
    return;
  }
  const char *by = op_str(c, "by");
  int k = 0;
  if (by) {
    for (k = 0; k < JOB_STATS_NBY && strcmp(by, stats_by_names[k]) != 0; k++) {
    }
    if (k == JOB_STATS_NBY) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "by"),
              "unknown grouping '%s' (expected project, spider, schedule or account)", by);
      return;
    }
  }
  c->priv = calloc(1, sizeof(job_stats_t));
  if (!c->priv) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  c->priv_free = stats_free;
  c->num[0] = from;
  c->num[1] = to;
  c->num[2] = k;
  op_store(c, STORE_READ, stats_fn, stats_done);
}
