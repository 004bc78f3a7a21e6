/* jobs.test_run: a run now, flagged test, that stops at the limits its
 * request gives (items, pages, seconds). A test run is a job like any
 * other (listed, shown, cancelled, its log and items read), but it counts
 * in no statistics and in no schedule's history (store.h, job_filter_t's
 * test). It is either a job's fields, as jobs.create takes them, or a
 * schedule's template (run as the schedule would, its args, settings and
 * meta overlaid with the request's).
 *
 * The limits become Scrapy's close-spider settings, which end the crawl
 * as finished with the reason in its stats; a command project's spider
 * gets them in SPIDERD_SETTINGS too, and the seconds as its hard timeout. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/ops_impl.h"
#include "api/projects.h"
#include "clock.h"
#include "core/limits.h"
#include "error.h"
#include "flow/schedules.h"
#include "store/marchive.h"

#define TEST_SECONDS_MAX (7 * 24 * 3600.0)
/* A Scrapy test run closes itself at its seconds; the hard timeout is a
 * backstop this much later, for a crawl that does not close. */
#define TEST_GRACE_MS (60 * 1000)

/* The request's limits and the Scrapy settings they become. */
static const struct {
  const char *param, *setting;
} test_limits[] = {
    {"items", "CLOSESPIDER_ITEMCOUNT"},
    {"pages", "CLOSESPIDER_PAGECOUNT"},
    {"seconds", "CLOSESPIDER_TIMEOUT"},
};
#define NLIMITS (sizeof(test_limits) / sizeof(test_limits[0]))

/* A limit given twice (a parameter and the setting it becomes) is
 * refused: one of the two would be silently lost. 1 after failing c. */
static int limits_invalid(op_call_t *c) {
  const json_t *settings = op_json(c, "settings");
  for (size_t i = 0; i < NLIMITS; i++) {
    if (op_json(c, test_limits[i].param) && json_object_get(settings, test_limits[i].setting)) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", test_limits[i].param),
              "give '%s' or settings.%s, not both", test_limits[i].param,
              test_limits[i].setting);
      return 1;
    }
  }
  double secs = op_num(c, "seconds", 1);
  if (!isfinite(secs) || secs <= 0 || secs > TEST_SECONDS_MAX) {
    op_fail(c, SPD_EBADPARAM,
            json_pack("{s:s,s:f}", "field", "seconds", "max", TEST_SECONDS_MAX),
            "'seconds' must be a number of seconds > 0 and at most %.0f", TEST_SECONDS_MAX);
    return 1;
  }
  return 0;
}

/* The limits as settings of c->job, and the seconds as its hard timeout
 * (a command project's spider has no Scrapy to close it). */
static int limits_apply(op_call_t *c) {
  job_t *j = &c->job;
  for (size_t i = 0; i < NLIMITS; i++) {
    const json_t *v = op_json(c, test_limits[i].param);
    char text[64];
    if (!v) continue;
    if (json_is_integer(v)) snprintf(text, sizeof(text), "%lld", (long long)json_integer_value(v));
    else snprintf(text, sizeof(text), "%.17g", json_number_value(v));
    if (json_object_set_new(j->settings, test_limits[i].setting, json_string(text))) return -ENOMEM;
  }
  if (!op_json(c, "seconds")) return 0;
  int64_t ms = (int64_t)ceil(op_num(c, "seconds", 0) * 1000.0);
  int command = c->egg_path && marchive_kind_file(c->egg_path) == MARCHIVE_MANIFEST;
  if (!command) ms += TEST_GRACE_MS;
  /* A shorter timeout, the schedule's or the daemon's, still applies. */
  int64_t dflt = j->timeout_ms > 0 ? j->timeout_ms : clock_secs_ms(c->app->cfg.job_timeout);
  if (dflt <= 0 || ms < dflt) j->timeout_ms = ms;
  return 0;
}

/* c->job is filled (project, spider, template): its egg, job id, limits,
 * and the queue. */
static void test_start(op_call_t *c) {
  job_t *j = &c->job;
  char why[256];
  job_limits_t lim; /* _memory_limit and the like: checked now, used at launch */
  if (limits_resolve(j->args, NULL, &lim, why, sizeof(why))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "args"), "%s", why);
    return;
  }
  if (op_job_egg(c, j->project, j->version)) return;
  const char *jobid = op_str(c, "jobid");
  char generated[33];
  if (!jobid) api_uuid1_hex(c->app, generated);
  free(j->jobid);
  j->jobid = strdup(jobid ? jobid : generated);
  j->state = JOB_PENDING;
  j->test = 1;
  if (!j->jobid || limits_apply(c)) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  op_job_submit(c);
}

/* The request's args, settings and meta over the template's (a key the
 * request gives wins), and its priority. 1 after failing c. */
static int overlay(op_call_t *c) {
  job_t *j = &c->job;
  const json_t *args = op_json(c, "args"), *settings = op_json(c, "settings");
  json_t *meta = NULL;
  if (op_meta_param(c, &meta)) return 1;
  if (!j->args) j->args = json_object();
  if (!j->settings) j->settings = json_object();
  if (meta && !j->meta) j->meta = json_object();
  int rc = !j->args || !j->settings || (meta && !j->meta);
  if (!rc && args) rc = json_object_update(j->args, (json_t *)args);
  if (!rc && settings) rc = json_object_update(j->settings, (json_t *)settings);
  if (!rc && meta) rc = json_object_update(j->meta, meta);
  json_decref(meta);
  if (op_json(c, "priority")) j->priority = op_num(c, "priority", 0);
  if (!rc && j->meta && json_dumpb(j->meta, NULL, 0, JSON_COMPACT) > JOB_META_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:i}", "field", "meta", "max", JOB_META_MAX),
            "the schedule's meta and 'meta' together are over %d bytes", JOB_META_MAX);
    return 1;
  }
  if (rc) op_fail(c, -ENOMEM, NULL, "out of memory");
  return rc;
}

/* The schedule's job template, with the scraper state its next run would
 * start from (a test run reads it; it never hands one on). */
static int sched_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_t sc;
  int rc = schedules_find(s, op_str(c, "schedule"), c->who->projects, &sc, c->err,
                          sizeof(c->err));
  if (rc) return rc;
  rc = schedule_job(&sc, "-", clock_wall_ms(), &c->job);
  schedule_release(&sc);
  if (!rc) rc = schedules_job_state(s, &c->job);
  return rc;
}

static void sched_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc == SPD_ENOSCHEDULE) {
    op_fail(c, rc, json_pack("{s:s}", "schedule", op_str(c, "schedule")), "%s", c->err);
    return;
  }
  if (op_store_failed(c, rc)) return;
  c->job.created_ms = 0; /* the store's clock, when it is queued */
  if (!overlay(c)) test_start(c);
}

void op_jobs_test_run(op_call_t *c) {
  const char *schedule = op_str(c, "schedule");
  const char *project = op_str(c, "project"), *spider = op_str(c, "spider");
  if (schedule && (project || spider || op_str(c, "version"))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "schedule"),
            "give 'schedule', or 'project' and 'spider': a schedule's test run is of its "
            "own project, spider and version");
    return;
  }
  if (!schedule && (!project || !spider)) {
    const char *missing = project ? "spider" : "project";
    op_fail(c, SPD_EMISSING, json_pack("{s:s}", "field", missing),
            "'%s' is required (or 'schedule', to test a schedule's run)", missing);
    return;
  }
  if (op_check_pairs(c, "args") || op_check_pairs(c, "settings") || limits_invalid(c)) return;
  if (schedule) {
    op_store(c, STORE_READ, sched_fn, sched_done);
    return;
  }
  job_t *j = &c->job;
  const char *version = op_str(c, "version");
  j->project = strdup(project);
  j->spider = strdup(spider);
  j->version = version ? strdup(version) : NULL;
  if (!j->project || !j->spider || (version && !j->version)) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  if (!overlay(c)) test_start(c);
}
