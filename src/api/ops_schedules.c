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
#include "core/account.h"
#include "flow/accounts.h"
#include "api/ops_impl.h"
#include "core/cron.h"
#include "core/limits.h"
#include "core/schedule.h"
#include "error.h"
#include "flow/calendars.h"
#include "flow/schedules.h"

#define NEXT_RUNS 5
#define PAGE_DEFAULT 100

static json_t *iso_in(int64_t ms, const char *tz) {
  char buf[CRON_ISO_MAX];
  if (!ms || cron_format_iso(ms, tz, buf, sizeof(buf))) return json_null();
  return json_string(buf);
}

static json_t *seconds_or_null(int64_t ms) { return ms ? json_real(ms / 1000.0) : json_null(); }

/* The next NEXT_RUNS due times after now outside the schedule's calendars,
 * as ISO times in its zone. */
static json_t *next_runs(const schedule_t *sc, const calendar_set_t *cals) {
  json_t *next = json_array();
  cron_spec_t spec;
  char err[256];
  if (sc->paused || schedule_compile(sc, &spec, err, sizeof(err))) return next;
  int64_t due = clock_wall_ms();
  /* A calendar may hold many due times in a row: looked at, at most 500. */
  for (int tries = 0; json_array_size(next) < NEXT_RUNS && tries < 500; tries++) {
    if (cron_next(&spec, due, &due) || due > CRON_MS_MAX) break;
    if (!calendar_set_covers(cals, due)) json_array_append_new(next, iso_in(due, sc->tz));
  }
  cron_spec_release(&spec);
  return next;
}

/* A schedule as the API shows it, with its next fire times computed from
 * its definition (the materialised runs are under /runs), outside the
 * calendars it refers to (in cal_doc, flow/calendars.h; NULL = none). */
static json_t *render_schedule(const schedule_t *sc, const json_t *cal_doc) {
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
  json_object_set_new(o, "meta", sc->meta ? json_incref(sc->meta) : json_object());
  json_object_set_new(o, "created_at", op_iso_time(sc->created_ms));
  json_object_set_new(o, "updated_at", op_iso_time(sc->updated_ms));
  json_object_set_new(o, "last_due_at", op_iso_time(sc->last_due_ms));
  calendar_set_t cals = {0};
  json_object_set_new(o, "calendars", cal_doc ? calendars_names(cal_doc, sc->id) : json_array());
  if (cal_doc) (void)calendars_set(cal_doc, sc->id, &cals); /* none on ENOMEM: shown, not skipped */
  json_object_set_new(o, "next_runs", next_runs(sc, &cals));
  calendar_set_release(&cals);
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
  if (op_spider_listed(c, rc, names, n, error)) return;
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

/* render_schedule with the note of its pause (who paused it, why, when),
 * read from the store: on a store thread. */
static json_t *render_schedule_noted(store_t *s, const schedule_t *sc, const json_t *cals) {
  json_t *o = render_schedule(sc, cals), *note = NULL;
  if (o && sc->paused && schedules_pause_note(s, sc->id, &note) == 0 && note)
    json_object_set_new(o, "pause_note", note);
  else if (o)
    json_object_set_new(o, "pause_note", json_null());
  return o;
}

/* Renders the schedule a change left (taken) into c->result. */
static int rendered(store_t *s, op_call_t *c, schedule_t *sc) {
  json_t *doc = NULL;
  int rc = calendars_doc(s, &doc);
  c->num[0] = sc->id;
  if (!rc) c->result = render_schedule_noted(s, sc, doc);
  json_decref(doc);
  schedule_release(sc);
  return rc ? rc : c->result ? 0 : -ENOMEM;
}

static int create_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_t sc;
  int rc = schedules_create(s, c->params, &sc, c->err, sizeof(c->err), c->priv);
  return rc ? rc : rendered(s, c, &sc);
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

/* The meta each job of the schedule starts with: an object as jobs.create
 * takes it (or its text from a form), null to clear it; written back as
 * the object for the flow. 1 after failing c. */
static int bad_meta(op_call_t *c) {
  const json_t *v = op_json(c, "meta");
  json_t *m = NULL;
  if (!v || json_is_null(v)) return 0;
  if (op_meta_param(c, &m)) return 1;
  json_object_set_new(c->params, "meta", m);
  return 0;
}

void op_schedules_create(op_call_t *c) {
  if (op_check_pairs(c, "args") || op_check_pairs(c, "settings") || bad_limits(c) ||
      bad_meta(c))
    return;
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
  return rc ? rc : rendered(s, c, &sc);
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
  if (op_check_pairs(c, "args") || op_check_pairs(c, "settings") || bad_limits(c) ||
      bad_meta(c))
    return;
  if (op_str(c, "project") || op_str(c, "spider") || op_str(c, "version"))
    op_store(c, STORE_READ, target_fn, target_done);
  else
    write_schedule(c, update_fn);
}

static int pause_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_t sc;
  int pause = !strcmp(c->def->name, "schedules.pause");
  const char *note = op_str(c, "note");
  int rc = schedules_pause_noted(s, op_str(c, "schedule"), c->who->projects, pause,
                                 pause ? c->who->actor : NULL, note && *note ? note : NULL,
                                 clock_wall_ms(), &sc, c->err, sizeof(c->err), c->priv);
  return rc ? rc : rendered(s, c, &sc);
}

/* The longest pause note, in bytes. */
#define PAUSE_NOTE_MAX 1000

void op_schedules_pause(op_call_t *c) {
  const char *note = op_str(c, "note");
  if (note && strlen(note) > PAUSE_NOTE_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:i}", "field", "note", "max", PAUSE_NOTE_MAX),
            "'note' is %zu bytes; the limit is %d", strlen(note), PAUSE_NOTE_MAX);
    return;
  }
  write_schedule(c, pause_fn);
}

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
  if (!rc) return rendered(s, c, &sc);
  schedule_release(&sc);
  return rc;
}

void op_schedules_get(op_call_t *c) { op_store(c, STORE_READ, get_fn, done_schedule); }

/* num[1] after id, num[2] limit. */
static int list_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_list_t l = {0};
  json_t *doc = NULL;
  int rc = store_schedules_list(s, c->num[1], (size_t)c->num[2] + 1, &l);
  if (!rc) rc = calendars_doc(s, &doc);
  if (rc) {
    schedule_list_release(&l);
    return rc;
  }
  json_t *arr = json_array();
  size_t n = l.n > (size_t)c->num[2] ? (size_t)c->num[2] : l.n;
  for (size_t i = 0; i < n; i++)
    if (principal_project_ok(c->who->projects, l.v[i].project))
      json_array_append_new(arr, render_schedule_noted(s, &l.v[i], doc));
  json_decref(doc);
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
  calendar_set_t cals = {0};
  rc = store_runs_list(s, &f, &l);
  /* An upcoming run in one of its calendars will be skipped: not planned. */
  if (!rc) rc = calendars_load(s, sc.id, &cals);
  if (!rc) {
    json_t *arr = json_array();
    size_t n = l.n > (size_t)c->num[2] ? (size_t)c->num[2] : l.n;
    for (size_t i = 0; i < n; i++)
      if (l.v[i].state != RUN_UPCOMING || !calendar_set_covers(&cals, l.v[i].due_ms))
        json_array_append_new(arr, render_run(&l.v[i], sc.tz));
    json_t *next = json_null();
    if (l.n > n) {
      char cur[24];
      op_cursor_encode(l.v[n - 1].due_ms, runs_fingerprint(op_str(c, "schedule"), f.states), cur);
      next = json_string(cur);
    }
    c->result = json_pack("{s:o, s:o}", "runs", arr, "next_cursor", next);
  }
  calendar_set_release(&cals);
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

/* ---- upcoming runs over the whole horizon, missed runs ----
 *
 * The store keeps at most 50 upcoming runs per schedule (the scheduler's
 * working set, flow/tick.c); what lies further ahead within
 * schedule_horizon days is computed from the definition, page by page, so
 * 10,000 schedules cost no rows. Due times are the cron's own, so a due
 * time the store has is the same run: it is shown once, with its row. */

#define NEXT_PAGE_MAX 1000
#define NEXT_SCHEDULES_CHUNK 1000

/* A two-number cursor "A.B" (due time and a tie-breaker). 0 or 1 (failed). */
static int pair_cursor(op_call_t *c, int64_t *a, int64_t *b) {
  const char *cur = op_str(c, "cursor");
  long long x = 0, y = 0;
  char tail = 0;
  *a = *b = 0;
  if (!cur) return 0;
  if (sscanf(cur, "%lld.%lld%c", &x, &y, &tail) != 2 || x < 0 || y < 0) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "cursor"),
            "'cursor' is not a cursor of this listing");
    return 1;
  }
  *a = x;
  *b = y;
  return 0;
}

static json_t *pair_cursor_json(int64_t a, int64_t b) {
  char buf[48];
  snprintf(buf, sizeof(buf), "%" PRId64 ".%" PRId64, a, b);
  return json_string(buf);
}

/* The window's start (num[4]: `from`, default now) and end (num[5]). */
static int horizon_params(op_call_t *c) {
  if (op_time_param(c, "from", clock_wall_ms(), &c->num[4])) return 1;
  c->num[5] = c->num[4] + (int64_t)(c->app->cfg.schedule_horizon * 86400.0 * 1000.0);
  c->num[2] = op_int(c, "limit", PAGE_DEFAULT);
  return 0;
}

static json_t *render_next(const schedule_t *sc, int64_t due, int64_t fire,
                           const sched_run_t *row) {
  return json_pack("{s:I, s:s, s:o, s:I, s:o, s:I, s:o, s:o}", "schedule_id",
                   (json_int_t)sc->id, "schedule", sc->name, "due", iso_in(due, sc->tz),
                   "due_ms", (json_int_t)due, "fire", iso_in(fire, sc->tz), "fire_ms",
                   (json_int_t)fire, "run_id", row ? json_integer(row->id) : json_null(),
                   "reason", row ? op_str_or_null(row->reason) : json_null());
}

/* The fire time of a computed due time: the scheduler's own jitter. */
static int64_t next_fire(const schedule_t *sc, const cron_spec_t *spec, int64_t due) {
  char seed[32];
  snprintf(seed, sizeof(seed), "%" PRId64, sc->id);
  return due + cron_jitter(spec->jitter_ms, seed, due);
}

/* One schedule's runs in (after, end], at most limit, merged with its
 * materialised upcoming rows; num[1] the cursor (last due shown). */
static int next_page(store_t *s, op_call_t *c, const schedule_t *sc, json_t *arr,
                     int64_t *last, int *more) {
  cron_spec_t spec;
  int rc = schedule_compile(sc, &spec, c->err, sizeof(c->err));
  if (rc) return rc;
  size_t limit = (size_t)c->num[2], n = 0;
  int64_t *due = malloc(limit * sizeof(*due));
  int64_t after = c->num[1] ? c->num[1] : c->num[4];
  sched_run_list_t rows = {0};
  calendar_set_t cals = {0};
  rc = due ? cron_between(&spec, after, c->num[5], due, limit, &n, more) : -ENOMEM;
  if (!rc) rc = calendars_load(s, sc->id, &cals);
  if (!rc && n) {
    run_filter_t f = {.schedule_id = sc->id, .states = 1u << RUN_UPCOMING,
                      .from_ms = due[0], .to_ms = due[n - 1] + 1};
    rc = store_runs_list(s, &f, &rows);
  }
  for (size_t i = 0, k = 0; !rc && i < n; i++) {
    while (k < rows.n && rows.v[k].due_ms < due[i]) k++;
    const sched_run_t *row = k < rows.n && rows.v[k].due_ms == due[i] ? &rows.v[k] : NULL;
    if (calendar_set_covers(&cals, due[i])) continue; /* skipped when due: not planned */
    json_array_append_new(arr, render_next(sc, due[i], row ? row->fire_ms
                                                            : next_fire(sc, &spec, due[i]), row));
  }
  if (n) *last = due[n - 1];
  calendar_set_release(&cals);
  sched_run_list_release(&rows);
  free(due);
  cron_spec_release(&spec);
  return rc;
}

static int next_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_t sc;
  int rc = find_schedule(s, c, &sc);
  if (rc) return rc;
  json_t *arr = json_array();
  int64_t last = 0;
  int more = 0;
  if (!sc.paused) rc = next_page(s, c, &sc, arr, &last, &more);
  if (rc) {
    json_decref(arr);
  } else {
    char cur[24];
    op_cursor_encode(last, 0x7e47, cur);
    c->result = json_pack("{s:I, s:b, s:I, s:I, s:o, s:o, s:o}", "schedule_id",
                          (json_int_t)sc.id, "paused", sc.paused, "from", (json_int_t)c->num[4],
                          "to", (json_int_t)c->num[5], "from_time", op_iso_time(c->num[4]),
                          "runs", arr, "next_cursor", more && last ? json_string(cur) : json_null());
  }
  schedule_release(&sc);
  return rc;
}

/* A schedule's upcoming runs over the whole horizon, a page at a time. The
 * cursor carries the last due time shown; `from` pins the window across
 * pages (default now, so the window's end moves with the clock). */
void op_schedules_next(op_call_t *c) {
  if (horizon_params(c)) return;
  const char *cursor = op_str(c, "cursor");
  uint32_t fp = 0;
  if (cursor && (op_cursor_decode(cursor, &c->num[1], &fp) || fp != 0x7e47)) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "cursor"),
            "'cursor' is not a cursor of this listing");
    return;
  }
  op_store(c, STORE_READ, next_fn, done_schedule);
}

/* ---- schedules.next_all: every schedule's next runs, in time order ---- */

/* One schedule in the merge: its spec and its next due time. */
struct next_src {
  schedule_t sc;
  cron_spec_t spec;
  calendar_set_t cals;
  int64_t due;
};

static int next_before(const struct next_src *a, const struct next_src *b) {
  return a->due < b->due || (a->due == b->due && a->sc.id < b->sc.id);
}

static void heap_down(struct next_src **h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < n && next_before(h[l], h[m])) m = l;
    if (l + 1 < n && next_before(h[l + 1], h[m])) m = l + 1;
    if (m == i) return;
    struct next_src *t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

/* Loads the unpaused schedules the caller may see (of `project` when set)
 * and each one's first due time past the cursor (num[1] due, num[3] id) or
 * `from`, within the window: the merge's sources, appended to *v. */
static int next_sources(store_t *s, op_call_t *c, const json_t *acct, const json_t *cals,
                        struct next_src **v,
                        size_t *n) {
  const char *project = op_str(c, "project");
  int64_t after_id = 0;
  size_t cap = 0;
  for (;;) {
    schedule_list_t l = {0};
    int rc = store_schedules_list(s, after_id, NEXT_SCHEDULES_CHUNK, &l);
    for (size_t i = 0; !rc && i < l.n; i++) {
      schedule_t *sc = &l.v[i];
      after_id = sc->id;
      if (sc->paused || (project && strcmp(project, sc->project) != 0) ||
          !principal_project_ok(c->who->projects, sc->project) ||
          (acct && !account_has(acct, ACCOUNT_PROJECTS, sc->project)))
        continue;
      struct next_src src = {.sc = *sc};
      if (schedule_compile(sc, &src.spec, c->err, sizeof(c->err))) continue;
      /* past the cursor: a later due time, or the same one of a later id */
      int64_t after = c->num[1] ? (sc->id > c->num[3] ? c->num[1] - 1 : c->num[1]) : c->num[4];
      if (cron_next(&src.spec, after, &src.due) || src.due > c->num[5]) {
        cron_spec_release(&src.spec);
        continue;
      }
      if (*n == cap) {
        cap = cap ? cap * 2 : 64;
        struct next_src *nv = realloc(*v, cap * sizeof(**v));
        if (!nv) rc = -ENOMEM;
        else *v = nv;
      }
      if (!rc) rc = calendars_set(cals, sc->id, &src.cals);
      if (rc) {
        cron_spec_release(&src.spec);
        break;
      }
      (*v)[(*n)++] = src;
      schedule_init(sc); /* now owned by the source */
    }
    size_t got = l.n;
    schedule_list_release(&l);
    if (rc) return rc;
    if (got < NEXT_SCHEDULES_CHUNK) return 0;
  }
}

static int next_all_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  c->err[0] = 0;
  struct next_src *v = NULL;
  size_t n = 0;
  /* accounts.upcoming (and `account`): the schedules of its projects */
  const char *account = op_str(c, "account");
  json_t *doc = NULL, *cals = NULL;
  int rc = account ? accounts_load(s, &doc) : 0;
  if (!rc && account && !json_object_get(doc, account)) {
    snprintf(c->err, sizeof(c->err), "no account '%.64s'", account);
    rc = SPD_ENOACCOUNT;
  }
  if (!rc) rc = calendars_doc(s, &cals);
  if (!rc) rc = next_sources(s, c, json_object_get(doc, account ? account : ""), cals, &v, &n);
  json_decref(cals);
  json_decref(doc);
  struct next_src **h = rc || !n ? NULL : malloc(n * sizeof(*h));
  if (!rc && n && !h) rc = -ENOMEM;
  for (size_t i = 0; h && i < n; i++) h[i] = &v[i];
  for (size_t i = n / 2; h && i-- > 0;) heap_down(h, n, i);
  json_t *arr = json_array(), *next = json_null();
  size_t live = h ? n : 0;
  for (size_t k = 0; !rc && live; k++) {
    struct next_src *top = h[0];
    if (k == (size_t)c->num[2]) {
      next = pair_cursor_json(c->num[1], c->num[3]);
      break;
    }
    if (calendar_set_covers(&top->cals, top->due)) k--; /* skipped when due: not planned */
    else
      json_array_append_new(arr, render_next(&top->sc, top->due,
                                             next_fire(&top->sc, &top->spec, top->due), NULL));
    c->num[1] = top->due;
    c->num[3] = top->sc.id;
    if (cron_next(&top->spec, top->due, &top->due) || top->due > c->num[5]) h[0] = h[--live];
    heap_down(h, live, 0);
  }
  for (size_t i = 0; i < n; i++) {
    schedule_release(&v[i].sc);
    cron_spec_release(&v[i].spec);
    calendar_set_release(&v[i].cals);
  }
  free(v);
  free(h);
  if (rc) {
    json_decref(arr);
    json_decref(next);
    return rc;
  }
  c->result = json_pack("{s:I, s:I, s:o, s:o, s:o}", "from", (json_int_t)c->num[4], "to",
                        (json_int_t)c->num[5], "from_time", op_iso_time(c->num[4]), "runs", arr,
                        "next_cursor", next);
  return 0;
}

/* The next runs of every schedule within the horizon, merged in time order
 * (then schedule id): a k-way merge over each schedule's cron. A page costs
 * one read of the schedules and one cron search per schedule, plus one per
 * run shown. */
void op_schedules_next_all(op_call_t *c) {
  if (horizon_params(c) || pair_cursor(c, &c->num[1], &c->num[3])) return;
  op_store(c, STORE_READ, next_all_fn, done_schedule);
}

/* ---- runs.missed: missed runs across schedules ---- */

#define MISSED_SCAN_MAX 20000 /* rows one page reads at most (project filters) */

/* The schedules the caller may see (of `project` when set): which runs to
 * keep. *all = 1 when every schedule is kept (no filter to apply). */
static int missed_scope(store_t *s, op_call_t *c, int64_t **ids, size_t *n, int *all) {
  const char *project = op_str(c, "project");
  *all = !project && !c->who->projects;
  if (*all) return 0;
  int64_t after_id = 0;
  size_t cap = 0;
  for (;;) {
    schedule_list_t l = {0};
    int rc = store_schedules_list(s, after_id, NEXT_SCHEDULES_CHUNK, &l);
    for (size_t i = 0; !rc && i < l.n; i++) {
      after_id = l.v[i].id;
      if ((project && strcmp(project, l.v[i].project) != 0) ||
          !principal_project_ok(c->who->projects, l.v[i].project))
        continue;
      if (*n == cap) {
        cap = cap ? cap * 2 : 64;
        int64_t *nv = realloc(*ids, cap * sizeof(**ids));
        if (!nv) {
          rc = -ENOMEM;
          break;
        }
        *ids = nv;
      }
      (*ids)[(*n)++] = l.v[i].id; /* ascending: the listing's order */
    }
    size_t got = l.n;
    schedule_list_release(&l);
    if (rc) return rc;
    if (got < NEXT_SCHEDULES_CHUNK) return 0;
  }
}

static int id_cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Reads missed runs after (num[1] due, num[3] id), in (due, id) order: the
 * rest of the cursor's due time, then later ones. */
static int missed_read(store_t *s, op_call_t *c, size_t limit, sched_run_list_t *out) {
  run_filter_t f = {.schedule_id = c->num[0], .states = 1u << RUN_MISSED,
                    .limit = limit};
  int64_t lo = c->num[4], hi = c->num[5];
  if (c->num[1] || c->num[3]) {
    run_filter_t tie = f;
    tie.from_ms = c->num[1];
    tie.to_ms = c->num[1] + 1;
    tie.after_id = c->num[3];
    int rc = store_runs_list(s, &tie, out);
    if (rc || out->n >= limit) return rc;
    f.limit = limit - out->n;
    lo = c->num[1] + 1 > lo ? c->num[1] + 1 : lo;
  }
  f.from_ms = lo;
  f.to_ms = hi;
  if (hi && lo >= hi) return 0;
  return store_runs_list(s, &f, out);
}

static int missed_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  c->num[0] = 0;
  schedule_t sc;
  if (op_str(c, "schedule")) {
    int rc = find_schedule(s, c, &sc);
    if (rc) return rc;
    schedule_release(&sc);
  }
  int64_t *ids = NULL;
  size_t nids = 0;
  int all = 1, rc = c->num[0] ? 0 : missed_scope(s, c, &ids, &nids, &all);
  size_t limit = (size_t)c->num[2], scanned = 0;
  json_t *arr = json_array();
  int done = 0;
  while (!rc && !done && json_array_size(arr) < limit && scanned < MISSED_SCAN_MAX) {
    sched_run_list_t l = {0};
    size_t want = all || c->num[0] ? limit - json_array_size(arr) : 500;
    rc = missed_read(s, c, want, &l);
    done = !rc && l.n < want;
    for (size_t i = 0; !rc && i < l.n && json_array_size(arr) < limit; i++) {
      c->num[1] = l.v[i].due_ms;
      c->num[3] = l.v[i].id;
      scanned++;
      if (all || c->num[0] || bsearch(&l.v[i].schedule_id, ids, nids, sizeof(*ids), id_cmp))
        json_array_append_new(arr, render_run(&l.v[i], NULL));
    }
    if (!rc && json_array_size(arr) >= limit && l.n) done = 0;
    sched_run_list_release(&l);
  }
  free(ids);
  if (rc) {
    json_decref(arr);
    return rc;
  }
  c->result = json_pack("{s:o, s:o}", "runs", arr, "next_cursor",
                        done ? json_null() : pair_cursor_json(c->num[1], c->num[3]));
  return 0;
}

/* Missed runs across every schedule (or one: `schedule`), of a project when
 * set, by due time in [from, to), a page at a time. With a project, a page
 * reads at most MISSED_SCAN_MAX runs: it may come back short, with a cursor
 * to go on. */
void op_runs_missed(op_call_t *c) {
  int64_t from = 0, to = 0;
  if (op_time_param(c, "from", 0, &from) || op_time_param(c, "to", 0, &to)) return;
  if (to && from >= to) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "from"), "'from' must be before 'to'");
    return;
  }
  c->num[4] = from;
  c->num[5] = to;
  c->num[2] = op_int(c, "limit", PAGE_DEFAULT);
  if (pair_cursor(c, &c->num[1], &c->num[3])) return;
  op_store(c, STORE_READ, missed_fn, done_schedule);
}
