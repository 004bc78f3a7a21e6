/* jobs.multiprocess and jobs.add_urls: one crawl split over several
 * processes sharing one frontier queue (flow/multiproc.h, docs/queues.md
 * "Multi-process runs"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/ops_impl.h"
#include "api/projects.h"
#include "api/spiders.h"
#include "clock.h"
#include "core/limits.h"
#include "error.h"
#include "flow/multiproc.h"

/* The run being made: the seed URLs as the call gave them (borrowed from
 * c->params), the children, and what the store op did. */
typedef struct mp_run {
  const char **urls;
  size_t nurls;
  job_list_t kids;
  int64_t added;
  flow_change_t change;
} mp_run_t;

static void mp_free(void *p) {
  mp_run_t *r = p;
  job_list_release(&r->kids);
  free(r->urls);
  free(r);
}

/* ---- the URLs ---- */

/* Why url cannot be a seed, or NULL: an http(s) URL without spaces or
 * control characters, of at most MULTIPROC_URL_MAX bytes. */
static const char *url_bad(const char *url) {
  size_t n = strlen(url);
  if (!n || n > MULTIPROC_URL_MAX) return "must have 1 to 8192 bytes";
  if (strncasecmp(url, "http://", 7) && strncasecmp(url, "https://", 8))
    return "must start with http:// or https://";
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f)
      return "must not hold spaces or control characters";
  return NULL;
}

/* The "urls" parameter (an array of strings, or one string) into *out
 * (pointers into c->params); 1 after failing c. */
static int urls_param(op_call_t *c, const char ***out, size_t *n) {
  const json_t *v = op_json(c, "urls");
  size_t count = json_is_array(v) ? json_array_size(v) : json_is_string(v) ? 1 : 0;
  *out = NULL;
  *n = 0;
  if ((!json_is_array(v) && !json_is_string(v)) || !count || count > MULTIPROC_URLS_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "urls"),
            "urls must be a URL or an array of 1 to %d URLs", MULTIPROC_URLS_MAX);
    return 1;
  }
  const char **u = calloc(count, sizeof(*u));
  if (!u) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return 1;
  }
  for (size_t i = 0; i < count; i++) {
    const json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
    const char *why = json_is_string(e) ? url_bad(json_string_value(e)) : "must be a string";
    if (why) {
      free(u);
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s, s:I}", "field", "urls", "index", (json_int_t)i),
              "urls[%zu] %s", i, why);
      return 1;
    }
    u[i] = json_string_value(e);
  }
  *out = u;
  *n = count;
  return 0;
}

/* ---- jobs.multiprocess ---- */

static void start_done(void *arg, int rc) {
  op_call_t *c = arg;
  mp_run_t *r = c->priv;
  if (op_store_failed(c, rc)) return;
  flow_apply(&c->app->flow, &r->change);
  json_t *o = op_render_job(&c->job);
  json_t *kids = json_array();
  for (size_t i = 0; kids && i < r->kids.n; i++)
    json_array_append_new(kids, json_pack("{s:I, s:s}", "id", (json_int_t)r->kids.v[i].id,
                                           "jobid", r->kids.v[i].jobid));
  json_object_set_new(o, "processes", kids ? kids : json_null());
  json_object_set(o, "queue", json_object_get(c->job.settings, "SPIDERD_QUEUE"));
  json_object_set_new(o, "seeded", json_integer(r->added));
  op_ok(c, o);
}

static int start_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  mp_run_t *r = c->priv;
  r->change = (flow_change_t){0};
  return multiproc_start(s, &c->job, &r->kids, r->urls, r->nurls, c->job.start_ms, &r->added,
                         &r->change);
}

/* One child: the parent's crawl, pending, with its own job id. */
static int kid_make(op_call_t *c, job_t *k) {
  char jobid[33];
  api_uuid1_hex(c->app, jobid);
  job_init(k);
  k->jobid = strdup(jobid);
  k->project = strdup(c->job.project);
  k->spider = strdup(c->job.spider);
  k->version = c->job.version ? strdup(c->job.version) : NULL;
  k->args = json_deep_copy(c->job.args);
  k->settings = json_deep_copy(c->job.settings);
  k->meta = c->job.meta ? json_deep_copy(c->job.meta) : NULL;
  k->priority = c->job.priority;
  k->state = JOB_PENDING;
  return k->jobid && k->project && k->spider && (!c->job.version || k->version) && k->args &&
                 k->settings && (!c->job.meta || k->meta)
             ? 0
             : -ENOMEM;
}

static void start_listed(void *ud, int rc, char *const *names, size_t n, const char *error) {
  op_call_t *c = ud;
  mp_run_t *r = c->priv;
  if (op_spider_listed(c, rc, names, n, error)) return;
  size_t nk = (size_t)op_int(c, "processes", 1);
  r->kids.v = calloc(nk, sizeof(job_t));
  rc = r->kids.v ? 0 : -ENOMEM;
  for (size_t i = 0; !rc && i < nk; i++, r->kids.n++) rc = kid_make(c, &r->kids.v[i]);
  if (rc) {
    op_fail(c, rc, NULL, "out of memory");
    return;
  }
  op_store(c, STORE_WRITE, start_fn, start_done);
}

/* The settings every process of the run crawls with: the caller's, and
 * spiderd's scheduler over the run's queues. 1 after failing c. */
static int run_settings(op_call_t *c, json_t *set) {
  static const char *const own[] = {"SPIDERD_QUEUE", "SPIDERD_DUPEFILTER_QUEUE"};
  for (size_t i = 0; i < 2; i++)
    if (json_object_get(set, own[i])) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s, s:s}", "field", "settings", "setting", own[i]),
              "a multi-process run names its own queues: remove setting %s", own[i]);
      return 1;
    }
  char q[MULTIPROC_QUEUE_NAME_MAX], seen[MULTIPROC_QUEUE_NAME_MAX + 8];
  multiproc_queue_name(c->job.jobid, q, sizeof(q));
  snprintf(seen, sizeof(seen), "%s.seen", q);
  int bad = json_object_set_new(set, "SPIDERD_QUEUE", json_string(q)) ||
            json_object_set_new(set, "SPIDERD_DUPEFILTER_QUEUE", json_string(seen));
  if (!json_object_get(set, "SCHEDULER"))
    bad |= json_object_set_new(set, "SCHEDULER", json_string("spiderd.scrapy.Scheduler"));
  if (!json_object_get(set, "DUPEFILTER_CLASS"))
    bad |= json_object_set_new(set, "DUPEFILTER_CLASS", json_string("spiderd.scrapy.DupeFilter"));
  if (bad) op_fail(c, -ENOMEM, NULL, "out of memory");
  return bad;
}

/* The parent: running from now, on no node (it runs no process). 1 after
 * failing c. */
static int parent_make(op_call_t *c) {
  char jobid[33];
  api_uuid1_hex(c->app, jobid);
  const char *version = op_str(c, "version");
  const json_t *args = op_json(c, "args"), *settings = op_json(c, "settings");
  job_t *j = &c->job;
  j->jobid = strdup(jobid);
  j->project = strdup(op_str(c, "project"));
  j->spider = strdup(op_str(c, "spider"));
  j->version = version ? strdup(version) : NULL;
  j->args = args ? json_deep_copy(args) : json_object();
  j->settings = settings ? json_deep_copy(settings) : json_object();
  j->priority = op_num(c, "priority", 0);
  j->state = JOB_RUNNING;
  j->created_ms = j->start_ms = clock_wall_ms();
  if (op_meta_param(c, &j->meta)) return 1;
  if (!j->jobid || !j->project || !j->spider || (version && !j->version) || !j->args ||
      !j->settings) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return 1;
  }
  return run_settings(c, j->settings);
}

/* What jobs.create checks too: the args, settings and egg. 1 after failing c. */
static int check_crawl(op_call_t *c) {
  const char *project = op_str(c, "project"), *version = op_str(c, "version");
  char why[256];
  job_limits_t lim;
  if (op_check_pairs(c, "args") || op_check_pairs(c, "settings")) return 1;
  if (limits_resolve(op_json(c, "args"), NULL, &lim, why, sizeof(why))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "args"), "%s", why);
    return 1;
  }
  int rc = api_egg_resolve(c->app, project, version, &c->egg_path);
  if (rc == SPD_ENOPROJECT)
    op_fail(c, rc, json_pack("{s:s}", "project", project), "project '%s' not found", project);
  else if (rc == SPD_ENOVERSION)
    op_fail(c, rc, json_pack("{s:s,s:s}", "project", project, "version", version),
            "version '%s' of project '%s' not found", version, project);
  else if (rc)
    op_fail(c, rc, NULL, "%s", spd_strerror(rc));
  return rc != 0;
}

void op_jobs_multiprocess(op_call_t *c) {
  mp_run_t *r = calloc(1, sizeof(*r));
  if (!r) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  c->priv = r;
  c->priv_free = mp_free;
  if (urls_param(c, &r->urls, &r->nurls) || check_crawl(c) || parent_make(c)) return;
  int rc = spiders_list(c->app->spiders, c->job.project, c->egg_path, c->job.version,
                        start_listed, c);
  if (rc)
    op_fail(c, SPD_ERUNNER, NULL, "the runner could not be started: %s", spd_strerror(rc));
}

/* ---- jobs.add_urls ---- */

static int add_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  mp_run_t *r = c->priv;
  int rc = op_job_resolve(s, c);
  if (rc == SPD_ENOJOB || rc == SPD_ECONFLICT) {
    c->num[0] = rc; /* answered by op_fail_resolve */
    return 0;
  }
  if (rc) return rc;
  int64_t id = c->job.id;
  job_release(&c->job);
  rc = multiproc_add(s, id, r->urls, r->nurls, clock_wall_ms(), &c->job, &r->added);
  /* Refusals are answers, not failures: nothing was written. */
  if (rc == SPD_EBADPARAM || rc == SPD_ECONFLICT) {
    c->num[1] = rc;
    rc = 0;
  }
  return rc;
}

static void add_done(void *arg, int rc) {
  op_call_t *c = arg;
  mp_run_t *r = c->priv;
  if (op_store_failed(c, rc)) return;
  if (c->num[0]) {
    op_fail_resolve(c, (int)c->num[0]);
    return;
  }
  json_t *id = json_pack("{s:I, s:s}", "id", (json_int_t)c->job.id, "state",
                         job_state_name(c->job.state));
  if (c->num[1] == SPD_EBADPARAM)
    op_fail(c, SPD_EBADPARAM, id, "job %lld is not a multi-process run (jobs.multiprocess)",
            (long long)c->job.id);
  else if (c->num[1] == SPD_ECONFLICT)
    op_fail(c, SPD_ECONFLICT, id,
            "multi-process run %lld has ended (%s): its queue is gone, start a new run",
            (long long)c->job.id, job_state_name(c->job.state));
  else {
    json_decref(id);
    op_ok(c, json_pack("{s:I, s:I, s:I, s:O?}", "id", (json_int_t)c->job.id, "urls",
                       (json_int_t)r->nurls, "added", (json_int_t)r->added, "queue",
                       json_object_get(c->job.settings, "SPIDERD_QUEUE")));
  }
}

void op_jobs_add_urls(op_call_t *c) {
  mp_run_t *r = calloc(1, sizeof(*r));
  if (!r) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  c->priv = r;
  c->priv_free = mp_free;
  if (urls_param(c, &r->urls, &r->nurls)) return;
  op_store(c, STORE_WRITE, add_fn, add_done);
}
