/* Schedule operations (create, get, list, update, delete, pause, resume,
 * run now, their runs) and the event log: parameters are checked here, each
 * change is made by flow/schedules.h in one store op (read, checked,
 * written, with its event), and what it did is applied on the loop
 * (flow_apply: the scheduler ticks at once). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "api/auth.h"
#include "api/jobs.h"
#include "api/projects.h"
#include "api/ops_impl.h"
#include "core/cron.h"
#include "core/limits.h"
#include "core/schedule.h"
#include "error.h"
#include "flow/schedules.h"

#define NEXT_RUNS 5
#define PAGE_DEFAULT 100

static json_t *iso_in(int64_t ms, const char *tz) {
  char buf[CRON_ISO_MAX];
  if (!ms || cron_format_iso(ms, tz, buf, sizeof(buf))) return json_null();
  return json_string(buf);
}

static json_t *seconds_or_null(int64_t ms) { return ms ? json_real(ms / 1000.0) : json_null(); }

/* A schedule as the API shows it, with its next fire times computed from
 * its definition (the materialised runs are under /runs). */
static json_t *render_schedule(const schedule_t *sc) {
  json_t *o = json_object();
  json_object_set_new(o, "id", json_integer(sc->id));
  json_object_set_new(o, "name", json_string(sc->name));
  json_object_set_new(o, "kind", json_string(sched_kind_name(sc->kind)));
  json_object_set_new(o, "cron", sc->kind == SCHED_CRON ? op_str_or_null(sc->expr) : json_null());
  json_object_set_new(o, "interval",
                      sc->kind == SCHED_INTERVAL ? json_real(sc->interval_ms / 1000.0) : json_null());
  json_object_set_new(o, "at", sc->kind == SCHED_ONCE ? iso_in(sc->once_ms, sc->tz) : json_null());
  json_object_set_new(o, "tz", json_string(sc->tz ? sc->tz : "UTC"));
  json_object_set_new(o, "start", iso_in(sc->start_ms, sc->tz));
  json_object_set_new(o, "end", iso_in(sc->end_ms, sc->tz));
  json_object_set_new(o, "jitter", seconds_or_null(sc->jitter_ms));
  json_object_set_new(o, "overlap", json_string(sched_overlap_name(sc->overlap)));
  json_object_set_new(o, "missed", json_string(sched_missed_name(sc->missed)));
  json_object_set_new(o, "catchup_max", json_integer(sc->catchup_max));
  json_object_set_new(o, "paused", json_boolean(sc->paused));
  json_object_set_new(o, "project", json_string(sc->project));
  json_object_set_new(o, "spider", json_string(sc->spider));
  json_object_set_new(o, "version", op_str_or_null(sc->version));
  json_object_set_new(o, "args", sc->args ? json_incref(sc->args) : json_object());
  json_object_set_new(o, "settings", sc->settings ? json_incref(sc->settings) : json_object());
  json_object_set_new(o, "priority", json_real(sc->priority));
  json_object_set_new(o, "timeout", seconds_or_null(sc->timeout_ms));
  json_object_set_new(o, "retries", json_integer(sc->max_retries));
  json_object_set_new(o, "retry_backoff", seconds_or_null(sc->retry_backoff_ms));
  json_object_set_new(o, "webhooks", sc->webhooks ? json_incref(sc->webhooks) : json_array());
  json_object_set_new(o, "created_at", op_iso_time(sc->created_ms));
  json_object_set_new(o, "updated_at", op_iso_time(sc->updated_ms));
  json_object_set_new(o, "last_due_at", op_iso_time(sc->last_due_ms));
  json_t *next = json_array();
  cron_spec_t spec;
  char err[256];
  if (!sc->paused && !schedule_compile(sc, &spec, err, sizeof(err))) {
    int64_t due[NEXT_RUNS];
    size_t n = 0;
    int64_t now = clock_wall_ms();
    if (!cron_between(&spec, now, CRON_MS_MAX, due, NEXT_RUNS, &n, NULL))
      for (size_t i = 0; i < n; i++) json_array_append_new(next, iso_in(due[i], sc->tz));
    cron_spec_release(&spec);
  }
  json_object_set_new(o, "next_runs", next);
  return o;
}

static json_t *render_run(const sched_run_t *r, const char *tz) {
  return json_pack("{s:I, s:I, s:o, s:I, s:o, s:I, s:s, s:o, s:o, s:o}", "id", (json_int_t)r->id,
                   "schedule_id", (json_int_t)r->schedule_id, "due", iso_in(r->due_ms, tz),
                   "due_ms", (json_int_t)r->due_ms, "fire", iso_in(r->fire_ms, tz), "fire_ms",
                   (json_int_t)r->fire_ms, "state", run_state_name(r->state), "job_id",
                   r->job_id ? json_integer(r->job_id) : json_null(), "done_at",
                   op_iso_time(r->done_ms), "reason", op_str_or_null(r->reason));
}

static json_t *render_event(const event_t *e) {
  return json_pack("{s:I, s:s, s:o, s:I, s:o, s:o, s:o}", "id", (json_int_t)e->id, "type",
                   e->type, "ts", op_iso_time(e->ts_ms), "ts_ms", (json_int_t)e->ts_ms,
                   "schedule_id", e->schedule_id ? json_integer(e->schedule_id) : json_null(),
                   "job_id", e->job_id ? json_integer(e->job_id) : json_null(), "data",
                   e->data ? json_incref(e->data) : json_null());
}

/* ---- schedules.preview ---- */

#define PREVIEW_DEFAULT 10
#define PREVIEW_MAX 100

/* Which parameter a message of schedules_apply_fields is about. */
static const char *preview_field(const op_call_t *c, const char *msg) {
  static const char *const order[] = {"start", "end", "tz", NULL};
  for (int i = 0; order[i]; i++) {
    char quoted[16];
    snprintf(quoted, sizeof(quoted), "'%s'", order[i]);
    if (!strncmp(msg, quoted, strlen(quoted))) return order[i];
  }
  if (!strncmp(msg, "unknown time zone", 17) || strstr(msg, "time zone")) return "tz";
  if (strstr(msg, "start is after end")) return "end";
  if (!strncmp(msg, "give exactly one", 16)) return "cron";
  if (op_json(c, "cron")) return "cron";
  if (op_json(c, "interval")) return "interval";
  return "at";
}

/* The next fire times of a timing not yet stored, in its own zone: the
 * same fields and checks as schedules.create (schedules_apply_fields), so
 * what a preview accepts, a create accepts. Pure computation: on the loop. */
void op_schedules_preview(op_call_t *c) {
  schedule_t sc;
  schedule_init(&sc);
  int64_t now = clock_wall_ms();
  sc.created_ms = now; /* an interval without start counts from its creation */
  char err[512];
  json_t *p = json_object();
  static const char *const keys[] = {"cron", "interval", "at", "tz", "start", "end", NULL};
  for (int i = 0; keys[i]; i++)
    if (op_json(c, keys[i])) json_object_set(p, keys[i], (json_t *)op_json(c, keys[i]));
  int rc = schedules_apply_fields(&sc, p, err, sizeof(err));
  json_decref(p);
  cron_spec_t spec;
  cron_spec_init(&spec);
  if (!rc) rc = schedule_compile(&sc, &spec, err, sizeof(err));
  if (rc) {
    schedule_release(&sc);
    cron_spec_release(&spec);
    if (rc == -ENOMEM) op_fail(c, rc, NULL, "out of memory");
    else op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", preview_field(c, err)), "%s", err);
    return;
  }
  size_t count = (size_t)op_int(c, "count", PREVIEW_DEFAULT), n = 0;
  int64_t due[PREVIEW_MAX];
  int more = 0;
  rc = cron_between(&spec, now, CRON_MS_MAX, due, count, &n, &more);
  cron_spec_release(&spec);
  if (rc) {
    schedule_release(&sc);
    op_fail(c, rc, NULL, "the fire times could not be computed: %s", spd_strerror(rc));
    return;
  }
  json_t *next = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(next, json_pack("{s:I,s:o,s:o}", "ms", (json_int_t)due[i], "time",
                                          iso_in(due[i], sc.tz), "utc", op_iso_time(due[i])));
  json_t *o = json_pack("{s:s,s:s,s:o,s:b}", "tz", sc.tz ? sc.tz : "UTC", "kind",
                        sched_kind_name(sc.kind), "next", next, "more", more);
  schedule_release(&sc);
  op_ok(c, o);
}

static int create_fn(store_t *s, void *arg);
static int update_fn(store_t *s, void *arg);
static void done_schedule(void *arg, int rc);
static void write_schedule(op_call_t *c, int (*fn)(store_t *, void *));

static void target_listed(void *ud, int rc, char *const *names, size_t n, const char *error) {
  op_call_t *c = ud;
  if (rc) {
    op_fail(c, SPD_ERUNNER, error ? json_pack("{s:s}", "stderr", error) : NULL,
            "the spiders of project '%s' could not be listed", c->job.project);
    return;
  }
  int found = 0;
  for (size_t i = 0; i < n && !found; i++) found = !strcmp(names[i], c->job.spider);
  if (!found) {
    op_fail(c, SPD_ENOSPIDER, json_pack("{s:s,s:s}", "project", c->job.project, "spider",
                                        c->job.spider),
            "spider '%s' not found in project '%s'", c->job.spider, c->job.project);
    return;
  }
  int create = !strcmp(c->def->name, "schedules.create");
  write_schedule(c, create ? create_fn : update_fn);
}

/* Checks, on the loop, that the project, version and spider the schedule
 * will run (c->job's) exist, then writes. */
static void check_target(op_call_t *c) {
  const char *project = c->job.project, *version = c->job.version;
  char *egg = NULL;
  int rc = api_egg_resolve(c->app, project, version, &egg);
  if (rc == SPD_ENOPROJECT)
    op_fail(c, rc, json_pack("{s:s}", "project", project), "project '%s' not found", project);
  else if (rc == SPD_ENOVERSION)
    op_fail(c, rc, json_pack("{s:s,s:s}", "project", project, "version", version),
            "version '%s' of project '%s' not found", version, project);
  else if (rc)
    op_fail(c, rc, NULL, "%s", spd_strerror(rc));
  else if ((rc = spiders_list(c->app->spiders, project, egg, version, target_listed, c)))
    op_fail(c, rc, NULL, "the spiders of project '%s' could not be listed: %s", project,
            spd_strerror(rc));
  free(egg);
}

static int copy_target(op_call_t *c, const char *project, const char *spider,
                       const char *version) {
  const char *p = op_str(c, "project"), *s = op_str(c, "spider"), *v = op_str(c, "version");
  c->job.project = strdup(p ? p : project);
  c->job.spider = strdup(s ? s : spider);
  c->job.version = (v || version) ? strdup(v ? v : version) : NULL;
  return c->job.project && c->job.spider && (!(v || version) || c->job.version) ? 0 : -ENOMEM;
}

/* ---- the store side ---- */

/* c->num[0]: the schedule's id once known; c->result: the rendered
 * schedule; c->err: why it failed; c->priv: the flow_change_t of a write. */
static int find_schedule(store_t *s, op_call_t *c, schedule_t *sc) {
  int rc = schedules_find(s, op_str(c, "schedule"), c->who->projects, sc, c->err,
                          sizeof(c->err));
  if (!rc) c->num[0] = sc->id;
  return rc;
}

static void done_schedule(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    op_fail(c, rc, NULL, "%s", c->err[0] ? c->err : spd_strerror(rc));
    return;
  }
  if (c->priv) flow_apply(&c->app->flow, c->priv);
  op_ok_result(c);
}

/* Submits the change fn makes (a flow/schedules.h call), with a
 * flow_change_t for it in c->priv. */
static void write_schedule(op_call_t *c, int (*fn)(store_t *, void *)) {
  if (!c->priv && !(c->priv = calloc(1, sizeof(flow_change_t)))) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  c->priv_free = free;
  op_store(c, STORE_WRITE, fn, done_schedule);
}

/* Renders the schedule a change left (taken) into c->result. */
static int rendered(op_call_t *c, schedule_t *sc) {
  c->num[0] = sc->id;
  c->result = render_schedule(sc);
  schedule_release(sc);
  return c->result ? 0 : -ENOMEM;
}

static int create_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_t sc;
  int rc = schedules_create(s, c->params, &sc, c->err, sizeof(c->err), c->priv);
  return rc ? rc : rendered(c, &sc);
}

/* A schedule's args carry its jobs' resource limits (_memory_limit, ...):
 * a bad one is refused now rather than failing every job it fires. */
static int bad_limits(op_call_t *c) {
  char why[256];
  job_limits_t lim;
  if (!limits_resolve(op_json(c, "args"), NULL, &lim, why, sizeof(why))) return 0;
  op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "args"), "%s", why);
  return 1;
}

void op_schedules_create(op_call_t *c) {
  if (op_check_pairs(c, "args") || op_check_pairs(c, "settings") || bad_limits(c)) return;
  if (copy_target(c, NULL, NULL, NULL)) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  check_target(c);
}

static int update_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_t sc;
  int rc = schedules_update(s, op_str(c, "schedule"), c->who->projects, c->params,
                            clock_wall_ms(), &sc, c->err, sizeof(c->err), c->priv);
  return rc ? rc : rendered(c, &sc);
}

/* The project, spider and version an update leaves the schedule with. */
static int target_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_t sc;
  int rc = find_schedule(s, c, &sc);
  if (!rc) rc = copy_target(c, sc.project, sc.spider, sc.version);
  schedule_release(&sc);
  return rc;
}

static void target_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc)
    done_schedule(c, rc);
  else
    check_target(c);
}

void op_schedules_update(op_call_t *c) {
  if (op_check_pairs(c, "args") || op_check_pairs(c, "settings") || bad_limits(c)) return;
  if (op_str(c, "project") || op_str(c, "spider") || op_str(c, "version"))
    op_store(c, STORE_READ, target_fn, target_done);
  else
    write_schedule(c, update_fn);
}

static int pause_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_t sc;
  int rc = schedules_pause(s, op_str(c, "schedule"), c->who->projects,
                           !strcmp(c->def->name, "schedules.pause"), clock_wall_ms(), &sc,
                           c->err, sizeof(c->err), c->priv);
  return rc ? rc : rendered(c, &sc);
}

void op_schedules_pause(op_call_t *c) { write_schedule(c, pause_fn); }

static int delete_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  return schedules_delete(s, op_str(c, "schedule"), c->who->projects, c->err, sizeof(c->err),
                          c->priv);
}

void op_schedules_delete(op_call_t *c) { write_schedule(c, delete_fn); }

static int get_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_t sc;
  int rc = find_schedule(s, c, &sc);
  if (!rc) c->result = render_schedule(&sc);
  schedule_release(&sc);
  return rc;
}

void op_schedules_get(op_call_t *c) { op_store(c, STORE_READ, get_fn, done_schedule); }

/* num[1] after id, num[2] limit. */
static int list_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_list_t l = {0};
  int rc = store_schedules_list(s, c->num[1], (size_t)c->num[2] + 1, &l);
  if (rc) return rc;
  json_t *arr = json_array();
  size_t n = l.n > (size_t)c->num[2] ? (size_t)c->num[2] : l.n;
  for (size_t i = 0; i < n; i++)
    if (principal_project_ok(c->who->projects, l.v[i].project))
      json_array_append_new(arr, render_schedule(&l.v[i]));
  json_t *next = json_null();
  if (l.n > n) {
    char cur[24];
    op_cursor_encode(l.v[n - 1].id, 0x5c4ed, cur);
    next = json_string(cur);
  }
  c->result = json_pack("{s:o, s:o}", "schedules", arr, "next_cursor", next);
  schedule_list_release(&l);
  return 0;
}

/* Reads limit and cursor into num[2] and num[1]; 0 or 1 (failed). */
static int page_params(op_call_t *c, uint32_t fingerprint) {
  c->num[2] = op_int(c, "limit", PAGE_DEFAULT);
  const char *cursor = op_str(c, "cursor");
  uint32_t fp = 0;
  if (cursor && (op_cursor_decode(cursor, &c->num[1], &fp) || fp != fingerprint)) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "cursor"),
            "'cursor' is not a cursor of this listing");
    return 1;
  }
  return 0;
}

void op_schedules_list(op_call_t *c) {
  if (!page_params(c, 0x5c4ed)) op_store(c, STORE_READ, list_fn, done_schedule);
}

/* ---- runs ---- */

static uint32_t runs_fingerprint(const char *schedule, unsigned states) {
  uint32_t h = 2166136261u ^ states;
  for (const char *p = schedule; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
  return h;
}

/* num[1] the last due time shown (cursor), num[2] limit, num[3] states,
 * num[4] from, num[5] to. Runs are paged by due time: it is unique per
 * schedule and the listing's order. */
static int runs_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_t sc;
  int rc = find_schedule(s, c, &sc);
  if (rc) return rc;
  sched_run_list_t l = {0};
  run_filter_t f = {.schedule_id = sc.id, .states = (unsigned)c->num[3], .from_ms = c->num[4],
                    .to_ms = c->num[5], .limit = (size_t)c->num[2] + 1};
  if (c->num[1] && c->num[1] + 1 > f.from_ms) f.from_ms = c->num[1] + 1;
  rc = store_runs_list(s, &f, &l);
  if (!rc) {
    json_t *arr = json_array();
    size_t n = l.n > (size_t)c->num[2] ? (size_t)c->num[2] : l.n;
    for (size_t i = 0; i < n; i++) json_array_append_new(arr, render_run(&l.v[i], sc.tz));
    json_t *next = json_null();
    if (l.n > n) {
      char cur[24];
      op_cursor_encode(l.v[n - 1].due_ms, runs_fingerprint(op_str(c, "schedule"), f.states), cur);
      next = json_string(cur);
    }
    c->result = json_pack("{s:o, s:o}", "runs", arr, "next_cursor", next);
  }
  sched_run_list_release(&l);
  schedule_release(&sc);
  return rc;
}

void op_schedules_runs(op_call_t *c) {
  unsigned states = 0;
  size_t i;
  json_t *v;
  json_array_foreach(op_json(c, "state"), i, v) {
    run_state_t st;
    if (run_state_parse(json_string_value(v), &st)) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "state"),
              "unknown run state '%s' (expected upcoming, fired, missed or skipped)",
              json_string_value(v));
      return;
    }
    states |= 1u << st;
  }
  c->num[3] = states;
  char err[256];
  const char *from = op_str(c, "from"), *to = op_str(c, "to");
  if ((from && cron_parse_iso(from, NULL, &c->num[4], err, sizeof(err))) ||
      (to && cron_parse_iso(to, NULL, &c->num[5], err, sizeof(err)))) {
    op_fail(c, SPD_EBADPARAM, NULL, "%s", err);
    return;
  }
  if (!page_params(c, runs_fingerprint(op_str(c, "schedule"), states)))
    op_store(c, STORE_READ, runs_fn, done_schedule);
}

/* ---- run now ---- */

static void run_enqueued(void *ud, int rc, int stage, const char *error_text) {
  op_call_t *c = ud;
  if (stage == API_JOB_SPIDER)
    op_fail(c, SPD_ENOSPIDER, json_pack("{s:s}", "spider", c->job.spider),
            "spider '%s' not found", c->job.spider);
  else if (rc)
    op_fail(c, rc, NULL, "%s", error_text ? error_text : spd_strerror(rc));
  else
    op_ok(c, op_render_job(&c->job));
}

static void run_found(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    done_schedule(c, rc);
    return;
  }
  char *egg = NULL;
  rc = api_egg_resolve(c->app, c->job.project, c->job.version, &egg);
  if (!rc) rc = api_job_enqueue(c->app, &c->job, egg, run_enqueued, c, c->who);
  free(egg);
  if (rc) op_fail(c, rc, NULL, "cannot queue the run: %s", spd_strerror(rc));
}

static int run_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_t sc;
  int rc = find_schedule(s, c, &sc);
  if (!rc) {
    rc = schedule_job(&sc, c->text, clock_wall_ms(), &c->job);
    if (!rc && json_object_get(c->params, "priority"))
      c->job.priority = op_num(c, "priority", 0);
  }
  schedule_release(&sc);
  return rc;
}

void op_schedules_run(op_call_t *c) {
  char jobid[33];
  api_uuid1_hex(c->app, jobid); /* on the loop: it keeps the daemon's uuid state */
  if (!(c->text = strdup(jobid))) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  op_store(c, STORE_READ, run_fn, run_found);
}

/* ---- events ---- */

/* Oldest first by default, a cursor to poll forward (next_after). Newest
 * first (order=desc) is how a console opens: the latest page, then older
 * pages through next_before, and next_after (the newest id seen) to follow
 * from there; next_before is null once a page comes back short. */
static int events_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  event_list_t l = {0};
  event_filter_t f = {.after_id = op_int(c, "after", 0), .type_prefix = op_str(c, "type"),
                      .schedule_id = op_int(c, "schedule", 0), .job_id = op_int(c, "job", 0),
                      .limit = (size_t)op_int(c, "limit", PAGE_DEFAULT),
                      .before_id = op_int(c, "before", 0), .newest_first = (int)c->num[0]};
  int rc = store_events_list(s, &f, &l);
  if (rc) return rc;
  json_t *arr = json_array();
  for (size_t i = 0; i < l.n; i++)
    if (auth_event_visible(c->who, &l.v[i])) json_array_append_new(arr, render_event(&l.v[i]));
  if (f.newest_first)
    c->result = json_pack("{s:o, s:I, s:o}", "events", arr, "next_after",
                          (json_int_t)(l.n ? l.v[0].id : f.after_id), "next_before",
                          l.n && l.n == f.limit ? json_integer(l.v[l.n - 1].id) : json_null());
  else
    c->result = json_pack("{s:o, s:I}", "events", arr, "next_after",
                          (json_int_t)(l.n ? l.v[l.n - 1].id : f.after_id));
  event_list_release(&l);
  return c->result ? 0 : -ENOMEM;
}

void op_events_list(op_call_t *c) {
  const char *order = op_str(c, "order");
  if (order && strcmp(order, "asc") && strcmp(order, "desc")) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "order"),
            "'order' must be asc or desc, not '%.64s'", order);
    return;
  }
  c->num[0] = order && !strcmp(order, "desc");
  op_store(c, STORE_READ, events_fn, done_schedule);
}
